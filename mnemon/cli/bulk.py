"""Bulk commands: ``import <file|->`` and ``export [--output FILE]`` (contract §3.15).

``import`` validates the whole draft before opening the store (``mnemon.drafts``), prints the
contract's dry-run line with ``--dry-run``, else runs ``Engine.import_draft`` and prints its JSON
report on stdout; a progress bar goes to stderr only when stderr is a terminal. ``export`` prints
the active store as a draft (compact JSON) or writes it to ``--output``.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Optional

import typer

from mnemon.cli import render
from mnemon.cli.state import exactly, open_engine
from mnemon.errors import InputError

if TYPE_CHECKING:
    from mnemon.engine.hotaside import AsideBuild

Words = Optional[list[str]]


def _read_stdin_draft() -> str:
    try:
        data = sys.stdin.buffer.read()
    except (OSError, ValueError) as exc:  # closed or unreadable stdin
        raise InputError(f"read file: {exc}: -") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"parse JSON: invalid UTF-8 at byte {exc.start}") from None


def _progress_bar(done: int, total: int) -> None:
    width = 30
    filled = width * done // max(total, 1)
    end = "\n" if done >= total else ""
    sys.stderr.write(f"\rimporting [{'#' * filled}{'.' * (width - filled)}] {done}/{total}{end}")
    sys.stderr.flush()


def import_(
    ctx: typer.Context,
    words: Words = typer.Argument(None, help="draft file (JSON, schema_version \"1\"), or - for stdin"),
    dry_run: bool = typer.Option(False, "--dry-run", help="validate only; write nothing"),
    no_diff: bool = typer.Option(False, "--no-diff", help="store exact repeats instead of skipping them"),
) -> None:
    """Import memory drafts in bulk (validated first; explicit edges; backbone repair)."""
    from mnemon.drafts import load_draft
    from mnemon.engine.bulk import collector_paused
    from mnemon.engine.hotaside import ASIDE_THRESHOLD

    (path,) = exactly(words, 1)
    with collector_paused():
        text = _read_stdin_draft() if path == "-" else None
        aside = None if dry_run else _fork_aside(path, text)
        try:
            draft = load_draft(path, text)
            del text
            if dry_run:
                render.emit_text(
                    f"Dry run: {len(draft.insights)} insights, {len(draft.edges)} explicit edges — validation passed."
                )
                return
            if aside is not None and len(draft.insights) < ASIDE_THRESHOLD:
                aside.cancel()
                aside = None
            progress = _progress_bar if sys.stderr.isatty() else None
            with open_engine(ctx.obj) as engine:
                report = engine.import_draft(draft, no_diff=no_diff, progress=progress, aside=aside)
        finally:
            if aside is not None:
                aside.cancel()  # (a no-op once the import joined it)
    render.emit_json(report)


def _fork_aside(path: str, text: str | None) -> AsideBuild | None:
    """The child that builds the hot index beside the import's last transaction (``hotaside``),
    for a draft large enough; forked before the draft is parsed and the store opened."""
    from mnemon.engine import hotaside

    try:
        size = len(text) if text is not None else os.stat(path).st_size
    except (OSError, ValueError):  # (a NUL in the path)
        return None  # load_draft says what is wrong with the path
    return hotaside.AsideBuild.fork() if size >= hotaside.ASIDE_MIN_BYTES else None


def export(
    ctx: typer.Context,
    output: str = typer.Option("", "--output", "-o", help="write the draft to this file instead of stdout"),
) -> None:
    """Export the active store as an import draft (insights and edges)."""
    import json

    from mnemon.store.layout import check_outside

    with open_engine(ctx.obj) as engine:
        if output and output != "-":  # before the export is read: never over a store's own files
            check_outside(engine.settings.data_dir, output)
        draft = engine.export_draft()
    text = json.dumps(draft, ensure_ascii=False, separators=(",", ":"))
    if output and output != "-":
        try:
            with open(output, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
        except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
            raise InputError(f"write file: {getattr(exc, 'strerror', None) or exc}: {output}") from None
        print(f"written to {output}", file=sys.stderr)
    else:
        render.emit_text(text)


def register(app: typer.Typer) -> None:
    app.command("import")(import_)
    app.command("export")(export)
