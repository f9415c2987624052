"""The engine: one method per command, returning records; it never prints.

Split by pipeline (architecture §2), each an object over one shared context (``core.EngineBase``:
settings, clock, store, embedder, the hot and vector indexes): ``write`` (remember, link, forget),
``retrieve`` (recall, search), ``read`` (show, related, status, log, receipt), ``upkeep`` (gc),
``bulk`` (import, export), ``embedding``, ``doctor``, ``graphview``. Each pipeline owns its
transaction boundaries.

``Engine`` (every pipeline, ``mnemon.engine.composed``) is imported on first use: ``status``, the
session-start hook's command, opens a :class:`~mnemon.engine.read.ReadEngine` and so never imports
the import, retrieval and graph pipelines (about 40 ms of a 150 ms process).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemon.engine.core import EngineBase, format_ts, utc_now

if TYPE_CHECKING:
    from mnemon.engine.composed import Engine

__all__ = ["Engine", "EngineBase", "format_ts", "utc_now"]


def __getattr__(name: str) -> object:
    if name == "Engine":
        from mnemon.engine.composed import Engine

        return Engine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
