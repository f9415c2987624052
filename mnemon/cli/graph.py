"""Graph commands: link, related (contract §3.8, §3.9)."""

from __future__ import annotations

from typing import Optional

import typer

from mnemon.cli.numflags import GO_FLOAT, GO_INT
from mnemon.cli import render
from mnemon.cli.state import exactly, open_engine

Words = Optional[list[str]]


def link(
    ctx: typer.Context,
    words: Words = typer.Argument(None, help="<source_id> <target_id>"),
    edge_type: str = typer.Option("semantic", "--type", help="temporal|semantic|causal|entity|supersedes"),
    weight: float = typer.Option(0.5, "--weight", click_type=GO_FLOAT, help="0.0-1.0"),
    meta: str = typer.Option("", "--meta", help="JSON object of string values"),
) -> None:
    """Relate two insights with an edge."""
    source_id, target_id = exactly(words, 2)
    with open_engine(ctx.obj) as engine:
        render.emit_json(engine.link(source_id, target_id, edge_type=edge_type, weight=weight, meta=meta or None))


def related(
    ctx: typer.Context,
    words: Words = typer.Argument(None, help="insight id"),
    edge: str = typer.Option("", "--edge", help="follow only this edge type"),
    depth: int = typer.Option(2, "--depth", click_type=GO_INT, help="maximum hops"),
) -> None:
    """List insights reachable from one insight (breadth-first)."""
    (insight_id,) = exactly(words, 1)
    with open_engine(ctx.obj) as engine:
        render.emit_json(engine.related(insight_id, edge_type=edge or None, depth=depth))


def register(app: typer.Typer) -> None:
    app.command("link")(link)
    app.command("related")(related)
