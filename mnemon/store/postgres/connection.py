"""One psycopg connection, presented the way the store modules use an apsw connection.

The store modules call ``execute`` / ``executemany`` / ``changes``, use the connection as a
savepoint context (``with conn:``) and say ``BEGIN IMMEDIATE`` / ``BEGIN DEFERRED`` / ``COMMIT`` /
``ROLLBACK`` through ``store/tx.py`` and ``hotindex.read_snapshot``. Here those mean:

- ``BEGIN IMMEDIATE``: a READ COMMITTED transaction that first takes the store's transaction-scoped
  advisory lock, so writers of one store serialise across machines exactly as SQLite's write lock
  serialises processes (the lock waits up to the busy timeout, then "database is busy");
- ``BEGIN DEFERRED``: a REPEATABLE READ snapshot (the fingerprint and the rows it describes agree);
- statements: translated once by ``dialect.translate`` and bound server-side.

Failures keep the apsw shapes the store and engine already handle: a failed statement raises a
``StatementError`` (an ``apsw.Error``, so ``write_tx`` rolls back and a savepoint retry works), a
lock time-out an ``apsw.BusyError``; a lost connection (server restart, network) raises
``StoreError`` "lost connection to PostgreSQL ...": the transaction is gone, nothing of it stays.
Only this module imports psycopg (and only when a PostgreSQL store is opened).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apsw
import psycopg
from psycopg import sql as pgsql

from mnemon.errors import StoreError
from mnemon.records import BUSY_TIMEOUT_MS
from mnemon.store.postgres import dialect

CONNECT_TIMEOUT_S = 5
# From this many rows an executemany'd plain INSERT goes through COPY (_copy_into).
COPY_MIN_ROWS = 2_000
# Rows per round trip of a streamed scan (``stream``): an edge row is about 400 bytes as a tuple.
STREAM_ROWS = 20_000
BULK_WORK_MEM = "128MB"  # work_mem during an import (bulk_tuning)

# psycopg reports an error it ignores (a pipeline that cannot end because the server went away while
# the statement's own error is already on its way up) as a warning on its logger. With no handler
# configured, Python's last-resort handler prints it on stderr before mnemon's one "Error: ..." line.
# The error that matters reaches the user as that line (StoreError "lost connection ..."); the
# ignored one is noise, so the library's logger gets a handler of its own that drops it.
logging.getLogger("psycopg").addHandler(logging.NullHandler())


class StatementError(apsw.Error):
    """A statement failed on the server; the transaction can roll back (to a savepoint)."""


class LockTimeout(apsw.BusyError):
    """The store's write lock stayed taken past the busy timeout."""


class _Rows:
    """A fetched result: fetchone, fetchall and iteration, like an apsw cursor."""

    __slots__ = ("_rows", "_pos")

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self._rows = rows
        self._pos = 0

    def fetchone(self) -> tuple[Any, ...] | None:
        if self._pos >= len(self._rows):
            return None
        self._pos += 1
        return self._rows[self._pos - 1]

    def fetchall(self) -> list[tuple[Any, ...]]:
        rest = self._rows[self._pos :]
        self._pos = len(self._rows)
        return rest

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        # The list's own iterator (a build reads millions of edge rows: no call per row here);
        # the rows it yields count as fetched, as a consumed apsw cursor's would.
        rest = self._rows[self._pos :] if self._pos else self._rows
        self._pos = len(self._rows)
        return iter(rest)


def lock_key(schema: str) -> int:
    """The advisory-lock key of a store schema (a signed 64-bit integer)."""
    return int.from_bytes(hashlib.sha256(b"mnemon-store:" + schema.encode()).digest()[:8], "big", signed=True)


class PgConnection:
    """The psycopg connection of one open PostgreSQL store."""

    def __init__(self, raw: psycopg.Connection[Any], *, store: str, schema: str, filename: str, readonly: bool) -> None:
        self.raw = raw
        self.store = store
        self.schema = schema
        self.filename = filename  # where the local caches live (what apsw reports as the database file)
        self._readonly = readonly
        self._lock_key = lock_key(schema)
        self._changes = 0
        self._savepoints = 0
        self._streams = 0  # server-side cursors opened (each gets a new name)
        self.edge_change_log = False  # the schema logs deleted/replaced edge keys (store/hotindex.py)

    # --- apsw's surface ------------------------------------------------------------------------

    def readonly(self, name: str = "main") -> bool:
        return self._readonly

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE

    def changes(self) -> int:
        return self._changes

    def execute(self, statement: str, params: Sequence[Any] = (), *, raw: bool = False) -> _Rows:
        """Run one statement (SQLite text unless ``raw``) and return its rows."""
        word = statement.lstrip()[:8].upper()
        if word.startswith("BEGIN"):
            if "IMMEDIATE" in statement.upper():
                self.begin_write()
            else:
                self._run("BEGIN ISOLATION LEVEL REPEATABLE READ", ())
            return _Rows([])
        if word.startswith("COMMIT"):
            self.commit()
            return _Rows([])
        if word.startswith("ROLLBACK"):
            self.rollback()
            return _Rows([])
        if not raw:
            name = dialect.pragma(statement)
            if name is not None:
                if name in dialect.PRAGMA_QUERIES:
                    return _Rows(self._run(dialect.PRAGMA_QUERIES[name], ()))
                return _Rows(list(dialect.PRAGMA_ROWS.get(name, [])))
            statement = dialect.translate(statement)
        return _Rows(self._run(statement, params))

    def stream(self, statement: str, params: Sequence[Any] = ()) -> Iterator[tuple[Any, ...]]:
        """``execute``'s rows as the server hands them over, STREAM_ROWS at a time, for the scans
        of a whole table (the hot index's build reads every insight and edge row).

        ``execute`` fetches a whole result before it returns: the 21M edge rows of a 1M store
        held 8 GB of Python tuples at once. Inside a transaction (the index's read snapshot) a
        server-side cursor reads the same snapshot in slices; outside one there is no such
        cursor, and the rows are fetched at once, as ``execute`` does.
        """
        if not self.in_transaction:
            yield from self.execute(statement, params)
            return
        self._streams += 1
        try:
            with psycopg.RawServerCursor(self.raw, f"mnemon_stream_{self._streams}") as cur:
                cur.itersize = STREAM_ROWS
                cur.execute(dialect.translate(statement), params or None)
                yield from cur
        except psycopg.Error as exc:
            raise self._failure(exc) from exc

    def executemany(self, statement: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run the statement for every row, in order. An INSERT becomes multi-row statements (a
        thousand rows each), so its triggers run once per statement rather than once per row;
        from COPY_MIN_ROWS rows a plain INSERT is one COPY into the table."""
        batch = list(rows)
        if not batch:
            return
        multi = dialect.multi_row(statement)
        try:
            with self.raw.cursor() as cur:
                if multi is None:
                    cur.executemany(dialect.translate(statement), batch)
                    self._changes = max(cur.rowcount, 0)
                    return
                batch = multi.last_per_key(batch)
                if len(batch) >= COPY_MIN_ROWS and multi.plain:
                    self._changes = _copy_into(cur, multi, batch)
                else:
                    self._changes = _multi_rows(cur, multi, batch)
        except psycopg.Error as exc:
            raise self._failure(exc) from exc

    def upsert_split(self, statement: str, rows: Sequence[Sequence[Any]], fresh: list[bool]) -> None:
        """``executemany(statement, rows)`` for an INSERT OR REPLACE into a table with a ``rowid``
        serial (the edges), where ``fresh[k]`` says no row can have row k's key yet (the caller's
        proof: the key names an insight this transaction's import created, and nothing of the
        import wrote it before). A fresh row's key appears once in ``rows``; among the others a
        repeated key's last row wins, as in ``executemany``.

        The fresh rows go as one COPY into the table (no conflict clause to evaluate, about 11 µs
        a row on the server against 16 µs for the upsert), the rest through the upsert. Every
        row gets a rowid from one range reserved up front, in the caller's order, so the rows
        lie in the same rowid order as the one upsert of all of them would leave (a replaced
        row moves to its new rowid there too).
        """
        multi = dialect.multi_row(statement)
        count = fresh.count(True)
        if multi is None or multi.key_positions is None or count < COPY_MIN_ROWS:
            self.executemany(statement, rows)  # few fresh rows: the COPY would not pay
            return
        upsert, plain = dialect.given_rowids(statement)
        try:
            with self.raw.cursor() as cur:
                first = self._reserve_rowids(cur, multi.table, len(rows))
                numbered = enumerate(rows, first)
                new = [(k, *row) for k, row in itertools.compress(numbered, fresh)]
                others = itertools.compress(enumerate(rows, first), map(operator.not_, fresh))
                rest = upsert.last_per_key([(k, *row) for k, row in others])
                copied = _copy_into(cur, plain, new)
                self._changes = copied + (_multi_rows(cur, upsert, rest) if rest else 0)
        except psycopg.Error as exc:
            raise self._failure(exc) from exc

    @staticmethod
    def _reserve_rowids(cur: psycopg.Cursor[Any], table: str, n: int) -> int:
        """The first of ``n`` consecutive rowids taken from the table's serial in one call.

        Between the statement's nextval and setval no other session takes a value: every writer
        of the table holds the store's advisory lock (``begin_write``) for its whole transaction.
        """
        cur.execute(
            "SELECT setval(pg_get_serial_sequence($1, 'rowid'), nextval(pg_get_serial_sequence($1, 'rowid')) + $2 - 1)",
            (table, n),
        )
        row = cur.fetchone()
        assert row is not None
        return int(row[0]) - n + 1

    def __enter__(self) -> PgConnection:
        self._savepoints += 1
        self._run(f"SAVEPOINT mnemon_sp{self._savepoints}", ())
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        name = f"mnemon_sp{self._savepoints}"
        self._savepoints -= 1
        if kind is None:
            self._run(f"RELEASE SAVEPOINT {name}", ())
            return
        if not self.raw.broken:
            self._run(f"ROLLBACK TO SAVEPOINT {name}", ())
            self._run(f"RELEASE SAVEPOINT {name}", ())

    def close(self) -> None:
        self.raw.close()

    # --- transactions --------------------------------------------------------------------------

    def begin_write(self) -> None:
        """BEGIN and take the store's advisory lock (held until COMMIT or ROLLBACK)."""
        self._run("BEGIN ISOLATION LEVEL READ COMMITTED", ())
        self._run("SELECT pg_advisory_xact_lock($1)", (self._lock_key,))

    def commit(self) -> None:
        self._run("COMMIT", ())

    def rollback(self) -> None:
        if self.raw.broken or self.raw.closed:
            return  # the server already dropped the transaction with the connection
        try:
            self._run("ROLLBACK", ())
        except StoreError:
            pass  # connection lost during the rollback: the server discards the transaction

    # --- the wire ------------------------------------------------------------------------------

    def _run(self, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        try:
            with self.raw.cursor() as cur:
                cur.execute(statement, params or None)
                self._changes = max(cur.rowcount, 0)
                return cur.fetchall() if cur.description is not None else []
        except psycopg.Error as exc:
            raise self._failure(exc) from exc

    def _failure(self, exc: psycopg.Error) -> Exception:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, psycopg.errors.LockNotAvailable):
            return LockTimeout("database is busy: another mnemon process holds the write lock")
        if self.raw.broken or self.raw.closed or isinstance(exc, psycopg.OperationalError):
            return StoreError(
                f'lost connection to PostgreSQL for store "{self.store}": {message}; the command was rolled back'
            )
        return StatementError(message)


def _multi_rows(cur: psycopg.Cursor[Any], multi: dialect.MultiRow, rows: Sequence[Sequence[Any]]) -> int:
    """Rows as multi-row ``INSERT ... VALUES (...), (...)`` statements (a thousand rows each, the
    statement's own conflict clause); return the rows they wrote.

    Every INSERT of many rows that is not a plain COPY goes through here: an upsert's ON CONFLICT
    needs a statement, and a staging table for a COPY would need the TEMPORARY privilege (or
    CREATE on the schema), which a role with only its store's privileges may not have. The
    statements keep the caller's order, so serial columns are allocated as one by one.
    """
    changed = 0
    step = multi.rows_per_statement
    for start in range(0, len(rows), step):
        chunk = rows[start : start + step]
        cur.execute(multi.text(len(chunk)), [v for row in chunk for v in row])
        changed += max(cur.rowcount, 0)
    return changed


def _copy_into(cur: psycopg.Cursor[Any], multi: dialect.MultiRow, rows: Sequence[Sequence[Any]]) -> int:
    """A plain INSERT (no conflict clause) as one COPY into the table itself; return the rows.

    COPY is that INSERT: the same rows in the same order (serial columns allocated in the
    caller's order), the same row and statement triggers with the same transition table,
    the same constraint errors. It needs no staging table (so no TEMPORARY privilege), and the
    server stores the rows while the client is still sending the next ones.
    """
    constants = [(k, int(slot)) for k, slot in enumerate(multi.slots) if slot != "?"]
    with cur.copy(f"COPY {multi.table} ({', '.join(multi.columns)}) FROM STDIN") as copy:
        if not constants:
            for row in rows:
                copy.write_row(row)
        else:
            for row in rows:
                values = list(row)
                for k, value in constants:
                    values.insert(k, value)
                copy.write_row(values)
    return len(rows)


@contextlib.contextmanager
def bulk_tuning(conn: PgConnection) -> Iterator[None]:
    """This session's memory for sorts and hashes raised for a bulk write, then reset.

    An import's statements sort and hash hundreds of thousands of rows (the staged rows in the
    caller's order, the endpoint checks, the per-node edge counts); at the default 4 MB each of
    them spills to temporary files. Session-local; durability and locking are unchanged.
    """
    conn.execute(f"SET work_mem = '{BULK_WORK_MEM}'", raw=True)
    try:
        yield
    finally:
        if not (conn.raw.broken or conn.raw.closed):
            try:
                conn.execute("RESET work_mem", raw=True)
            except StoreError:
                pass  # the connection went away: nothing left to reset


def connect(conninfo: str, *, store: str, schema: str, filename: str, readonly: bool) -> PgConnection:
    """Connect (within the connect timeout) and point the session at the store's schema."""
    params = psycopg.conninfo.conninfo_to_dict(conninfo)
    extra: dict[str, Any] = {}
    if "connect_timeout" not in params:
        extra["connect_timeout"] = CONNECT_TIMEOUT_S
    try:
        raw = psycopg.connect(conninfo, autocommit=True, cursor_factory=psycopg.RawCursor, **extra)
    except psycopg.Error as exc:
        text = str(exc).strip().splitlines()
        raise StoreError(f'cannot reach PostgreSQL for store "{store}": {text[0] if text else exc}') from exc
    conn = PgConnection(raw, store=store, schema=schema, filename=filename, readonly=readonly)
    try:
        setup = pgsql.SQL("SET search_path TO {}, pg_catalog; SET lock_timeout = {}; SET TIME ZONE 'UTC'").format(
            pgsql.Identifier(schema), pgsql.Literal(f"{BUSY_TIMEOUT_MS}ms")
        )
        if readonly:
            setup = setup + pgsql.SQL("; SET default_transaction_read_only = on")
        with psycopg.ClientCursor(raw) as cur:
            cur.execute(setup)
    except psycopg.Error as exc:
        raw.close()
        raise StoreError(f'cannot reach PostgreSQL for store "{store}": {exc}') from exc
    return conn


def quoted(schema: str) -> str:
    """The schema name as an SQL identifier."""
    return '"' + schema.replace('"', '""') + '"'
