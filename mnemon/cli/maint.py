"""Maintenance commands: gc, status, log, receipt (contract §3.10-3.13)."""

from __future__ import annotations

import typer
from typer._click.core import ParameterSource

from mnemon.cli.numflags import GO_FLOAT, GO_INT
from mnemon.cli import render
from mnemon.cli.state import open_engine, open_read_engine
from mnemon.errors import InputError
from mnemon.validate import byte_prefix, check_limit, check_threshold

LOG_DETAIL_MAX = 60  # bytes; longer details are cut to 57 + "..." (§3.12)


def gc(
    ctx: typer.Context,
    threshold: float = typer.Option(0.5, "--threshold", click_type=GO_FLOAT, help="EI below which insights are suggested"),
    limit: int = typer.Option(20, "--limit", click_type=GO_INT, help="maximum candidates"),
    keep: str = typer.Option("", "--keep", help="retain this insight (+3 accesses)"),
    compact: bool = typer.Option(False, "--compact", help="checkpoint and VACUUM the database"),
) -> None:
    """Suggest low-value insights to prune, retain one, or compact the database."""
    if keep and compact:  # two actions asked for: running one and dropping the other silently misleads
        raise InputError("--keep and --compact cannot be used together")
    if keep or compact:  # --threshold and --limit shape the suggestions only: given with another action, refused
        action = "--keep" if keep else "--compact"
        for name, flag in (("threshold", "--threshold"), ("limit", "--limit")):
            if ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE:
                raise InputError(f"{action} and {flag} cannot be used together")
    if not keep and not compact:
        check_threshold(threshold)
        check_limit(limit)
    with open_engine(ctx.obj) as engine:
        if keep:
            render.emit_json(engine.gc_keep(keep))
        elif compact:
            render.emit_json(engine.gc_compact())
        else:
            render.emit_json(engine.gc(threshold, limit))


def status(ctx: typer.Context) -> None:
    """Show counts, categories, top entities and the database path."""
    with open_read_engine(ctx.obj) as engine:
        render.emit_json(engine.status())


def log(ctx: typer.Context, limit: int = typer.Option(20, "--limit", click_type=GO_INT, help="rows")) -> None:
    """Show the operation log, newest first."""
    check_limit(limit)
    with open_engine(ctx.obj) as engine:
        rows = engine.log(limit)
    if not rows:
        render.emit_text("No operations recorded yet.")
        return
    table = [["TIME", "OP", "INSIGHT", "DETAIL"], ["----", "--", "-------", "------"]]
    for row in rows:
        detail = " ".join(row.detail.split("\n"))
        if len(detail.encode("utf-8")) > LOG_DETAIL_MAX:
            detail = byte_prefix(detail, LOG_DETAIL_MAX - 3) + "..."
        table.append([row.created_at, row.operation, row.insight_id[:8], detail])
    render.emit_text(render.table(table))


def receipt(ctx: typer.Context, limit: int = typer.Option(20, "--limit", click_type=GO_INT, help="rows")) -> None:
    """Export a privacy-reduced receipt of recent operations."""
    check_limit(limit)
    with open_engine(ctx.obj) as engine:
        render.emit_json(engine.receipt(limit))


def register(app: typer.Typer) -> None:
    app.command("gc")(gc)
    app.command("status")(status)
    app.command("log")(log)
    app.command("receipt")(receipt)
