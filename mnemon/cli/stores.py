"""``store`` subcommands (contract §3.16): plain-text output, no numpy import."""

from __future__ import annotations

from typing import Optional

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
    if names is None:
        render.emit_text("  (no stores yet — run 'mnemon store create <name>' or any command to create default)")
        return
    lines = [("* " if n == settings.store else "  ") + n for n in names]
    render.emit_text("\n".join(lines) if lines else "")


@store_app.command("create")
def store_create(ctx: typer.Context, words: Words = typer.Argument(None, help="store name")) -> None:
    """Create a new store."""
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
    Store.open(store_db_path(settings.data_dir, name), readonly=False, now=format_ts(utc_now())).close()
    render.emit_text(f'Created store "{name}"')


@store_app.command("set")
def store_set(ctx: typer.Context, words: Words = typer.Argument(None, help="store name")) -> None:
    """Make a store the active one."""
    from mnemon.store.layout import store_exists, write_active

    name = _name(words)
    settings = ctx.obj.settings()
    if not store_exists(settings.data_dir, name):
        raise NotFoundError(f"store \"{name}\" does not exist (use 'mnemon store create {name}' first)")
    write_active(settings.data_dir, name)
    render.emit_text(f'Active store set to "{name}"')


@store_app.command("remove")
def store_remove(ctx: typer.Context, words: Words = typer.Argument(None, help="store name")) -> None:
    """Delete a store and all its insights."""
    from mnemon.store.layout import remove_store, store_exists

    name = _name(words)
    settings = ctx.obj.settings()
    if not store_exists(settings.data_dir, name):
        raise NotFoundError(f'store "{name}" does not exist')
    if name == settings.store:
        raise InputError(f"cannot remove the active store \"{name}\" (switch first with 'mnemon store set <other>')")
    if settings.readonly:
        from mnemon.errors import ReadonlyModeError

        raise ReadonlyModeError("store remove")
    remove_store(settings.data_dir, name)
    render.emit_text(f'Removed store "{name}"')


def register(app: typer.Typer) -> None:
    app.add_typer(store_app, name="store")
