"""Register our hook scripts in a host's JSON config, and take exactly them out again, as text edits.

A host's config belongs to the user: we add entries whose command runs a script inside our own
hook directory and ``eject`` removes those entries and nothing else, splicing the text with
``jsonc.Document`` so comments, order and formatting stay as they were. What had to be created to
hold our entries (the file, ``hooks``, an event list, ``version``) is recorded in the manifest beside
the scripts, so eject also removes those containers and the file compares byte for byte with what
it was before setup. Without a manifest (an install by the Go program, or one whose hook directory
was removed) eject follows the Go program: event lists we emptied, an emptied ``hooks`` and a file
left empty are removed.

The shapes (setup-targets.md):
- ``claude``/``codex``: ``hooks.<Event>: [{hooks: [{type: "command", command, timeout}]}]`` (mnemon's
  own 15 s timeout, kept from earlier releases).
- ``claude-plain`` (Qoder, QoderWork, CodeBuddy, WorkBuddy): the same groups with no timeout, matcher
  or ``loop_limit``, as the Go program writes them.
- ``trae``: ``version: 1`` plus the groups with ``timeout: 30``; the Stop group has ``loop_limit: 1``.
- ``cursor``: ``version: 1`` plus flat ``hooks.<event>: [{command}]``.
- ``zcode``: ``hooks.enabled = true`` plus ``hooks.events.<Event>: [{matcher?, hooks: [{type: "process",
  command: "bash", args: [<script>], enabled, timeoutMs: 30000, statusMessage}]}]``.
stdlib only.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mnemon.errors import InputError
from mnemon.setup import jsonc
from mnemon.setup import manifest as manifest_records
from mnemon.setup.targets import Target

HOOK_TIMEOUT_SECONDS = 15  # claude-code/codex: the host kills a hung hook; our scripts cap mnemon at 10 s
ZCODE_STATUS = {
    "prime": "Loading Mnemon context", "remind": "Checking Mnemon recall guidance",
    "nudge": "Checking Mnemon writeback guidance",
}
ZCODE_MATCHER = {"prime": "startup|clear|compact"}


def command_for(script: Path) -> str:
    # Hosts run the command through a shell: quote it so a home directory with spaces still works.
    return shlex.quote(str(script))


def _events_root(target: Target) -> list[str]:
    return ["hooks", "events"] if target.registration == "zcode" else ["hooks"]


def _flat(target: Target) -> bool:
    return target.registration == "cursor"


def _entry(target: Target, hook: str, script: Path) -> dict[str, Any]:
    kind = target.registration
    if kind == "cursor":
        return {"command": command_for(script)}
    if kind == "zcode":
        group: dict[str, Any] = {"matcher": ZCODE_MATCHER[hook]} if hook in ZCODE_MATCHER else {}
        group["hooks"] = [{"type": "process", "command": "bash", "args": [str(script)], "enabled": True,
                           "timeoutMs": 30000, "statusMessage": ZCODE_STATUS[hook]}]
        return group
    inner: dict[str, Any] = {"type": "command", "command": command_for(script)}
    if kind in ("claude", "codex"):
        inner["timeout"] = HOOK_TIMEOUT_SECONDS
    elif kind == "trae":
        inner["timeout"] = 30
        if hook == "nudge":  # TRAE's Stop may block; loop_limit caps the continuations it allows
            return {"loop_limit": 1, "hooks": [inner]}
    return {"hooks": [inner]}


def ours_in(value: Any, markers: Sequence[str]) -> bool:
    """Does any string inside ``value`` point into our hook directory?"""
    if isinstance(value, str):
        return any(m in value for m in markers)
    if isinstance(value, dict):
        return any(ours_in(v, markers) for v in value.values())
    if isinstance(value, list):
        return any(ours_in(v, markers) for v in value)
    return False


def markers(hook_dir: Path) -> tuple[str, ...]:
    """Substrings that identify our commands: the absolute hook dir, and the relative form an older
    installer wrote for a local Claude Code install (``.claude/hooks/mnemon/``)."""
    relative = f"{hook_dir.parent.parent.name}/{hook_dir.parent.name}/{hook_dir.name}/"
    return (str(hook_dir) + os.sep, relative)


def _strip(doc: jsonc.Document, path: list[Any], target: Target, marks: Sequence[str]) -> bool:
    """Remove our entries from the event list at ``path``; a user's group that also holds our hook keeps its
    other hooks. True when something was removed."""
    node = doc.node(path)
    if node is None or node.kind != "array":
        return False
    touched = False
    for index in reversed(range(len(node.members))):
        entry = doc.get([*path, index])
        if _flat(target) or not isinstance(entry, dict) or not isinstance(entry.get("hooks"), list):
            if isinstance(entry, dict) and ours_in(entry, marks):
                doc.delete([*path, index])
                touched = True
            continue
        inner = entry["hooks"]
        mine = [i for i, h in enumerate(inner) if ours_in(h, marks)]
        if not mine:
            continue
        touched = True
        if len(mine) == len(inner):
            doc.delete([*path, index])
        else:
            for i in reversed(mine):
                doc.delete([*path, index, "hooks", i])
    return touched


def _ensure(doc: jsonc.Document, path: list[Any], value: Any, created: list[list[Any]]) -> None:
    """``doc.set`` at a missing ``path``, noting every container it creates."""
    depth = len(path)
    while depth > 0 and doc.node(path[:depth]) is None:
        depth -= 1
    for k in range(depth + 1, len(path) + 1):
        created.append(list(path[:k]))
    doc.set(path, value)


def load(path: Path) -> jsonc.Document | None:
    return jsonc.read(path)


def plan_install(target: Target, path: Path, hook_dir: Path, scripts: dict[str, Path],
                 manifest: dict[str, Any]) -> str:
    """The config text with our hooks registered (old entries of ours replaced); notes what it created."""
    doc = load(path)
    state = manifest_records.install_state(manifest, exists=doc is not None)
    doc = doc if doc is not None else jsonc.Document("")
    created: list[list[Any]] = [list(p) for p in state.get("created", [])]
    restore: dict[str, Any] = dict(state.get("restore", {}))
    versioned = target.registration in ("cursor", "trae")  # their hooks.json starts with "version": 1
    if doc.root is None:  # an empty (or comments-only) file: eject gives its text back
        state.setdefault("empty_text", doc.text)
        doc.set(["version"] if versioned else ["hooks"], 1 if versioned else {})
        created.append(["version"] if versioned else ["hooks"])
    if versioned and doc.node(["version"]) is None:
        _ensure(doc, ["version"], 1, created)
    root = _events_root(target)
    where = f"the {target.name} config {path}"
    for k in range(1, len(root) + 1):
        node = doc.node(root[:k])
        if node is not None and node.kind != "object":
            raise InputError(f'"{".".join(root[:k])}" in {where} is not a JSON object; fix it, then run setup again')
    if target.registration == "zcode":
        current = doc.node(["hooks", "enabled"])
        if current is None:
            _ensure(doc, ["hooks", "enabled"], True, created)
        elif current.value is not True:
            restore.setdefault("hooks.enabled", current.value)  # eject puts the user's value back
            doc.set(["hooks", "enabled"], True)
    marks = markers(hook_dir)
    for hook, event in target.events.items():
        event_path = [*root, event]
        node = doc.node(event_path)
        if node is not None and node.kind != "array":
            raise InputError(f'"{".".join(event_path)}" in {where} is not a list; fix it, then run setup again')
        if _strip(doc, event_path, target, marks) and doc.get(event_path) == []:
            created.append(event_path)  # it held only mnemon entries (an earlier install): eject may drop it
        if hook not in scripts:
            continue
        entry = _entry(target, hook, scripts[hook])
        if doc.node(event_path) is None:
            _ensure(doc, event_path, [entry], created)
        else:
            doc.append(event_path, entry)
    state["created"] = [list(p) for p in {tuple(p): p for p in created}.values()]
    state["restore"] = restore
    return doc.text


def plan_eject(target: Target, path: Path, hook_dir: Path, manifest: dict[str, Any] | None) -> str | None:
    """The config text without our entries (``None``: delete the file). Raises InputError if unparseable."""
    doc = load(path)
    if doc is None or doc.root is None:
        return doc.text if doc is not None else None
    state, known = manifest_records.eject_state(manifest)
    root = _events_root(target)
    marks = markers(hook_dir)
    touched: list[list[Any]] = []
    events = doc.get(root)
    if isinstance(events, dict):
        for event in list(events):
            if _strip(doc, [*root, event], target, marks):
                touched.append([*root, event])
    if known:
        candidates = [list(p) for p in state.get("created", [])]
    elif not touched:  # no record and none of our entries: not ours to tidy (a user's `{}` once got deleted)
        return doc.text
    else:  # Go semantics: containers we emptied go, with the parents setup would have made
        candidates = touched + [root[:k] for k in range(len(root), 0, -1)] + [["version"]]
        if target.registration == "zcode":
            candidates.append(["hooks", "enabled"])
    for key, value in state.get("restore", {}).items():
        if doc.node(key.split(".")) is not None:
            doc.set(key.split("."), value)
    # Deepest first; ZCode's hooks.enabled and the top-level version only after their siblings went.
    for candidate in sorted(candidates, key=lambda p: (-len(p), p in (["hooks", "enabled"], ["version"]))):
        _drop_if_empty(doc, candidate, known)
    if doc.value == {}:
        if state.get("created_file", not known):
            return None
        if "empty_text" in state:
            return str(state["empty_text"])
    return doc.text


def _drop_if_empty(doc: jsonc.Document, path: list[Any], known: bool) -> None:
    """Remove a container we created once it is empty; scalars we created (``version``, ZCode's
    ``hooks.enabled``) go when the manifest says so, or else when nothing but them is left (Go)."""
    node = doc.node(path)
    if node is None:
        return
    if known and node.kind == "scalar":
        doc.delete(path)
        return
    if path == ["version"]:  # only once nothing else is left beside it
        if isinstance(doc.value, dict) and list(doc.value) == ["version"]:
            doc.delete(path)
        return
    if path == ["hooks", "enabled"]:  # ZCode: {enabled: true} alone is what setup left
        if doc.get(["hooks"]) == {"enabled": True}:
            doc.delete(path)
        return
    if node.kind in ("object", "array") and not node.members:
        doc.delete(path)
