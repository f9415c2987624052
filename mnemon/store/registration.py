"""Which backend a store lives on: a PostgreSQL or remote store is a small registration file in its directory.

``<data-dir>/data/NAME/postgres.json`` (mode 0600) names the libpq connection string and the
schema that holds the store; a store directory without it is a SQLite store (``mnemon.db``).
No password is ever written here: a connection string that carries one is refused before
anything is written (passwords come from libpq's own ``~/.pgpass``, ``PGPASSFILE``,
``PGSERVICEFILE`` or ``PGPASSWORD``). ``<data-dir>/data/NAME/remote.json`` (0600) makes NAME a store
that lives behind a mnemon gateway: its URL and the name of the environment variable that holds
the bearer token (the token itself is never written). stdlib only, so ``store list`` stays light.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from mnemon.errors import InputError, StoreError

FILE_NAME = "postgres.json"
REMOTE_FILE_NAME = "remote.json"
DEFAULT_TOKEN_ENV = "MNEMON_TOKEN"
SCHEMA_PREFIX = "mnemon_"


@dataclass(frozen=True, slots=True)
class Registration:
    """A PostgreSQL store: where to connect and which schema is the store."""

    name: str
    conninfo: str
    schema: str


def path(store_dir: Path) -> Path:
    return store_dir / FILE_NAME


def _holds(store_dir: Path, name: str) -> bool:
    try:
        return (store_dir / name).is_file()
    except OSError:
        return False


def is_postgres(store_dir: Path) -> bool:
    return _holds(store_dir, FILE_NAME)


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
    body = {"backend": "postgres", "conninfo": registration.conninfo, "schema": registration.schema}
    _write_private(store_dir, FILE_NAME, body, "PostgreSQL")


def _write_private(store_dir: Path, name: str, body: dict[str, str], kind: str) -> None:
    """Write ``body`` as JSON to ``store_dir/name`` atomically, mode 0600 whatever the umask."""
    tmp = store_dir / f".{name}.tmp"
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(body, indent=2) + "\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, store_dir / name)
    except OSError as exc:
        raise StoreError(f"cannot write the {kind} registration: {exc.strerror}") from exc


def refuse_password(params: dict[str, str]) -> None:
    """Refuse a connection string that carries a password (it would be written to disk)."""
    if params.get("password"):
        raise InputError(
            "refusing a PostgreSQL URL that contains a password: it would be stored in plain text; "
            "use ~/.pgpass, PGPASSFILE, a service file (PGSERVICEFILE) or PGPASSWORD instead"
        )


@dataclass(frozen=True, slots=True)
class RemoteRegistration:
    """A store behind a mnemon gateway: its MCP endpoint and where the token is read from."""

    name: str
    url: str
    token_env: str


def is_remote(store_dir: Path) -> bool:
    return _holds(store_dir, REMOTE_FILE_NAME)


def kind(store_dir: Path) -> str:
    """``sqlite``, ``postgres`` or ``remote``."""
    return "remote" if is_remote(store_dir) else "postgres" if is_postgres(store_dir) else "sqlite"


def is_loopback_host(host: str | None) -> bool:
    """A host name or address of this machine (localhost, 127.x, ::1): a URL's hostname, lower-cased."""
    return host is not None and (host in ("localhost", "::1") or host.startswith("127."))


def check_remote(url: str, token_env: str) -> None:
    """Refuse a URL that is not http(s)://host[:port]/path, carries credentials, or a bad variable name."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InputError(f"invalid gateway URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f'invalid gateway URL "{url}": use http(s)://HOST[:PORT]/mcp')
    if parts.username or parts.password:
        raise InputError("refusing a gateway URL with credentials in it: give the token through --token-env")
    if parts.query or parts.fragment:
        # a gateway takes no parameters, and one there (?token=...) would be written here in clear; the URL is
        # not quoted back, for the same reason
        raise InputError("refusing a gateway URL with a query or fragment: the URL is stored in plain text; "
                         "give the token through --token-env")
    if port == 0:
        raise InputError(f'invalid gateway URL "{url}": port 0')
    if not token_env or not (token_env[0].isalpha() or token_env[0] == "_") or not all(
        c.isalnum() or c == "_" for c in token_env
    ):
        raise InputError(f'invalid environment variable name "{token_env}"')
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        # every call carries the token in its Authorization header: over plain HTTP to another machine it
        # would cross the network in clear (the gateway itself serves another address only with TLS or
        # behind a TLS proxy)
        raise InputError("refusing a plain http:// gateway URL for another machine: the token would cross the "
                         "network in clear; use https://")


def read_remote(store_dir: Path) -> RemoteRegistration:
    try:
        raw = json.loads((store_dir / REMOTE_FILE_NAME).read_text(encoding="utf-8"))
        return RemoteRegistration(store_dir.name, str(raw["url"]), str(raw.get("token_env") or DEFAULT_TOKEN_ENV))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"cannot read the remote registration of store \"{store_dir.name}\": {exc}") from exc


def write_remote(store_dir: Path, registration: RemoteRegistration) -> None:
    """Write the remote registration atomically, 0600 (the directory must exist). Never a token."""
    body = {"backend": "remote", "url": registration.url, "token_env": registration.token_env}
    _write_private(store_dir, REMOTE_FILE_NAME, body, "remote")
