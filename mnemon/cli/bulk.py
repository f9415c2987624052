"""Bulk commands: ``import <file|->`` and ``export [--output FILE]`` (contract §3.15).

``import`` validates the whole draft before opening the store (``mnemon.drafts``), prints the
contract's dry-run line with ``--dry-run``, else runs ``Engine.import_draft`` and prints its JSON
report on stdout; a progress bar goes to stderr only when stderr is a terminal. ``export`` prints
the active store as a draft (compact JSON) or writes it to ``--output``.
"""

from __future__ import annotations

import sys
from typing import Optional

import typer

from mnemon.cli import render
from mnemon.cli.state import exactly, open_engine
from mnemon.errors import InputError

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
    from mnemon.engine.hot.aside import AsideBuild

    (path,) = exactly(words, 1)
    with collector_paused():
        draft = load_draft(path, _read_stdin_draft() if path == "-" else None)
        if dry_run:
            render.emit_text(
                f"Dry run: {len(draft.insights)} insights, {len(draft.edges)} explicit edges — validation passed."
            )
            return
        progress = _progress_bar if sys.stderr.isatty() else None
        # Forked before the store is opened: the child that builds the hot index beside the
        # import's last transaction (hot.aside).
        aside = AsideBuild.fork(len(draft.insights))
        try:
            with open_engine(ctx.obj) as engine:
                report = engine.import_draft(draft, no_diff=no_diff, progress=progress, aside=aside)
        finally:
            if aside is not None:
                aside.cancel()
    render.emit_json(report)


def export(
    ctx: typer.Context,
    output: str = typer.Option("", "--output", "-o", help="write the draft to this file instead of stdout"),
) -> None:
    """Export the active store as an import draft (insights and edges)."""
    import json

    with open_engine(ctx.obj) as engine:
        draft = engine.export_draft()
    text = json.dumps(draft, ensure_ascii=False, separators=(",", ":"))
    if output and output != "-":
        try:
            with open(output, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
        except OSError as exc:
            raise InputError(f"write file: {exc.strerror or exc}: {output}") from None
        print(f"written to {output}", file=sys.stderr)
    else:
        render.emit_text(text)


def register(app: typer.Typer) -> None:
    app.command("import")(import_)
    app.command("export")(export)
