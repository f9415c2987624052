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
from typing import TYPE_CHECKING, Optional

import typer

from mnemon.cli.numflags import GO_FLOAT, GO_INT
from mnemon.cli import render
from mnemon.cli.state import open_engine
from mnemon.errors import InputError

if TYPE_CHECKING:
    from mnemon.setup.targets import Target

Runner = Callable[..., int]  # mnemon.cli.run: (argv, *, stdin, stdout, stderr, options) -> exit status

_TARGET_HELP = "host to set up (repeatable or comma-separated; default: every detected host); one of " \
    "claude-code, codex, cursor, openclaw, nanobot, pi, hermes, zcode, minimax-code, trae, qoder, qoderwork, " \
    "codebuddy, workbuddy, kimi, opencode"


def setup(
    ctx: typer.Context,
    target: list[str] = typer.Option([], "--target", help=_TARGET_HELP),
    is_global: bool = typer.Option(False, "--global", help="install into the user-wide config dir (~/.<tool>)"),
    eject: bool = typer.Option(False, "--eject", help="remove what setup installed"),
    yes: bool = typer.Option(False, "--yes", "-y", help="no questions; default hooks"),
    compact: bool = typer.Option(False, "--compact", help="also install the pre-compaction hook (off by default)"),
    no_remind: bool = typer.Option(False, "--no-remind", help="skip the prompt-submit reminder hook"),
    no_nudge: bool = typer.Option(False, "--no-nudge", help="skip the stop nudge hook"),
    recall_on_prompt: Optional[bool] = typer.Option(  # noqa: UP007 (typer evaluates it on 3.10)
        None, "--recall-on-prompt/--no-recall-on-prompt",
        help="recall the user's prompt and inject the hits (default: on for openclaw, hermes, opencode)",
    ),
) -> None:
    """Install mnemon's skill, guide and hooks into an agent host (or --eject them)."""
    from mnemon import setup as installer
    from mnemon.config import host_dir_environment

    home, project, env = Path.home(), Path.cwd(), host_dir_environment()
    chosen = [installer.resolve_target(t) for part in target for t in part.split(",") if t.strip()]
    if recall_on_prompt and no_remind:
        raise InputError("--recall-on-prompt needs the prompt hook; drop --no-remind")
    interactive = not yes and sys.stdin.isatty() and sys.stdout.isatty()
    if not chosen:
        detections = installer.detect(home, project, env, is_global=is_global)
        render.emit_text("Agent hosts:\n" + "\n".join(d.line() for d in detections))
        detected = [d.target for d in detections if d.detected and installer.available(d.target)]
        if not detected:
            raise InputError("no supported agent host detected; choose one with --target "
                             f"({', '.join(installer.TARGETS)})")
        chosen = detected if not interactive else [_pick(detected, eject)]
        if interactive and not is_global and not chosen[0].home_only:
            is_global = _ask_scope(chosen[0])
    settings = ctx.obj.settings()
    if not eject:  # before any host file is written: the prompts go there after the installs
        installer.check_prompt_dir(settings.data_dir)

    def confirm_markdown(path: Path) -> bool:
        return not interactive or typer.confirm(f"Remove the mnemon block from {path}?", default=True)

    # Every host's checks before the first write for any of them: one refused host once left the hosts before
    # it installed (or ejected) and the prompts unwritten. Refused hosts are named together; nothing is written.
    steps, refused = [], []
    for t in {t.name: t for t in chosen}.values():
        placement = installer.place(t, is_global=is_global, home=home, project=project, env=env)
        hooks = installer.default_hooks(t, compact=compact, remind=not no_remind, nudge=not no_nudge)
        options = installer.Options(settings.data_dir, hooks, recall_on_prompt, _version(), confirm_markdown)
        try:
            steps.append(installer.plan_eject(placement, options) if eject else installer.plan_install(placement, options))
        except InputError as exc:
            refused.append((t.name, str(exc)))
    if refused and len(steps) + len(refused) == 1:
        raise InputError(refused[0][1])  # the one host the user named: its own message
    if refused:
        raise InputError(f"nothing was {'ejected' if eject else 'installed'}, {len(refused)} of "
                         f"{len(steps) + len(refused)} hosts refused: "
                         + "; ".join(f"{name}: {message}" for name, message in refused))
    for step in steps:
        render.emit_text("\n".join(step().lines))
    if eject:
        return
    for path in installer.write_prompts(settings.data_dir):
        render.emit_text(f"  prompt   {path}")
    from mnemon.gateway import remote

    far = remote.remote_store(["status"], ctx.obj)
    if far is not None:  # the hooks reach it through the gateway; there is no local database to create
        render.emit_text(f'mnemon ready: store "{far.name}" lives behind the mnemon gateway at {far.url}')
        return
    with open_engine(ctx.obj) as engine:  # migrates a legacy DB and creates data/default (§3.18)
        status = engine.status()
    render.emit_text(f"mnemon ready: {status['total_insights']} insights in {status['db_path']}")


def _version() -> str:
    from mnemon import __version__

    return __version__


def _pick(detected: list[Target], eject: bool) -> Target:
    """The Go program's menu: one host among the detected ones."""
    for n, t in enumerate(detected, 1):
        typer.echo(f"  {n}. {t.display} ({t.name})")
    choice = typer.prompt(f"{'Eject from' if eject else 'Set up'} which host?", default=1, type=int)
    if not 1 <= choice <= len(detected):
        raise InputError(f"no host numbered {choice}")
    return detected[choice - 1]


def _ask_scope(target: Target) -> bool:
    """Install scope; Global by default for OpenClaw and Nanobot, as the Go program asks."""
    default = "global" if target.default_global else "local"
    answer = typer.prompt("Install scope (local/global)", default=default).strip().lower()
    if answer not in ("local", "global"):
        raise InputError(f'install scope must be "local" or "global", not "{answer}"')
    return answer == "global"


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
        if output != "-":  # before the graph is read: never over a store's own files
            from mnemon.store.layout import check_outside

            check_outside(engine.settings.data_dir, output)
        nodes, edges = engine.graph_snapshot()
    text = drawing.render(nodes, edges, fmt)
    if output == "-":
        sys.stdout.write(text)
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise InputError(f"write {output}: {getattr(exc, 'strerror', None) or exc}") from None
    print(f"written to {output}", file=sys.stderr)


def _mcp_app(run: Runner) -> typer.Typer:
    """The ``mcp`` group; ``run`` is the CLI's in-process runner (``mnemon.cli.run``), handed down
    at registration so that neither this module nor ``mnemon.mcp`` imports the CLI package."""
    mcp_app = typer.Typer(
        help="Model Context Protocol server (stdio, or HTTP with --http) and its tokens.", add_completion=False, rich_markup_mode=None,
        invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]},
    )

    @mcp_app.callback()
    def mcp(ctx: typer.Context) -> None:
        """Serve MCP over stdio (bare `mnemon mcp` is the same as `mnemon mcp serve`)."""
        if ctx.invoked_subcommand is None:
            serve(ctx, http=False)

    @mcp_app.command("serve")
    def serve(
        ctx: typer.Context,
        http: bool = typer.Option(False, "--http", help="serve MCP over Streamable HTTP at /mcp (needs mnemon[gateway])"),
        host: str = typer.Option("127.0.0.1", "--host", help="address to bind (--http; loopback by default)"),
        port: int = typer.Option(7411, "--port", click_type=GO_INT, help="port to bind (--http)"),
        tls_cert: str = typer.Option("", "--tls-cert", help="TLS certificate file (--http)"),
        tls_key: str = typer.Option("", "--tls-key", help="TLS private key file (--http)"),
        behind_proxy: bool = typer.Option(
            False, "--behind-tls-proxy", help="a TLS proxy stands in front: allow a non-loopback bind without TLS"),
        allow_origin: list[str] = typer.Option([], "--allow-origin", help="browser Origin to accept (repeatable)"),
        max_body: int = typer.Option(8 * 1024 * 1024, "--max-body", click_type=GO_INT, help="largest request body in bytes (413 above)"),
        rate: float = typer.Option(50.0, "--rate-limit", click_type=GO_FLOAT, help="requests per second per token (0: no limit)"),
        burst: int = typer.Option(200, "--burst", click_type=GO_INT, help="requests a token may send at once before --rate-limit applies"),
        header_timeout: float = typer.Option(10.0, "--header-timeout", click_type=GO_FLOAT, help="seconds to send a request's head"),
        body_timeout: float = typer.Option(60.0, "--body-timeout", click_type=GO_FLOAT, help="seconds to send a request's body (408)"),
        call_timeout: float = typer.Option(540.0, "--call-timeout", click_type=GO_FLOAT, help="seconds a tool call may take"),
        workers: int = typer.Option(2, "--workers", click_type=GO_INT, help="command worker processes (0: one command at a time, "
                                    "in the gateway's process)"),
        test_clock: bool = typer.Option(False, "--test-clock", help="TESTS ONLY (loopback): the cli tool's calls may "
                                        "fix the engine's clock (a 'clock' argument); never on a real store"),
    ) -> None:
        """Serve the memory tools to an MCP host: over stdin/stdout, or over HTTP with --http (bearer tokens)."""
        if not http:
            from mnemon import mcp as server

            server.serve(ctx.obj, run)
            return
        from mnemon.cli.gateway import serve_http

        serve_http(ctx.obj, run, host=host, port=port, tls_cert=tls_cert, tls_key=tls_key, behind_proxy=behind_proxy,
                   allow_origin=allow_origin, max_body=max_body, rate=rate, burst=burst,
                   timeouts=(header_timeout, body_timeout, call_timeout), workers=workers, test_clock=test_clock)

    from mnemon.cli.gateway import token_app

    mcp_app.add_typer(token_app, name="token")
    return mcp_app


def register(app: typer.Typer, run: Runner) -> None:
    app.command("setup")(setup)
    app.command("viz")(viz)
    app.add_typer(_mcp_app(run), name="mcp")
