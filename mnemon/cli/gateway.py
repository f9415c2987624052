"""``mcp serve --http`` and ``mcp token create|list|revoke`` (issue 25).

Token commands are stdlib only (``mnemon.gateway.tokens``); the HTTP server imports the MCP SDK,
Starlette and uvicorn only when it starts, and says which extra to install when they are missing.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Optional

import typer

from mnemon.cli.numflags import GO_INT
from mnemon import config
from mnemon.cli import render
from mnemon.cli.state import GlobalOptions, exactly
from mnemon.errors import InputError
from mnemon.validate import check_finite

token_app = typer.Typer(help="Bearer tokens of the HTTP gateway.", no_args_is_help=True, rich_markup_mode=None)
Words = Optional[list[str]]


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_http(options: GlobalOptions, run: object, *, host: str, port: int, tls_cert: str, tls_key: str,
               behind_proxy: bool, allow_origin: list[str], max_body: int, rate: float, burst: int,
               timeouts: tuple[float, float, float] = (10.0, 60.0, 540.0), workers: int = 2,
               test_clock: bool = False) -> None:
    if not 0 < port < 65536:
        raise InputError(f"--port must be between 1 and 65535, got {port}")
    if bool(tls_cert) != bool(tls_key):
        raise InputError("--tls-cert and --tls-key go together")
    if not _loopback(host) and not tls_cert and not behind_proxy:
        raise InputError(f'refusing to serve on non-loopback address "{host}" without TLS: give --tls-cert and '
                         "--tls-key, or --behind-tls-proxy when a TLS proxy stands in front")
    if max_body < 1024:
        raise InputError(f"--max-body must be at least 1024 bytes, got {max_body}")
    if rate < 0 or burst < 1:
        raise InputError("--rate-limit must be >= 0 and --burst >= 1")
    check_finite(rate, "--rate-limit")  # NaN and inf passed the bound above and read as "no limit"
    for flag, seconds in zip(("--header-timeout", "--body-timeout", "--call-timeout"), timeouts, strict=True):
        if not 0 < seconds <= 86_400:
            raise InputError(f"{flag} must be between 0 and 86400 seconds, got {seconds:g}")
    if test_clock and not _loopback(host):
        # A client that sets the clock can backdate a shared store's memories (and their pruning): tests only.
        raise InputError("--test-clock is for tests: it serves a loopback address only")
    if not 0 <= workers <= 64:
        raise InputError(f"--workers must be between 0 and 64, got {workers}")
    try:
        from mnemon.gateway import app
    except ImportError as exc:
        raise InputError(f"the HTTP gateway needs its extra: pip install 'mnemon[gateway]' ({exc})") from exc
    gateway_config = app.GatewayConfig(
        host=host, port=port, max_body=max_body, rate=rate, burst=burst, allowed_origins=list(allow_origin),
        tls_cert=tls_cert or None, tls_key=tls_key or None, behind_proxy=behind_proxy,
        header_timeout=timeouts[0], body_timeout=timeouts[1], call_timeout=timeouts[2], workers=workers,
        test_clock=test_clock,
    )
    app.serve(options, run, gateway_config)  # type: ignore[arg-type]


@token_app.command("create")
def token_create(
    ctx: typer.Context,
    words: Words = typer.Argument(None, help="token name (who it is for: shown in logs and the oplog)"),
    read_only: bool = typer.Option(False, "--read-only", help="may only read"),
    expires: Optional[int] = typer.Option(None, "--expires", click_type=GO_INT, help="days until the token expires"),
) -> None:
    """Create a token for one store (--store STORE); prints it once, as JSON (only its hash is kept)."""
    from mnemon.gateway import tokens

    (name,) = exactly(words, 1)
    options: GlobalOptions = ctx.obj
    target = options.store or ""  # the global --store flag: the one store this token opens
    if not target:
        raise InputError("token create: name the store with --store STORE")
    if not config.valid_store_name(target):
        raise InputError(f"invalid store name {config.quote_name(target)}: must match [a-zA-Z0-9][a-zA-Z0-9_-]*")
    settings = options.settings()
    if settings.readonly:
        from mnemon.errors import ReadonlyModeError

        raise ReadonlyModeError("mcp token create")
    from mnemon.store import registration
    from mnemon.store.layout import store_exists, stores_dir

    if not store_exists(settings.data_dir, target):
        raise InputError(f'store "{target}" does not exist (create it first)')
    if registration.is_remote(stores_dir(settings.data_dir) / target):
        raise InputError(f'store "{target}" is itself a remote store: a gateway serves local stores only')
    record, secret = tokens.create(settings.data_dir, name, target, read_only=read_only, expires_days=expires)
    render.emit_text(json.dumps({**record.public(), "token": secret}, indent=2))


@token_app.command("list")
def token_list(ctx: typer.Context) -> None:
    """List tokens (never the tokens themselves) as JSON."""
    from mnemon.gateway import tokens

    settings = ctx.obj.settings()
    render.emit_text(json.dumps([t.public() for t in tokens.load(settings.data_dir)], indent=2))


@token_app.command("revoke")
def token_revoke(ctx: typer.Context, words: Words = typer.Argument(None, help="token name")) -> None:
    """Revoke a token: the gateway refuses it (401) from its next request."""
    from mnemon.gateway import tokens

    (name,) = exactly(words, 1)
    settings = ctx.obj.settings()
    if settings.readonly:
        from mnemon.errors import ReadonlyModeError

        raise ReadonlyModeError("mcp token revoke")
    record = tokens.revoke(settings.data_dir, name)
    render.emit_text(json.dumps(record.public(), indent=2))
