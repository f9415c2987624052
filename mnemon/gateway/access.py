"""What a gateway request may do (stdlib only: the remote CLI and the gateway both read it).

The remote CLI sends a memory command's argv through the ``cli`` tool; the gateway runs it
against the token's store. Only the memory commands travel, without global flags (the token
names the store and the gateway its data directory) and without paths on the gateway's machine
(``import`` reads ``-``: the client sends the file's contents; ``export`` prints: the client
writes ``--output`` itself). Which calls write decides the 403 of a read-only token.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

# Memory commands with a remote form (argv[0] of the cli tool).
REMOTE_COMMANDS = frozenset({
    "remember", "recall", "search", "show", "forget", "link", "related", "gc", "status", "log", "receipt",
    "import", "export",
})
# Commands that act on the store but have no remote form: said so plainly on a remote store.
LOCAL_ONLY_COMMANDS = frozenset({"doctor", "viz", "embed"})
GLOBAL_FLAGS = ("--data-dir", "--store", "--readonly", "--embed-model", "--version")
WRITE_TOOLS = frozenset({"remember", "link", "forget", "import"})


class Refused(Exception):
    """A request the gateway will not run; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _options(argv: list[str]) -> list[str]:
    """The words before ``--`` (after it everything is content)."""
    return argv[: argv.index("--")] if "--" in argv else argv


def _has_flag(words: list[str], *flags: str) -> bool:
    return any(w == f or w.startswith(f + "=") for w in words for f in flags)


def check_argv(argv: object) -> list[str]:
    """The argv of a ``cli`` call, or :class:`Refused` (400) when it may not run on a gateway."""
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise Refused(400, 'argument "argv" must be a non-empty list of strings')
    command, words = argv[0], _options(argv[1:])
    if command not in REMOTE_COMMANDS:
        raise Refused(400, f'command "{command}" has no remote form')
    if _has_flag(words, *GLOBAL_FLAGS):
        raise Refused(400, "global flags are not accepted by the gateway (the token names the store)")
    if command == "gc" and _has_flag(words, "--compact"):
        raise Refused(400, "gc --compact has no remote form: run it on the gateway's machine")
    if command == "export" and _has_flag(words, "--output", "-o"):
        raise Refused(400, "export --output is written by the client, not the gateway")
    if command == "import":
        paths = [w for w in words if w == "-" or not w.startswith("-")]
        paths += argv[argv.index("--") + 1:] if "--" in argv else []
        if paths != ["-"]:
            raise Refused(400, "import reads its draft from the request (\"-\"), never from a path on the gateway")
    return list(argv)


def cli_words(arguments: dict[str, Any]) -> object:
    """The argv a ``cli`` call carries: as sent, or for a ``raw`` call (bytes that are not UTF-8) each word
    decoded from base64 into the string a local process's argv holds for those bytes (lone surrogates)."""
    words = arguments.get("argv")
    if arguments.get("raw") is not True:
        return words
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise Refused(400, 'argument "argv" must be a non-empty list of strings')
    return [raw_bytes(w, "argv's words").decode("utf-8", "surrogateescape") for w in words]


def raw_bytes(text: str, what: str) -> bytes:
    """The bytes a ``raw`` call carries in ``text`` (base64); a 400 naming ``what`` if it is not base64."""
    try:
        return base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        raise Refused(400, f'a "raw" call carries {what} in base64') from None


def argv_writes(argv: list[str]) -> bool:
    """Whether this command line can change the store."""
    command, words = argv[0], _options(argv[1:])
    if command in ("remember", "link", "forget"):
        return True
    if command == "import":
        return not _has_flag(words, "--dry-run")
    if command == "gc":
        return _has_flag(words, "--keep", "--compact")
    return False


def call_writes(tool: str, arguments: Any) -> bool:
    """Whether a tools/call can change the store (a malformed cli argv counts as a write: refuse early)."""
    if tool == "cli":
        try:
            return argv_writes(check_argv(cli_words(arguments) if isinstance(arguments, dict) else None))
        except Refused:
            return True
    if tool == "import":
        return not (isinstance(arguments, dict) and arguments.get("dry_run") is True)
    return tool in WRITE_TOOLS
