"""Agent integration commands: setup, viz, mcp (contract §3.17, §3.18, §3.19).

``setup`` installs or ejects the skill, guide and hooks for coding-agent hosts; it prompts only on
a terminal without ``--target``/``--yes``. ``viz`` renders the graph as dot or self-contained
HTML. ``mcp serve`` (or bare ``mcp``) runs the stdio MCP server. Heavy modules load inside the
commands, so ``--help`` stays free of numpy and numba.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import typer

from mnemon.cli import render
from mnemon.cli.state import open_engine
from mnemon.errors import InputError

Runner = Callable[..., int]  # mnemon.cli.run: (argv, *, stdin, stdout, stderr, options) -> exit status

_TARGET_HELP = "claude-code|codex|cursor|nanobot (default: every detected host)"


def setup(
    ctx: typer.Context,
    target: list[str] = typer.Option([], "--target", help=_TARGET_HELP),
    is_global: bool = typer.Option(False, "--global", help="install into the user-wide config dir (~/.<tool>)"),
    eject: bool = typer.Option(False, "--eject", help="remove what setup installed"),
    yes: bool = typer.Option(False, "--yes", "-y", help="no questions; default hooks"),
    compact: bool = typer.Option(False, "--compact", help="also install the pre-compaction hook (off by default)"),
    no_remind: bool = typer.Option(False, "--no-remind", help="skip the prompt-submit reminder hook"),
    no_nudge: bool = typer.Option(False, "--no-nudge", help="skip the stop nudge hook"),
) -> None:
    """Install mnemon's skill, guide and hooks into Claude Code, Codex or Cursor (or --eject them)."""
    from mnemon import setup as installer

    home, project = Path.home(), Path.cwd()
    chosen = [installer.resolve_target(t) for part in target for t in part.split(",") if t.strip()]
    interactive = not chosen and not yes and sys.stdin.isatty() and sys.stdout.isatty()
    if not chosen:
        detected = installer.detect(home, project)
        if not detected:
            valid = ", ".join(installer.TARGETS)
            raise InputError(f"no supported agent host detected; choose one with --target ({valid})")
        chosen = [t for t in detected if not interactive or typer.confirm(f"Set up mnemon for {t.name}?", True)]
    settings = ctx.obj.settings()
    for t in {t.name: t for t in chosen}.values():
        placement = installer.place(t, is_global=is_global, home=home, project=project)
        if eject:
            report = installer.eject(placement)
        else:
            hooks = [h for h in t.events if h in t.default_on or (h == "compact" and compact)]
            hooks = [h for h in hooks if not (h == "remind" and no_remind) and not (h == "nudge" and no_nudge)]
            report = installer.install(placement, hooks, settings.data_dir)
        render.emit_text("\n".join(report.lines))
    if eject:
        return
    for path in installer.write_prompts(settings.data_dir):
        render.emit_text(f"  prompt   {path}")
    with open_engine(ctx.obj) as engine:  # migrates a legacy DB and creates data/default (§3.18)
        status = engine.status()
    render.emit_text(f"mnemon ready: {status['total_insights']} insights in {status['db_path']}")


def viz(
    ctx: typer.Context,
    fmt: str = typer.Option("dot", "--format", help="dot|html"),
    output: str = typer.Option("-", "--output", "-o", help="file to write ('-' = stdout)"),
) -> None:
    """Export the memory graph as Graphviz dot or a self-contained HTML page."""
    from mnemon import viz as drawing

    if fmt not in drawing.FORMATS:
        raise InputError(f"unsupported format: {fmt} (use dot or html)")
    with open_engine(ctx.obj) as engine:
        nodes, edges = engine.graph_snapshot()
    text = drawing.render(nodes, edges, fmt)
    if output == "-":
        sys.stdout.write(text)
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"write {output}: {exc.strerror}") from None
    print(f"written to {output}", file=sys.stderr)


def _mcp_app(run: Runner) -> typer.Typer:
    """The ``mcp`` group; ``run`` is the CLI's in-process runner (``mnemon.cli.run``), handed down
    at registration so that neither this module nor ``mnemon.mcp`` imports the CLI package."""
    mcp_app = typer.Typer(
        help="Model Context Protocol server over stdio.", add_completion=False, rich_markup_mode=None,
        invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]},
    )

    @mcp_app.callback()
    def mcp(ctx: typer.Context) -> None:
        """Serve MCP over stdio (bare `mnemon mcp` is the same as `mnemon mcp serve`)."""
        if ctx.invoked_subcommand is None:
            serve(ctx)

    @mcp_app.command("serve")
    def serve(ctx: typer.Context) -> None:
        """Serve the memory tools to an MCP host over stdin/stdout (newline-delimited JSON-RPC)."""
        from mnemon import mcp as server

        server.serve(ctx.obj, run)

    return mcp_app


def register(app: typer.Typer, run: Runner) -> None:
    app.command("setup")(setup)
    app.command("viz")(viz)
    app.add_typer(_mcp_app(run), name="mcp")
