"""The engine: one method per command, returning records; it never prints.

Split by pipeline (architecture §2): ``write`` (remember, link, forget), ``read`` (show, related,
status, log, receipt), ``upkeep`` (gc). Each pipeline owns its transaction boundaries.
"""

from __future__ import annotations

from mnemon.engine.bulk import ImportMixin
from mnemon.engine.core import EngineBase, format_ts, utc_now
from mnemon.engine.embedding import EmbedMixin
from mnemon.engine.doctor import DoctorMixin
from mnemon.engine.graphview import GraphViewMixin
from mnemon.engine.read import ReadMixin
from mnemon.engine.retrieve import RetrieveMixin
from mnemon.engine.upkeep import UpkeepMixin
from mnemon.engine.write import WriteMixin

__all__ = ["Engine", "EngineBase", "format_ts", "utc_now"]


class Engine(ImportMixin, WriteMixin, ReadMixin, UpkeepMixin, DoctorMixin, GraphViewMixin, RetrieveMixin, EmbedMixin):
    """Every command's entry point for the CLI, the MCP server and library users."""
