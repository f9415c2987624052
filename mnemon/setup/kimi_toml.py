"""Register our hooks in Kimi Code's ``config.toml`` as ``[[hooks]]`` blocks, editing the text only.

The file is the user's and never re-serialised: install appends three blocks (SessionStart, UserPromptSubmit,
Stop; ``event``, ``command``, ``timeout = 10``, as the Go program writes them), each after one blank line;
eject removes exactly the ``[[hooks]]`` blocks whose command points into our hook directory, with the
blank line before each, so the rest of the file comes back byte for byte. A block runs from its
``[[hooks]]`` line to the next line that starts a table (``[``), which is how the Go program finds them
too. Kimi refuses a config with unknown keys, so the file is checked with ``tomllib`` before and after
the edit; a file that does not parse is left alone with an error. The Go eject removes a block with every
blank and comment line up to the next table; ours keeps a comment there (it may head the user's next table,
and setup never writes one) and removes the blank lines only where nothing but blank lines follows
(``strip_blocks``). Kimi runs ``command`` with ``sh -c``, hence the shell quoting. stdlib only.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mnemon.errors import InputError
from mnemon.setup import files
from mnemon.setup import manifest as manifest_records
from mnemon.setup.settings import command_for, markers
from mnemon.setup.targets import Target

TIMEOUT_SECONDS = 10
_HOOKS_HEADER = re.compile(r"^[ \t]*\[\[[ \t]*hooks[ \t]*\]\][ \t]*(#.*)?$")
_TABLE = re.compile(r"^[ \t]*\[")


def _check(text: str, path: Path, what: str) -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: no TOML parser in the stdlib; the edit is still text-exact
        return
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path} {what} ({exc}); fix or move it, then run setup again") from None
    except RecursionError:  # tomllib recurses per nested array or inline table
        raise InputError(f"{path} is nested too deeply to edit; fix or move it, then run setup again") from None


def strip_blocks(text: str, marks: tuple[str, ...]) -> tuple[str, int]:
    """``text`` without the ``[[hooks]]`` blocks that mention our hook dir (and the blank line before each, and
    the blank lines that end the file after one)."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    removed = 0
    i = 0
    while i < len(lines):
        if _HOOKS_HEADER.match(lines[i].rstrip("\r\n")):
            j = i + 1
            while j < len(lines) and not _TABLE.match(lines[j]):
                j += 1
            # Blank and comment lines before the next table are not the block's: they are the separator
            # install put before the next block (or the user's trailing lines, or a comment heading the
            # next table), so they stay; eating them lost a file's trailing blank lines on eject.
            while j > i + 1 and (not lines[j - 1].strip() or lines[j - 1].lstrip().startswith("#")):
                j -= 1
            block = "".join(lines[i:j])
            if any(m in block for m in marks):
                if out and out[-1].strip() == "":
                    out.pop()
                removed += 1
                i = j
                if all(not line.strip() for line in lines[j:]):
                    # Only blank lines left after our block: they trail what a setup wrote (ours never writes
                    # any there; the Go installer's layout or an editor may), not text of the user's, and the Go
                    # eject drops every line up to the next table, so they go with the block. Comment lines
                    # stay: a comment is the user's, wherever it is (the Go eject drops those too).
                    i = len(lines)
                continue
        out.append(lines[i])
        i += 1
    return "".join(out), removed


def block(event: str, script: Path) -> str:
    # JSON string escapes are valid TOML basic-string escapes (what Go's %q gives for a path).
    return (f"[[hooks]]\nevent = {json.dumps(event)}\ncommand = {json.dumps(command_for(script), ensure_ascii=False)}\n"
            f"timeout = {TIMEOUT_SECONDS}\n")


def plan_install(target: Target, path: Path, hook_dir: Path, scripts: dict[str, Path],
                 manifest: dict[str, Any]) -> str:
    text = files.read_config(path)
    state = manifest_records.install_state(manifest, exists=text is not None)
    text = text or ""
    _check(text, path, "is not valid TOML")
    text, _ = strip_blocks(text, markers(hook_dir))
    if text and not text.endswith("\n"):
        text += "\n"
        state["added_newline"] = True
    parts = [block(target.events[h], scripts[h]) for h in target.events if h in scripts]
    new = text + "".join(("\n" if text or k else "") + part for k, part in enumerate(parts))
    _check(new, path, "cannot take our [[hooks]] blocks (is `hooks` defined another way?)")
    return new


def plan_eject(target: Target, path: Path, hook_dir: Path, manifest: dict[str, Any] | None) -> str | None:
    text = files.read_config(path)
    if text is None:
        return None
    _check(text, path, "is not valid TOML")
    state, known = manifest_records.eject_state(manifest)
    new, removed = strip_blocks(text, markers(hook_dir))
    if not removed:
        return text
    if state.get("added_newline") and new.endswith("\n"):
        new = new[:-1]
    if not new.strip() and state.get("created_file", not known):
        return None
    return new
