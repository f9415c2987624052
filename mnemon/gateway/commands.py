"""One gateway tool call run as the command the shell runs (no SDK imports: worker processes load this).

:func:`execute` is the whole call on the gateway's side: the token's store, ``--readonly`` for a
read-only token, the oplog signed with the token's name, then ``mcp.run_tool`` (the stdio server's
tools) or the ``cli`` tool (one memory command line of the remote CLI). It runs either in a
command worker process (``workers.Pool``) or, with ``--workers 0``, in the gateway's own process.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mnemon import mcp as tools
from mnemon.gateway import access

if TYPE_CHECKING:
    from mnemon.cli.state import GlobalOptions

Outcome = tuple[str, bool, "dict[str, Any] | None"]  # a tool call's (text, is_error, structured content)

CLI_TOOL: dict[str, Any] = {
    "description": "Run one mnemon memory command line on this store (the remote CLI's transport): argv without "
    "the program name or global flags; stdin is what the command reads for '-'. Returns its stdout as text and "
    "exit_code, stdout and stderr as structured content.",
    "inputSchema": {
        "type": "object", "additionalProperties": False, "required": ["argv"],
        "properties": {
            "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "stdin": {"type": "string"},
            "readonly": {"type": "boolean", "description": "run as with --readonly"},
            "raw": {"type": "boolean", "description": "argv's words and stdin are base64 of bytes that are not all "
                    "UTF-8, as the client's OS gave them (JSON carries no such string)"},
        },
    },
}


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a call runs for: the token's name (never the token), its store, whether it may write."""

    name: str
    store: str
    read_only: bool


def execute(run: tools.Runner, options: GlobalOptions, data_dir: str, caller: Caller, tool: str,
            args: dict[str, Any], test_clock: bool = False) -> Outcome:
    """Run one tool call for ``caller``; ``test_clock`` (``--test-clock``, tests only) lets the ``cli`` tool's
    ``clock`` argument fix the engine's clock, which every other gateway refuses as an unknown argument."""
    from mnemon.store import oplog

    # Read-only calls (a read-only token, or the remote CLI's --readonly) read the live store: the gateway
    # serves a store other tokens write, which --readonly's immutable snapshot open would not follow.
    options = replace(options, store=caller.store, readonly=options.readonly or caller.read_only, readonly_live=True,
                      environ=None, data_dir=data_dir)
    with oplog.acting_as(caller.name):  # the oplog names who wrote: the token's name
        if tool != "cli":
            text, is_error = tools.run_tool(run, options, tool, args)
            return text, is_error, None
        return _run_cli(run, options, args, test_clock)


def _run_cli(run: tools.Runner, options: GlobalOptions, args: dict[str, Any], test_clock: bool) -> Outcome:
    known = set(CLI_TOOL["inputSchema"]["properties"]) | ({"clock"} if test_clock else set())
    unknown = sorted(set(args) - known)
    stdin, readonly, raw = args.get("stdin", ""), args.get("readonly", False), args.get("raw", False)
    try:
        if unknown:
            raise access.Refused(400, f"unknown argument(s): {', '.join(unknown)}")
        if not isinstance(stdin, str) or not isinstance(readonly, bool) or not isinstance(raw, bool):
            raise access.Refused(400, 'arguments "stdin" (a string), "readonly" and "raw" (booleans) have the wrong '
                                 "type")
        argv = access.check_argv(access.cli_words(args))
        given: str | bytes = access.raw_bytes(stdin, "stdin") if raw else stdin
        if "clock" in args:
            options.engine_kwargs = {"clock": _fixed_clock(args["clock"])}
    except access.Refused as exc:
        return failed(f"Error: {exc}")
    if readonly:
        options.readonly = True
    code, out, err = tools.run_argv(run, options, argv, given)
    return out if code == 0 else tools.error_line(err, argv[0]), code != 0, \
        {"exit_code": code, "stdout": out, "stderr": err}


def _fixed_clock(value: object) -> Callable[[], datetime]:
    """The engine clock of a ``--test-clock`` call: the moment the test's own clock showed (ISO 8601, with
    its offset), as the test's in-process run would have used it."""
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise access.Refused(400, 'argument "clock" must be an ISO 8601 time with its UTC offset')
    return lambda: moment


def failed(text: str, tool: str = "cli") -> Outcome:
    """An error outcome; the cli tool's carries the command status the remote CLI prints."""
    return text, True, ({"exit_code": 1, "stdout": "", "stderr": text + "\n"} if tool == "cli" else None)


def overran(did_not_run: bool, tool: str, timeout: float) -> Outcome:
    """The error of a call that ran over ``--call-timeout``: whether its command ran is said exactly."""
    limit = f"{timeout:g} s"
    if did_not_run:
        text = f"Error: the gateway is busy: no command slot within {limit} (the {tool} call did not run)"
    else:
        text = (f"Error: the {tool} call ran over {limit}; the gateway has taken it and it may yet complete "
                "(check before repeating a write)")
    return failed(text, tool)


def warm(options: GlobalOptions, run: tools.Runner) -> None:
    """Load the compiled kernels and run the everyday commands once on a throwaway store, as the warm server
    does before it listens: otherwise the first calls import and compile, and recall runs the numpy beam
    (about twice as slow as the compiled one at 1k)."""
    import kernels

    kernels.warmup()
    scratch = tempfile.mkdtemp(prefix="mnemon-gateway-warm-")
    quiet = replace(options, data_dir=scratch, store="default", readonly=False,
                    environ={"MNEMON_EMBED_ENDPOINT": "http://127.0.0.1:9"})  # never a real embedder
    try:
        for argv in (["remember", "Chose SQLite because the store must stay one file", "--cat", "decision"],
                     ["remember", "SQLite WAL mode lets readers run during writes"], ["recall", "why SQLite"],
                     ["search", "SQLite"], ["status"], ["log"], ["export"]):
            tools.run_argv(run, quiet, argv)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
