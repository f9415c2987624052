"""The engine with every pipeline: what the CLI, the MCP server and library users open."""

from __future__ import annotations

from mnemon.engine.bulk import ImportMixin
from mnemon.engine.embedding import EmbedMixin
from mnemon.engine.doctor import DoctorMixin
from mnemon.engine.graphview import GraphViewMixin
from mnemon.engine.read import ReadMixin
from mnemon.engine.retrieve import RetrieveMixin
from mnemon.engine.upkeep import UpkeepMixin
from mnemon.engine.write import WriteMixin


class Engine(ImportMixin, WriteMixin, ReadMixin, UpkeepMixin, DoctorMixin, GraphViewMixin, RetrieveMixin, EmbedMixin):
    """Every command's entry point for the CLI, the MCP server and library users."""
