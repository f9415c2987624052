"""The engine with every pipeline: what the CLI, the MCP server and library users open.

``Engine`` is the shared context (``EngineBase``: settings, clock, store, embedder, the derived
indexes) holding one object per pipeline, and the one facade over them: each command is the method
of the pipeline that runs it, named here (:class:`Command`) under the name callers use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from mnemon.config import Settings
from mnemon.engine.bulk import ImportPipeline
from mnemon.engine.core import EngineBase
from mnemon.engine.doctor import DoctorPipeline
from mnemon.engine.embedding import EmbedPipeline
from mnemon.engine.graphview import GraphView
from mnemon.engine.read import ReadPipeline
from mnemon.engine.retrieve import RetrievePipeline
from mnemon.engine.upkeep import UpkeepPipeline
from mnemon.engine.vectors import Vectors
from mnemon.engine.write import WritePipeline


_P = ParamSpec("_P")
_R = TypeVar("_R")


class Command(Generic[_P, _R]):
    """A command of the facade: ``method`` of the pipeline the engine holds in attribute ``pipeline``,
    typed as that method (``Engine.recall`` exists on the class, as the MCP tool table asks)."""

    def __init__(self, pipeline: str, method: Callable[Concatenate[Any, _P], _R]) -> None:
        self.pipeline, self.name = pipeline, method.__name__

    @overload
    def __get__(self, engine: None, owner: type) -> Command[_P, _R]: ...

    @overload
    def __get__(self, engine: object, owner: type | None = None) -> Callable[_P, _R]: ...

    def __get__(self, engine: object, owner: type | None = None) -> Any:
        if engine is None:
            return self
        return getattr(getattr(engine, self.pipeline), self.name)


class Engine(EngineBase):
    """Every command's entry point for the CLI, the MCP server and library users."""

    def __init__(self, settings: Settings, **options: Any) -> None:
        """``options``: the context's (``clock``, ``embedder``, ``notice``; see ``EngineBase``)."""
        super().__init__(settings, **options)
        # One object per pipeline, each over this context; a reader sees what each one uses.
        self.writes = WritePipeline(self)
        self.reads = ReadPipeline(self)
        self.retrieval = RetrievePipeline(self)
        self.upkeep = UpkeepPipeline(self)
        self.imports = ImportPipeline(self)
        self.embedding = EmbedPipeline(self)
        self.doctoring = DoctorPipeline(self)
        self.graph_view = GraphView(self)

    # The facade: each command under the name callers use, run by its pipeline.
    remember = Command("writes", WritePipeline.remember)
    link = Command("writes", WritePipeline.link)
    forget = Command("writes", WritePipeline.forget)
    show = Command("reads", ReadPipeline.show)
    related = Command("reads", ReadPipeline.related)
    status = Command("reads", ReadPipeline.status)
    log = Command("reads", ReadPipeline.log)
    receipt = Command("reads", ReadPipeline.receipt)
    recall = Command("retrieval", RetrievePipeline.recall)
    recall_basic = Command("retrieval", RetrievePipeline.recall_basic)
    search = Command("retrieval", RetrievePipeline.search)
    gc = Command("upkeep", UpkeepPipeline.gc)
    gc_keep = Command("upkeep", UpkeepPipeline.gc_keep)
    gc_compact = Command("upkeep", UpkeepPipeline.gc_compact)
    import_draft = Command("imports", ImportPipeline.import_draft)
    export_draft = Command("imports", ImportPipeline.export_draft)
    embed_status = Command("embedding", EmbedPipeline.embed_status)
    embed_one = Command("embedding", EmbedPipeline.embed_one)
    embed_all = Command("embedding", EmbedPipeline.embed_all)
    doctor = Command("doctoring", DoctorPipeline.doctor)
    graph_snapshot = Command("graph_view", GraphView.graph_snapshot)
    # The vector side, for library users and tests that search the index directly.
    vector_space = Command("vectors", Vectors.vector_space)
    vector_index = Command("vectors", Vectors.vector_index)
    vector_scores = Command("vectors", Vectors.vector_scores)
    vector_scores_aligned = Command("vectors", Vectors.vector_scores_aligned)
    vector_search = Command("vectors", Vectors.vector_search)
    vector_cosines = Command("vectors", Vectors.vector_cosines)
