"""Register our hooks in Hermes' ``~/.hermes/config.yaml`` (``hooks.<event>: [{command, timeout}]``) as text edits.

The Go program re-marshals the whole file with yaml.v3, which drops the user's comments; we edit the
text instead. Install appends one list item per hook under its event in the top-level block mapping
``hooks:`` (adding the event key, or ``hooks:`` itself at the end of the file, when missing); eject
removes exactly the items whose command points into our hook directory, then the event keys and
``hooks:`` that we added and that are empty again. Every edit is verified by parsing the new text
with PyYAML and comparing it with the old one: everything but our items must be equal, otherwise the
file is left unchanged with an error (a layout we do not edit, such as flow-style ``hooks: {a: …}``).
PyYAML is imported here only, so the base CLI start does not pay for it. Hermes runs the command with
``shlex.split`` and no shell: the entry is the script's absolute path, shell-quoted when it must be.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

from mnemon.errors import InputError
from mnemon.setup import files
from mnemon.setup import manifest as manifest_records
from mnemon.setup.settings import markers, ours_in
from mnemon.setup.targets import Target

TIMEOUTS = {"prime": 10, "remind": 10, "nudge": 10, "compact": 30}
_HOOKS_LINE = re.compile(r"^hooks:[ \t]*(#.*)?$")
_HOOKS_EMPTY_INLINE = re.compile(r"^hooks:[ \t]*(\{[ \t]*\}|null|~)?[ \t]*(#.*)?$")
_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")


def _yaml() -> Any:
    import yaml  # deferred: only the Hermes path needs a YAML parser

    return yaml


def _parse(text: str, path: Path) -> dict[str, Any]:
    yaml = _yaml()
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{path} is not valid YAML ({' '.join(str(exc).split())}); fix or move it, "
                         "then run setup again") from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise InputError(f"{path} is nested too deeply to edit; fix or move it, then run setup again") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"{path} must hold a YAML mapping")
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise InputError(f'"hooks" in {path} is not a mapping; fix it, then run setup again')
    return data


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _blank_or_comment(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


class _Layout:
    """Line ranges of the ``hooks:`` block, its event keys and their list items."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.hooks = next((i for i, ln in enumerate(lines) if _HOOKS_LINE.match(ln.rstrip("\r\n"))), None)
        self.end = self.hooks + 1 if self.hooks is not None else len(lines)  # one past the block's last line
        self.child = "  "
        if self.hooks is None:
            return
        i = self.hooks + 1
        while i < len(lines) and (_blank_or_comment(lines[i]) or lines[i][:1] == " "):
            if not _blank_or_comment(lines[i]):
                self.end = i + 1
            i += 1
        first = next((ln for ln in lines[self.hooks + 1:self.end] if not _blank_or_comment(ln)), None)
        if first is not None:
            self.child = " " * _indent(first)

    def events(self) -> dict[str, tuple[int, int]]:
        """event → (key line, one past its last line)."""
        if self.hooks is None:
            return {}
        width = len(self.child)
        keys = [i for i in range(self.hooks + 1, self.end)
                if not _blank_or_comment(self.lines[i]) and _indent(self.lines[i]) == width
                and not self.lines[i].lstrip().startswith("- ")]
        out = {}
        for n, i in enumerate(keys):
            stop = keys[n + 1] if n + 1 < len(keys) else self.end
            last = i + 1
            for j in range(i + 1, stop):
                if not _blank_or_comment(self.lines[j]):
                    last = j + 1
            name = self.lines[i].strip().split(":", 1)[0].strip().strip("'\"")
            out[name] = (i, last)
        return out

    def items(self, key: int, stop: int) -> list[tuple[int, int]]:
        """The list items of the event whose key is on line ``key``: (first line, one past the last)."""
        starts = [j for j in range(key + 1, stop) if self.lines[j].lstrip().startswith("- ")
                  or self.lines[j].strip() == "-"]
        if not starts:
            return []
        dash = _indent(self.lines[starts[0]])
        starts = [j for j in starts if _indent(self.lines[j]) == dash]
        out = []
        for n, j in enumerate(starts):
            stop_j = starts[n + 1] if n + 1 < len(starts) else stop
            last = j + 1
            for k in range(j + 1, stop_j):
                if not _blank_or_comment(self.lines[k]) and _indent(self.lines[k]) > dash:
                    last = k + 1
            out.append((j, last))
        return out


def _command(script: Path) -> str:
    text = str(script)
    return text if _SAFE.fullmatch(text) else json.dumps(shlex.quote(text))


def _item(indent: str, script: Path, timeout: int) -> list[str]:
    return [f"{indent}- command: {_command(script)}\n", f"{indent}  timeout: {timeout}\n"]


def _strip(lines: list[str], marks: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Remove our list items; returns the lines and the events that lost an item."""
    touched: list[str] = []
    while True:
        layout = _Layout(lines)
        found = None
        for event, (key, stop) in layout.events().items():
            for first, last in layout.items(key, stop):
                if any(m in "".join(lines[first:last]) for m in marks):
                    found = (event, first, last)
                    break
            if found:
                break
        if found is None:
            return lines, touched
        event, first, last = found
        lines = lines[:first] + lines[last:]
        if event not in touched:
            touched.append(event)


def _drop_empty_event(lines: list[str], event: str) -> list[str]:
    layout = _Layout(lines)
    span = layout.events().get(event)
    if span is None or layout.items(*span) or lines[span[0]].split(":", 1)[1].split("#")[0].strip():
        return lines
    return lines[:span[0]] + lines[span[0] + 1:] if span[1] - span[0] == 1 else lines


def _without_ours(data: dict[str, Any], marks: tuple[str, ...]) -> dict[str, Any]:
    """The parsed config with our items (and event lists that only held ours) taken out, for comparison."""
    out = dict(data)
    hooks = out.get("hooks")
    if isinstance(hooks, dict):  # empty lists, null events and an empty or null `hooks` compare as absent
        kept = {}
        for event, items in hooks.items():
            if isinstance(items, list):
                rest = [i for i in items if not ours_in(i, marks)]
                if rest:
                    kept[event] = rest
            elif items is not None:
                kept[event] = items
        out["hooks"] = kept
    if not out.get("hooks", True):
        del out["hooks"]
    return out


def _verify(before: dict[str, Any], new_text: str, path: Path, marks: tuple[str, ...],
            expected: dict[str, list[dict[str, Any]]]) -> None:
    try:
        after = _parse(new_text, path) if new_text.strip() else {}
    except InputError:  # our edit broke the layout (an event written inline, say): refuse, change nothing
        after = None
    ok = after is not None and _without_ours(after, marks) == _without_ours(before, marks)
    hooks = (after or {}).get("hooks") or {}
    for event, entries in expected.items():
        mine = [i for i in hooks.get(event) or [] if ours_in(i, marks)]
        ok = ok and mine == entries
    if not ok:
        raise InputError(f"cannot edit the hooks in {path} safely (is a part of `hooks:` written in flow style?); "
                         "it is left unchanged; add the entries by hand or move the file")


def plan_install(target: Target, path: Path, hook_dir: Path, scripts: dict[str, Path],
                 manifest: dict[str, Any]) -> str:
    text = files.read_config(path)
    state = manifest_records.install_state(manifest, exists=text is not None)
    text = text or ""
    before = _parse(text, path)
    marks = markers(hook_dir)
    lines, touched = _strip(text.splitlines(keepends=True), marks)
    created: list[str] = list(state.get("created_events", []))
    emptied = _Layout(lines)
    for event in touched:  # it held only mnemon entries (an earlier install): eject may drop it
        span = emptied.events().get(event)
        if span is not None and not emptied.items(*span) and event not in created:
            created.append(event)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
        state["added_newline"] = True
    layout = _Layout(lines)
    if layout.hooks is None:
        inline = next((i for i, ln in enumerate(lines) if _HOOKS_EMPTY_INLINE.match(ln.rstrip("\r\n"))), None)
        if inline is not None:  # `hooks: {}` / `hooks:` null: becomes a block; eject writes the line back
            state.setdefault("hooks_line", lines[inline])
            lines[inline] = "hooks:\n"
        elif any(re.match(r"^['\"]?hooks['\"]?[ \t]*:", ln) for ln in lines):
            raise InputError(f"cannot edit the hooks in {path} safely (`hooks:` is written in flow style); "
                             "it is left unchanged; write it as a block mapping or add the entries by hand")
        else:
            lines.append("hooks:\n")
            state["created_hooks"] = True
        layout = _Layout(lines)
    expected: dict[str, list[dict[str, Any]]] = {}
    for hook, event in target.events.items():
        if hook not in scripts:
            continue
        layout = _Layout(lines)
        span = layout.events().get(event)
        if span is None:
            item_indent = layout.child * 2  # the file's own indent step
            new = [f"{layout.child}{event}:\n", *_item(item_indent, scripts[hook], TIMEOUTS[hook])]
            lines[layout.end:layout.end] = new
            if event not in created:
                created.append(event)
        else:
            items = layout.items(*span)
            item_indent = " " * _indent(lines[items[0][0]]) if items else layout.child * 2
            lines[span[1]:span[1]] = _item(item_indent, scripts[hook], TIMEOUTS[hook])
        expected[event] = [{"command": _yaml_command(scripts[hook]), "timeout": TIMEOUTS[hook]}]
    state["created_events"] = created
    new_text = "".join(lines)
    _verify(before, new_text, path, marks, expected)
    return new_text


def _yaml_command(script: Path) -> str:
    text = str(script)
    return text if _SAFE.fullmatch(text) else shlex.quote(text)


def plan_eject(target: Target, path: Path, hook_dir: Path, manifest: dict[str, Any] | None) -> str | None:
    text = files.read_config(path)
    if text is None:
        return None
    before = _parse(text, path)
    state, known = manifest_records.eject_state(manifest)
    marks = markers(hook_dir)
    lines, touched = _strip(text.splitlines(keepends=True), marks)
    if not touched:
        return text
    for event in (state.get("created_events", []) if known else touched):
        lines = _drop_empty_event(lines, event)
    layout = _Layout(lines)
    if layout.hooks is not None and not layout.events() and layout.end == layout.hooks + 1:
        if state.get("hooks_line"):
            lines[layout.hooks] = state["hooks_line"]
        elif state.get("created_hooks", not known):
            del lines[layout.hooks]
    if state.get("added_newline") and lines and lines[-1].endswith("\n"):
        lines[-1] = lines[-1][:-1]
    new_text = "".join(lines)
    _verify(before, new_text, path, marks, {})
    if not new_text.strip() and state.get("created_file", not known):
        return None
    return new_text
