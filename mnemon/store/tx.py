"""The single write path: ``write_tx`` opens BEGIN IMMEDIATE and commits or rolls back.

No other module says BEGIN or COMMIT. Every write transaction also bumps the store's
generation counter, which tells readers of the derived hot index whether it is current
(architecture: the hot index). apsw errors become StoreError here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import apsw

from mnemon.errors import StoreBusyError, StoreError

_SQL_BUMP_GENERATION = "UPDATE mnemon_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'"


@contextmanager
def write_tx(conn: apsw.Connection, *, bump: bool = True) -> Iterator[apsw.Connection]:
    """Run the body inside ``BEGIN IMMEDIATE`` … ``COMMIT``; roll back on any exception."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except apsw.BusyError as exc:
        raise StoreBusyError("database is busy: another mnemon process holds the write lock") from exc
    except apsw.Error as exc:
        raise StoreError(f"cannot start transaction: {exc}") from exc
    try:
        yield conn
        if bump:
            conn.execute(_SQL_BUMP_GENERATION)
        conn.execute("COMMIT")
    except BaseException as exc:
        try:
            conn.execute("ROLLBACK")
        except apsw.Error:
            pass  # the transaction may already be gone (e.g. after an I/O error)
        if isinstance(exc, apsw.BusyError):
            raise StoreBusyError("database is busy: another mnemon process holds the write lock") from exc
        if isinstance(exc, apsw.Error):
            raise StoreError(f"database error: {exc}") from exc
        raise


def translate(exc: apsw.Error) -> StoreError:
    """Map an apsw error raised outside a transaction to a StoreError."""
    if isinstance(exc, apsw.BusyError):
        return StoreBusyError("database is busy: another mnemon process holds the write lock")
    return StoreError(f"database error: {exc}")
