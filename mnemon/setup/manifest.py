"""The record of what one install created (``setup.json`` in a directory only setup writes).

Eject reads it to remove exactly what setup added: the directories it had to make and, in the
``config`` section a registrar owns, whether it created the host's config file and which containers
it added inside it. No record (an install by the Go program, or a removed hook directory) means the
Go program's rules apply instead. stdlib only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mnemon.setup import files

NAME = "setup.json"


def read(directory: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((directory / NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write(directory: Path, manifest: dict[str, Any]) -> None:
    files.write_text(directory / NAME, json.dumps(manifest, indent=2) + "\n")


def install_state(manifest: dict[str, Any], *, exists: bool) -> dict[str, Any]:
    """The registrar's section; the first install notes whether the config file was there before it."""
    state: dict[str, Any] = manifest.setdefault("config", {})
    state.setdefault("created_file", not exists)
    return state


def eject_state(manifest: dict[str, Any] | None) -> tuple[dict[str, Any], bool]:
    """(the registrar's section, whether there is a record at all)."""
    state = (manifest or {}).get("config")
    return (state, True) if isinstance(state, dict) else ({}, False)
