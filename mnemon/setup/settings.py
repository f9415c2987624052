"""Merge our hook entries into a host's JSON settings, and take exactly them out again.

A host's settings file belongs to the user: we add entries whose command runs a script inside
our own hook directory, and ``eject`` removes those entries and nothing else. What had to be
created to hold them (the file, the ``hooks`` object, an event list) is recorded in a manifest
beside the scripts, so that eject can also remove those containers and leave the file exactly as
it was before setup (contract §3.18). Files are rewritten atomically (temp file + rename).
stdlib only.
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
from pathlib import Path
from typing import Any

from mnemon.errors import InputError
from mnemon.setup.targets import Target

HOOK_TIMEOUT_SECONDS = 15  # the host kills a hung hook; our scripts already cap mnemon at 10 s


def load(path: Path) -> dict[str, Any] | None:
    """Parse the settings file; ``None`` when it does not exist."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path} is not valid JSON ({exc}); fix or move it, then run setup again") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} must hold a JSON object")
    return data


def save(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".mnemon-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def command_for(script: Path) -> str:
    # Hosts run the command through a shell: quote it so a home directory with spaces still works.
    return shlex.quote(str(script))


def _is_ours(command: object, hook_dir: Path) -> bool:
    return isinstance(command, str) and str(hook_dir) + os.sep in command


def _entry(target: Target, script: Path) -> dict[str, Any]:
    if target.layout == "flat":
        return {"command": command_for(script)}
    return {"hooks": [{"type": "command", "command": command_for(script), "timeout": HOOK_TIMEOUT_SECONDS}]}


def _strip_event(target: Target, entries: list[Any], hook_dir: Path) -> list[Any]:
    """The event's entries without ours (a user's group that also held our hook keeps its other hooks)."""
    kept: list[Any] = []
    for entry in entries:
        if not isinstance(entry, dict):
            kept.append(entry)
        elif target.layout == "flat":
            if not _is_ours(entry.get("command"), hook_dir):
                kept.append(entry)
        else:
            inner = entry.get("hooks")
            if not isinstance(inner, list):
                kept.append(entry)
                continue
            others = [h for h in inner if not (isinstance(h, dict) and _is_ours(h.get("command"), hook_dir))]
            if len(others) == len(inner):
                kept.append(entry)
            elif others:
                kept.append({**entry, "hooks": others})
    return kept


def merge(
    target: Target, data: dict[str, Any] | None, scripts: dict[str, Path], hook_dir: Path, manifest: dict[str, Any]
) -> dict[str, Any]:
    """Return settings with our hooks registered; note in ``manifest`` what had to be created."""
    out = dict(data or {})
    if data is None:
        manifest.setdefault("created_file", True)
    manifest.setdefault("created_file", False)
    created_keys = set(manifest.get("created_keys", []))
    created_events = set(manifest.get("created_events", []))
    if target.layout == "flat" and "version" not in out:
        out["version"] = 1
        created_keys.add("version")
    hooks = out.get("hooks")
    if hooks is None:
        hooks = {}
        created_keys.add("hooks")
    if not isinstance(hooks, dict):
        raise InputError(f'"hooks" in the {target.name} settings is not a JSON object; fix it, then run setup again')
    hooks = dict(hooks)
    for hook, event in target.events.items():
        existing = hooks.get(event)
        if existing is not None and not isinstance(existing, list):
            raise InputError(f'"hooks.{event}" in the {target.name} settings is not a list')
        entries = _strip_event(target, existing or [], hook_dir)
        if hook in scripts:
            if existing is None:
                created_events.add(event)
            entries.append(_entry(target, scripts[hook]))
        if entries or existing is not None:
            hooks[event] = entries
    out["hooks"] = hooks
    manifest["created_keys"] = sorted(created_keys)
    manifest["created_events"] = sorted(created_events)
    return out


def remove(
    target: Target, data: dict[str, Any], hook_dir: Path, manifest: dict[str, Any] | None
) -> dict[str, Any] | None:
    """Return settings without our entries; ``None`` means the file should be deleted."""
    out = dict(data)
    known = manifest is not None
    created_events = set((manifest or {}).get("created_events", []))
    created_keys = set((manifest or {}).get("created_keys", []))
    hooks = out.get("hooks")
    if isinstance(hooks, dict):
        hooks = dict(hooks)
        for event, entries in list(hooks.items()):
            if not isinstance(entries, list):
                continue
            kept = _strip_event(target, entries, hook_dir)
            touched = len(kept) != len(entries) or kept != entries
            # Without a manifest (an install we did not record) an event list we emptied goes too.
            if not kept and (event in created_events or (touched and not known)):
                del hooks[event]
            else:
                hooks[event] = kept
        out["hooks"] = hooks
        if not hooks and ("hooks" in created_keys or not known):
            del out["hooks"]
    if "version" in created_keys and "hooks" not in out and list(out) == ["version"]:
        del out["version"]
    if not out and (manifest or {}).get("created_file", not known):
        return None
    return out
