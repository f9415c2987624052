"""The ``embed`` command (contract §3.14, Decision 11): ``--status``, ``<id>`` or ``--all``; and
``--install-model NAME`` (Decision 19), which fetches a local model and never opens the store.

Parses and renders only; ``Engine.embed_status / embed_one / embed_all`` do the work. During
``--all`` a progress bar goes to stderr only when stderr is a terminal, so a pipe or a hook sees
nothing but the final JSON on stdout.
"""

from __future__ import annotations

import sys

import typer

from mnemon.cli import render
from mnemon.cli.state import open_engine
from mnemon.errors import InputError

USAGE_HINT = "specify --all to backfill, --status to check coverage, or provide an insight ID"
BAR_WIDTH = 30


def _progress_bar(done: int, total: int) -> None:
    filled = BAR_WIDTH * done // total if total else BAR_WIDTH
    end = "\n" if done >= total else ""
    sys.stderr.write(f"\rembedding [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total}{end}")
    sys.stderr.flush()


def embed(
    ctx: typer.Context,
    insight_id: list[str] = typer.Argument(None, help="insight to (re-)embed", show_default=False),
    all_: bool = typer.Option(False, "--all", help="embed every active insight lacking a vector"),
    status: bool = typer.Option(False, "--status", help="show embedding coverage and provider availability"),
    install_model: str = typer.Option(
        "", "--install-model", metavar="NAME",
        help="fetch a local model (e.g. all-MiniLM-L6-v2) once into <data-dir>/models/ from the Hugging Face hub",
    ),  # fmt: skip
) -> None:
    """Embed insights with the configured embedding provider, or show coverage."""
    ids = list(insight_id or [])
    if install_model:
        if status or all_ or ids:
            raise InputError("--install-model cannot be combined with --all, --status or an insight ID")
        settings = ctx.obj.settings()
        if settings.readonly:  # it writes <data-dir>/models/ (a download of hundreds of MB), as store set writes active
            from mnemon.errors import ReadonlyModeError

            raise ReadonlyModeError("embed --install-model")
        from mnemon.embed.local import install

        render.emit_json(install(install_model, settings.data_dir))  # the store is not opened
        return
    if len(ids) > 1:
        raise InputError(f"accepts at most 1 arg(s), received {len(ids)}")
    if not status and not all_ and not ids:
        raise InputError(USAGE_HINT)
    with open_engine(ctx.obj) as engine:
        if status:
            render.emit_json(engine.embed_status())
        elif all_:
            progress = _progress_bar if sys.stderr.isatty() else None
            render.emit_json(engine.embed_all(progress))
        else:
            render.emit_json(engine.embed_one(ids[0]))


def register(app: typer.Typer) -> None:
    app.command("embed")(embed)
