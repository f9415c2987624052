"""The store: one database per store, SQLite by default or a PostgreSQL schema.

``Store`` owns the connection, the write transaction, the schema migration and the blob
format; the SQL itself lives in ``insights``, ``edges`` and ``oplog``. A store directory holding a
PostgreSQL registration opens as ``postgres.PostgresStore`` instead (psycopg is imported only
then), whose connection runs the same store functions (see ``postgres/dialect.py``). This package
is the only importer of apsw and psycopg, and it never imports domain modules, the embedder or the CLI.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw

from mnemon.errors import ReadonlyModeError, StoreError
from mnemon.store import connection, derived, edges, insights, oplog, registration, schema, sequences
from mnemon.store.tx import translate, write_tx

__all__ = ["StatementError", "Store", "edges", "insights", "oplog"]

# A statement failed inside a transaction that can still roll back to a savepoint (both backends
# raise a subclass: the PostgreSQL connection's failures are apsw-shaped, postgres/connection.py).
StatementError = apsw.Error


class Store:
    """An open store database (writable or read-only)."""

    backend = "sqlite"

    def __init__(self, conn: apsw.Connection, path: Path, *, readonly: bool) -> None:
        self.conn = conn
        self.path = path
        self.readonly = readonly
        self.embedding_format = schema.embedding_format(conn)

    @classmethod
    def open(cls, path: Path, *, readonly: bool, now: str, live: bool = False) -> Store:
        """Open ``path``; a writable open creates and migrates it, a read-only open never writes: an
        immutable snapshot (``--readonly``), or with ``live`` a reader that follows other writers
        (the gateway's read-only calls). A PostgreSQL read-only open is always live: read-only
        transactions, each statement seeing what was committed before it."""
        if registration.is_remote(path.parent):  # only the memory commands travel to a gateway (gateway/remote)
            raise StoreError(f'store "{path.parent.name}" lives behind a mnemon gateway: this command has no remote '
                             "form; run it on the gateway's machine")
        if registration.is_postgres(path.parent):
            from mnemon.store.postgres import PostgresStore

            return PostgresStore.open_registered(path.parent, readonly=readonly, now=now)
        if readonly:
            return cls(connection.open_readonly(path, live=live), path, readonly=True)
        conn = connection.open_writable(path)
        try:
            if not schema.is_current(conn):
                schema.migrate(conn, now)
            try:
                derived.move_legacy(path)  # old layout: derived files beside the database (silent)
            except (OSError, StoreError):
                pass  # derived files only: left where they are, rebuilt in the folder when needed
        except apsw.Error as exc:
            conn.close()
            raise translate(exc) from exc
        except BaseException:
            conn.close()
            raise
        return cls(conn, path, readonly=False)

    @contextmanager
    def transaction(self, action: str = "write") -> Iterator[apsw.Connection]:
        """Run the body in one ``BEGIN IMMEDIATE`` transaction (refused under --readonly)."""
        if self.readonly:
            raise ReadonlyModeError(action)
        with write_tx(self.conn) as conn:
            yield conn

    def bulk_tuning(self) -> contextlib.AbstractContextManager[None]:
        """Tune the connection for a bulk write (import) while the context lasts."""
        return connection.bulk_tuning(self.conn) if self.backend == "sqlite" else contextlib.nullcontext()

    def commits_synced(self) -> None:
        """Inside ``bulk_tuning``: the next commits wait for the disk again (SQLite only; the
        caller's last transaction, which makes the earlier batches durable with it)."""
        if self.backend == "sqlite":
            connection.commits_synced(self.conn)

    def checkpoint_aside(self) -> Callable[[], None]:
        """Start copying the WAL into the database beside this process; return the join (SQLite
        only: a no-op join elsewhere)."""
        if self.backend == "sqlite" and not self.readonly:
            return connection.checkpoint_aside(self.path)
        return lambda: None

    def bulk_cache_follow(self) -> None:
        """Inside ``bulk_tuning``: let the page cache grow with the database (SQLite only)."""
        if self.backend == "sqlite":
            connection.bulk_cache_follow(self.conn)

    def foreign_keys_unchecked(self) -> contextlib.AbstractContextManager[None]:
        """Skip per-row foreign-key checks for one bulk transaction (SQLite only: a PostgreSQL
        store checks the edges' endpoints once per statement anyway, ``postgres/schema.py``)."""
        return connection.foreign_keys_unchecked(self.conn) if self.backend == "sqlite" else contextlib.nullcontext()

    def trigger_problems(self) -> list[str]:
        """Missing triggers beyond those ``counts.problems`` reports, and missing tables the triggers
        write into (on SQLite: the entity rows, the counter tables, the hot index's deletion log and sequence triggers,
        ``sequences.install``; none on a store opened read-only before its migration, which has
        neither yet)."""
        from mnemon.store import counts

        if not schema.is_current(self.conn):
            return []
        return schema.entity_rows_missing(self.conn) + counts.missing_tables(self.conn) + sequences.problems(self.conn)

    def reinstall_triggers(self, conn: apsw.Connection) -> bool:
        """Recreate the triggers and the tables they write into, and recount what they keep
        (``doctor --repair``, in ``conn``'s write transaction, on a migrated store). Returns whether
        the deletion log was restarted (``sequences.install``: every hot index then rebuilds)."""
        from mnemon.store import counts

        schema.restore_entity_rows(conn)  # first: the entity counter triggers are on its table
        counts.install(conn)
        return sequences.install(conn, had_log=True)

    def generation(self) -> int:
        return schema.generation(self.conn)

    def write_mark(self) -> tuple[int, int]:
        """What moves when anyone but this connection writes: the generation (bumped by every
        mnemon write) and ``PRAGMA data_version`` (moved by any other connection's commit,
        including the Go program's and the sqlite3 shell's, which leave the generation alone).
        A bulk writer compares the mark read after its commit with the one inside its next
        transaction: equal means nobody else wrote in between."""
        return schema.generation(self.conn), int(connection.scalar(self.conn, "PRAGMA data_version"))

    def mark_of_own_commit(self, inside: tuple[int, int]) -> tuple[int, int]:
        """The write mark this connection's commit leaves, from ``write_mark()`` read inside the write
        transaction after its last statement: the commit bumps the generation by one (``write_tx``), and
        a connection's own commits never move its ``data_version`` (PostgreSQL: always 0). Read after
        the commit instead, the mark may already include another process's commit, taken for ours.
        (A store whose generation the bump cannot move reads as written by another: only slower.)"""
        return inside[0] + 1, inside[1]

    def compact(self) -> tuple[int, int]:
        """Checkpoint the WAL, VACUUM, checkpoint again (``gc --compact``); return the bytes
        (database + WAL) before and after. Fails rather than waits when another writer is busy."""
        if self.readonly:
            raise ReadonlyModeError("gc --compact")
        busy = "gc --compact: database is busy; retry when no other mnemon process is writing"
        before = self.size_bytes() + self._wal_size()
        try:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            self.conn.execute("VACUUM")
            row = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except apsw.BusyError as exc:
            raise StoreError(busy) from exc
        except apsw.Error as exc:
            raise StoreError(f"gc --compact failed: {exc}") from exc
        if row is not None and row[0]:  # the checkpoint could not complete: a reader or writer holds it
            raise StoreError(busy)
        return before, self.size_bytes() + self._wal_size()

    def _wal_size(self) -> int:
        try:
            return Path(f"{self.path}-wal").stat().st_size
        except OSError:
            return 0

    def size_bytes(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def close(self) -> None:
        """Close deterministically so SQLite checkpoints the WAL and removes -wal/-shm."""
        try:
            self.conn.close()
        except apsw.Error as exc:
            raise StoreError(f"cannot close database: {exc}") from exc
