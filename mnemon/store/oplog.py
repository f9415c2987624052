"""SQL for the operation log (contract §2.4, §3.12): append, trim to the newest 5000, list.

A command run by the memory gateway for a token writes its entries with the token's *name* in front of
the detail (``[token NAME] ...``, :func:`acting_as`), so the log says who wrote what through a gateway;
never the token itself. Local commands write the detail as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

import apsw

from mnemon.records import OPLOG_KEEP, OplogEntry
from mnemon.store.connection import scalar

_SQL_INSERT = "INSERT INTO oplog (operation, insight_id, detail, created_at) VALUES (?, ?, ?, ?)"
_SQL_TRIM = "DELETE FROM oplog WHERE id <= (SELECT MAX(id) FROM oplog) - ?"
_SQL_LIST = "SELECT id, operation, insight_id, detail, created_at FROM oplog ORDER BY id DESC LIMIT ?"
_SQL_COUNT = "SELECT COUNT(*) FROM oplog"


_ACTOR: ContextVar[str] = ContextVar("mnemon_oplog_actor", default="")


@contextlib.contextmanager
def acting_as(name: str) -> Iterator[None]:
    """Entries written in this context (this thread's command) name ``name`` as their writer."""
    reset = _ACTOR.set(name)
    try:
        yield
    finally:
        _ACTOR.reset(reset)


def _signed(detail: str) -> str:
    actor = _ACTOR.get()
    return f"[token {actor}] {detail}" if actor else detail


def append(conn: apsw.Connection, operation: str, insight_id: str, detail: str, now: str) -> None:
    """Record one operation and trim the log, inside the caller's transaction."""
    conn.execute(_SQL_INSERT, (operation, insight_id, _signed(detail), now))
    conn.execute(_SQL_TRIM, (OPLOG_KEEP,))


def append_many(conn: apsw.Connection, rows: list[tuple[str, str, str, str]]) -> None:
    """Record many operations ``(operation, insight_id, detail, now)`` in order, then trim once.

    Ids only grow (AUTOINCREMENT), so one trim after the rows leaves exactly the newest 5000, as
    a trim after each row would by the end of the caller's transaction.
    """
    if not rows:
        return
    if _ACTOR.get():
        rows = [(op, insight_id, _signed(detail), now) for op, insight_id, detail, now in rows]
    conn.executemany(_SQL_INSERT, rows)
    conn.execute(_SQL_TRIM, (OPLOG_KEEP,))


def recent(conn: apsw.Connection, limit: int) -> list[OplogEntry]:
    return [
        OplogEntry(int(r[0]), str(r[1] or ""), str(r[2] or ""), str(r[3] or ""), str(r[4] or ""))
        for r in conn.execute(_SQL_LIST, (limit,))
    ]


def count(conn: apsw.Connection) -> int:
    return int(scalar(conn, _SQL_COUNT))
