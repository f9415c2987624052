"""``store`` subcommands (contract §3.16): plain-text output, no numpy import."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from mnemon import config
from mnemon.cli import render
from mnemon.cli.state import GlobalOptions, exactly
from mnemon.errors import InputError, NotFoundError

store_app = typer.Typer(help="Manage named stores.", no_args_is_help=True, rich_markup_mode=None)
Words = Optional[list[str]]


def _name(words: Words) -> str:
    (name,) = exactly(words, 1)
    if not config.valid_store_name(name):
        raise InputError(f"invalid store name {config.quote_name(name)}: must match [a-zA-Z0-9][a-zA-Z0-9_-]*")
    return name


@store_app.command("list")
def store_list(ctx: typer.Context) -> None:
    """List stores; * marks the active one."""
    from mnemon.store.layout import list_stores

    options: GlobalOptions = ctx.obj
    settings = options.settings()
    names = list_stores(settings.data_dir)
    # An empty data/ (every store removed, or only entries that are not stores) has no stores either: the same
    # line as no data/ at all, where an empty list printed a blank line.
    if not names:
        render.emit_text("  (no stores yet — run 'mnemon store create <name>' or any command to create default)")
        return
    from mnemon.store import registration
    from mnemon.store.layout import stores_dir

    # SQLite is the default backend and keeps the Go layout's line; a PostgreSQL or remote store says so.
    kinds = {n: registration.kind(stores_dir(settings.data_dir) / n) for n in names}
    lines = [
        ("* " if n == settings.store else "  ") + n + (f"  ({kinds[n]})" if kinds[n] != "sqlite" else "")
        for n in names
    ]
    render.emit_text("\n".join(lines))


@store_app.command("create")
def store_create(
    ctx: typer.Context,
    words: Words = typer.Argument(None, help="store name"),
    postgres: Optional[str] = typer.Option(
        None, "--postgres", help="keep the store in PostgreSQL: a libpq URL or 'service=NAME' (no password)"
    ),
    remote: Optional[str] = typer.Option(
        None, "--remote", help="a store behind a mnemon gateway: its MCP URL, e.g. https://memory.example/mcp/team"
    ),
    token_env: str = typer.Option(
        "MNEMON_TOKEN", "--token-env", help="--remote: the environment variable holding the gateway token"
    ),
) -> None:
    """Create a new store (SQLite, a PostgreSQL schema with --postgres, or a gateway's store with --remote)."""
    from mnemon.engine.core import format_ts, utc_now
    from mnemon.store import Store
    from mnemon.store.layout import store_db_path, store_exists

    name = _name(words)
    settings = ctx.obj.settings()
    if store_exists(settings.data_dir, name):
        raise InputError(f'store "{name}" already exists')
    if settings.readonly:
        from mnemon.errors import ReadonlyModeError

        raise ReadonlyModeError("store create")
    if postgres is not None and remote is not None:
        raise InputError("--postgres and --remote cannot be used together")
    if postgres is not None:
        _create_postgres(settings.data_dir, name, postgres)
    elif remote is not None:
        _create_remote(settings.data_dir, name, remote, token_env)
    else:
        Store.open(store_db_path(settings.data_dir, name), readonly=False, now=format_ts(utc_now())).close()
    render.emit_text(f'Created store "{name}"')


def _postgres_backend() -> Any:
    try:
        from mnemon.store import postgres
    except ImportError as exc:
        raise InputError(f"PostgreSQL stores need psycopg: pip install 'mnemon[postgres]' ({exc})") from exc
    return postgres


def _create_postgres(data_dir: Path, name: str, conninfo: str) -> None:
    """Create (or join) the store's schema first, then write the 0600 registration."""
    from mnemon.store import registration
    from mnemon.store.connection import ensure_private_dir
    from mnemon.store.layout import stores_dir

    postgres = _postgres_backend()
    registration.refuse_password(postgres.parse_conninfo(conninfo))
    reg = registration.Registration(name, conninfo, registration.schema_for(name))
    store_dir = stores_dir(data_dir) / name
    postgres.PostgresStore.open_with(reg, store_dir, readonly=False).close()
    ensure_private_dir(store_dir)
    registration.write(store_dir, reg)


def _create_remote(data_dir: Path, name: str, url: str, token_env: str) -> None:
    """Write the 0600 remote registration: the URL and the token's variable, never the token."""
    from mnemon.store import registration
    from mnemon.store.connection import ensure_private_dir
    from mnemon.store.layout import stores_dir

    registration.check_remote(url, token_env)
    store_dir = stores_dir(data_dir) / name
    ensure_private_dir(store_dir)
    registration.write_remote(store_dir, registration.RemoteRegistration(name, url, token_env))


@store_app.command("set")
def store_set(ctx: typer.Context, words: Words = typer.Argument(None, help="store name")) -> None:
    """Make a store the active one."""
    from mnemon.store.layout import store_exists, write_active

    name = _name(words)
    settings = ctx.obj.settings()
    if not store_exists(settings.data_dir, name):
        raise NotFoundError(f"store \"{name}\" does not exist (use 'mnemon store create {name}' first)")
    if settings.readonly:  # the active file changes which store every later command writes to
        from mnemon.errors import ReadonlyModeError

        raise ReadonlyModeError("store set")
    write_active(settings.data_dir, name)
    render.emit_text(f'Active store set to "{name}"')


@store_app.command("remove")
def store_remove(
    ctx: typer.Context,
    words: Words = typer.Argument(None, help="store name"),
    drop: bool = typer.Option(False, "--drop", help="PostgreSQL store: also drop its schema and data on the server"),
    yes: bool = typer.Option(False, "--yes", "-y", help="drop without asking"),
) -> None:
    """Delete a store and all its insights (a PostgreSQL store: forget it; --drop deletes the data too)."""
    from mnemon.store import registration
    from mnemon.store.layout import remove_store, store_exists, stores_dir

    name = _name(words)
    settings = ctx.obj.settings()
    if not store_exists(settings.data_dir, name):
        raise NotFoundError(f'store "{name}" does not exist')
    if name == settings.store:
        raise InputError(f"cannot remove the active store \"{name}\" (switch first with 'mnemon store set <other>')")
    if settings.readonly:
        from mnemon.errors import ReadonlyModeError

        raise ReadonlyModeError("store remove")
    store_dir = stores_dir(settings.data_dir) / name
    if drop:
        if not registration.is_postgres(store_dir):
            raise InputError(f'store "{name}" is not a PostgreSQL store: --drop applies to PostgreSQL stores only')
        schema = registration.read(store_dir).schema
        if not yes and not _confirmed(f'Drop PostgreSQL schema "{schema}" and every insight in it? [y/N] '):
            raise InputError("store remove --drop: not confirmed; nothing removed")
        _postgres_backend().drop_remote(store_dir)
    remove_store(settings.data_dir, name)
    render.emit_text(f'Removed store "{name}"')


def _confirmed(question: str) -> bool:
    sys.stderr.write(question)
    sys.stderr.flush()
    try:
        answer = sys.stdin.readline().strip().lower()
    except (OSError, ValueError):  # no readable stdin (a hook, a closed descriptor): not confirmed
        return False
    return answer in ("y", "yes")


@store_app.command("copy")
def store_copy(
    ctx: typer.Context, words: Words = typer.Argument(None, help="source and destination store names")
) -> None:
    """Copy every row of one store into an empty one (either backend): ids, times, counts, embeddings, oplog."""
    from mnemon.engine.core import format_ts, utc_now
    from mnemon.store import Store, copy
    from mnemon.store.layout import store_db_path, store_exists

    src, dst = exactly(words, 2)
    for name in (src, dst):
        if not config.valid_store_name(name):
            raise InputError(f"invalid store name {config.quote_name(name)}: must match [a-zA-Z0-9][a-zA-Z0-9_-]*")
    if src == dst:
        raise InputError("store copy: source and destination are the same store")
    settings = ctx.obj.settings()
    if not store_exists(settings.data_dir, src):
        raise NotFoundError(f'store "{src}" does not exist')
    from mnemon.store import registration
    from mnemon.store.layout import stores_dir

    for name in (src, dst):
        if registration.is_remote(stores_dir(settings.data_dir) / name):
            raise InputError(f'store copy has no remote form: store "{name}" lives behind a mnemon gateway '
                             "(export and import through it instead)")
    if settings.readonly:
        from mnemon.errors import ReadonlyModeError

        raise ReadonlyModeError("store copy")
    now = format_ts(utc_now())
    src_path = store_db_path(settings.data_dir, src)
    # A SQLite source is opened as every writing command opens a store: one the Go tool wrote is brought forward
    # first (read as it was, its rows lacked stored_at: "no such column"). live: a WAL reader otherwise; the
    # immutable snapshot of --readonly read the main file alone, so a copy of a store another process holds open
    # (an MCP server, a gateway) silently left out its commits still in the WAL. A missing database stays
    # "database not found" (a read-only open creates none).
    writable = src_path.is_file() and not registration.is_postgres(src_path.parent)
    source = Store.open(src_path, readonly=not writable, now=now, live=True)
    created = not store_exists(settings.data_dir, dst)
    try:
        target = Store.open(store_db_path(settings.data_dir, dst), readonly=False, now=now)
        try:
            copied = copy.copy_store(source, target)
        finally:
            target.close()
    except BaseException:
        if created:  # a copy that failed (a damaged source page, say) left a new empty store behind
            _remove_quietly(settings.data_dir, dst)
        raise
    finally:
        source.close()
    render.emit_text(
        f'Copied store "{src}" to "{dst}" ({copied.insights} insights, {copied.edges} edges, '
        f"{copied.oplog} oplog entries)"
    )


def _remove_quietly(data_dir: Path, name: str) -> None:
    """Remove the store a failed command created; the command's own error is the one to report."""
    from mnemon.errors import StoreError
    from mnemon.store.layout import remove_store

    try:
        remove_store(data_dir, name)
    except (OSError, StoreError):
        pass


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")
