"""Which backend a store lives on: a PostgreSQL store is a small registration file in its directory.

``<data-dir>/data/NAME/postgres.json`` (mode 0600) names the libpq connection string and the
schema that holds the store; a store directory without it is a SQLite store (``mnemon.db``).
No password is ever written here: a connection string that carries one is refused before
anything is written (passwords come from libpq's own ``~/.pgpass``, ``PGPASSFILE``,
``PGSERVICEFILE`` or ``PGPASSWORD``). stdlib only, so ``store list`` stays light.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from mnemon.errors import InputError, StoreError

FILE_NAME = "postgres.json"
SCHEMA_PREFIX = "mnemon_"


@dataclass(frozen=True, slots=True)
class Registration:
    """A PostgreSQL store: where to connect and which schema is the store."""

    name: str
    conninfo: str
    schema: str


def path(store_dir: Path) -> Path:
    return store_dir / FILE_NAME


def is_postgres(store_dir: Path) -> bool:
    try:
        return path(store_dir).is_file()
    except OSError:
        return False


def schema_for(name: str) -> str:
    """The PostgreSQL schema of store ``name`` (one database holds several stores)."""
    return SCHEMA_PREFIX + name


def read(store_dir: Path) -> Registration:
    try:
        raw = json.loads(path(store_dir).read_text(encoding="utf-8"))
        return Registration(store_dir.name, str(raw["conninfo"]), str(raw["schema"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"cannot read the PostgreSQL registration of store \"{store_dir.name}\": {exc}") from exc


def write(store_dir: Path, registration: Registration) -> None:
    """Write the registration atomically with mode 0600 (the directory must exist)."""
    body = json.dumps(
        {"backend": "postgres", "conninfo": registration.conninfo, "schema": registration.schema}, indent=2
    )
    tmp = store_dir / f".{FILE_NAME}.tmp"
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(body + "\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, path(store_dir))
    except OSError as exc:
        raise StoreError(f"cannot write the PostgreSQL registration: {exc.strerror}") from exc


def refuse_password(params: dict[str, str]) -> None:
    """Refuse a connection string that carries a password (it would be written to disk)."""
    if params.get("password"):
        raise InputError(
            "refusing a PostgreSQL URL that contains a password: it would be stored in plain text; "
            "use ~/.pgpass, PGPASSFILE, a service file (PGSERVICEFILE) or PGPASSWORD instead"
        )
