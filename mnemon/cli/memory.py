"""Memory commands: remember, show, forget (contract §3.3, §3.6, §3.7)."""

from __future__ import annotations

from typing import Optional

import typer

from mnemon.cli.numflags import GO_INT
from mnemon.cli import render
from mnemon.cli.state import exactly, join_words, open_engine, read_stdin_text
from mnemon.validate import split_list

Words = Optional[list[str]]


def remember(
    ctx: typer.Context,
    words: Words = typer.Argument(None, help="content words (joined with spaces); '-' reads stdin"),
    cat: str = typer.Option("general", "--cat", help="preference|decision|fact|insight|context|general"),
    imp: int = typer.Option(3, "--imp", click_type=GO_INT, help="importance 1-5"),
    tags: str = typer.Option("", "--tags", help="comma-separated tags"),
    entities: str = typer.Option("", "--entities", help="comma-separated entities"),
    entity_mode: str = typer.Option("merge", "--entity-mode", help="merge|provided|auto"),
    source: str = typer.Option("user", "--source", help="who wrote it"),
    no_diff: bool = typer.Option(False, "--no-diff", help="skip duplicate and diff checks"),
) -> None:
    """Store an insight and link it into the memory graph."""
    content = join_words(words)
    if words == ["-"]:
        content = read_stdin_text()
    with open_engine(ctx.obj) as engine:
        result = engine.remember(
            content, category=cat, importance=imp, tags=split_list(tags), entities=split_list(entities),
            entity_mode=entity_mode, source=source, no_diff=no_diff,
        )
    render.emit_json(result)


def show(ctx: typer.Context, words: Words = typer.Argument(None, help="insight id")) -> None:
    """Print one insight in full."""
    (insight_id,) = exactly(words, 1)
    with open_engine(ctx.obj) as engine:
        render.emit_json(engine.show(insight_id))


def forget(ctx: typer.Context, words: Words = typer.Argument(None, help="insight id")) -> None:
    """Soft-delete an insight and drop its edges."""
    (insight_id,) = exactly(words, 1)
    with open_engine(ctx.obj) as engine:
        render.emit_json(engine.forget(insight_id))


def register(app: typer.Typer) -> None:
    app.command("remember")(remember)
    app.command("show")(show)
    app.command("forget")(forget)
