"""The per-store secret that keys receipt hashes (contract §3.13, hardened).

A bare SHA-256 of a short insight id or detail can be reversed by guessing; an HMAC with a
random 32-byte key kept in ``mnemon_meta`` (key ``receipt_key``) cannot be, without the database.
The key is created once, on the first writable receipt of a store, in its own write transaction
that does not bump the generation (no insight changed). Only this package imports apsw.
"""

from __future__ import annotations

import secrets

import apsw

from mnemon.store.tx import write_tx

KEY_BYTES = 32
_SQL_GET = "SELECT value FROM mnemon_meta WHERE key = 'receipt_key'"
_SQL_INSERT = "INSERT OR IGNORE INTO mnemon_meta (key, value) VALUES ('receipt_key', ?)"
_SQL_HAS_META = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'mnemon_meta'"


def get(conn: apsw.Connection) -> bytes | None:
    """The store's receipt key, or None when it has none yet (or is not a mnemon database)."""
    if conn.execute(_SQL_HAS_META).fetchone() is None:
        return None
    row = conn.execute(_SQL_GET).fetchone()
    try:
        return bytes.fromhex(str(row[0])) if row else None
    except ValueError:
        return None


def ensure(conn: apsw.Connection) -> bytes:
    """Return the key, creating it first if missing (INSERT OR IGNORE: a concurrent creator wins)."""
    found = get(conn)
    if found is not None:
        return found
    with write_tx(conn, bump=False):
        conn.execute(_SQL_INSERT, (secrets.token_hex(KEY_BYTES),))
    key = get(conn)
    assert key is not None  # just inserted (or a concurrent process did)
    return key


def ephemeral() -> bytes:
    """A throw-away key for a read-only store without one: hashes then match nothing else."""
    return secrets.token_bytes(KEY_BYTES)
