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
_SQL_REPLACE = "INSERT OR REPLACE INTO mnemon_meta (key, value) VALUES ('receipt_key', ?)"
_SQL_HAS_META = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'mnemon_meta'"


def get(conn: apsw.Connection) -> bytes | None:
    """The store's receipt key, or None when it has none yet (or is not a mnemon database)."""
    if conn.execute(_SQL_HAS_META).fetchone() is None:
        return None
    row = conn.execute(_SQL_GET).fetchone()
    if row is None or not isinstance(row[0], str):
        return None
    try:
        return bytes.fromhex(row[0]) or None  # an empty key keys nothing
    except ValueError:
        return None


def ensure(conn: apsw.Connection) -> bytes:
    """Return the key, creating it first if missing (INSERT OR IGNORE: a concurrent creator wins). A key that
    cannot be read (not hex, empty, not text) is replaced: it cannot have keyed any receipt, and kept it made every
    writable receipt an AssertionError traceback (the insert was ignored, the key still unreadable)."""
    found = get(conn)
    if found is not None:
        return found
    with write_tx(conn, bump=False):
        damaged = get(conn) is None and conn.execute(_SQL_GET).fetchone() is not None  # re-read under the lock
        conn.execute(_SQL_REPLACE if damaged else _SQL_INSERT, (secrets.token_hex(KEY_BYTES),))
    key = get(conn)
    assert key is not None  # just inserted (or a concurrent process did)
    return key


def ephemeral() -> bytes:
    """A throw-away key for a read-only store without one: hashes then match nothing else."""
    return secrets.token_bytes(KEY_BYTES)
