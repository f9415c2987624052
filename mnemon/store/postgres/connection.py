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
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import apsw
import psycopg
from psycopg import sql as pgsql

from mnemon.errors import StoreError
from mnemon.records import BUSY_TIMEOUT_MS
from mnemon.store.postgres import dialect

CONNECT_TIMEOUT_S = 5
# From this many rows an executemany'd INSERT goes through COPY (_copy_into, _copy_insert).
COPY_MIN_ROWS = 2_000
BULK_WORK_MEM = "128MB"  # work_mem during an import (bulk_tuning)


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

    def __iter__(self) -> _Rows:
        return self

    def __next__(self) -> tuple[Any, ...]:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row


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
        self._stages = 0  # staging tables created (each gets a name of its own)
        self._stage_ok: bool | None = None  # may create them (None: not asked yet)
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

    def executemany(self, statement: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run the statement for every row, in order. An INSERT becomes multi-row statements (a
        thousand rows each), so its triggers run once per statement rather than once per row;
        from COPY_MIN_ROWS rows a plain INSERT is one COPY into the table, an upsert a COPY into
        a staging table and one INSERT ... SELECT from it."""
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
                    self._changes = self._copy_into(cur, multi, batch)
                    return
                if len(batch) >= COPY_MIN_ROWS and self._may_stage(cur):
                    self._changes = self._copy_insert(cur, multi, batch)
                    return
                changed = 0
                for start in range(0, len(batch), multi.rows_per_statement):
                    chunk = batch[start : start + multi.rows_per_statement]
                    cur.execute(multi.text(len(chunk)), [v for row in chunk for v in row])
                    changed += max(cur.rowcount, 0)
                self._changes = changed
        except psycopg.Error as exc:
            raise self._failure(exc) from exc

    def _may_stage(self, cur: psycopg.Cursor[Any]) -> bool:
        """Whether this role may create temporary tables here (asked once per connection; a
        database that revokes TEMPORARY gets the multi-row statements instead)."""
        if self._stage_ok is None:
            cur.execute("SELECT has_database_privilege(current_database(), 'TEMPORARY')")
            row = cur.fetchone()
            self._stage_ok = bool(row and row[0])
        return self._stage_ok

    @staticmethod
    def _copy_into(cur: psycopg.Cursor[Any], multi: dialect.MultiRow, rows: list[Sequence[Any]]) -> int:
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

    def _copy_insert(self, cur: psycopg.Cursor[Any], multi: dialect.MultiRow, rows: list[Sequence[Any]]) -> int:
        """One INSERT ... SELECT from a staging table filled by COPY; return the rows it wrote.

        For a bulk write (import, copy) the multi-row VALUES statements cost the server more to
        parse and bind than the rows cost to store; COPY streams them instead. The staging table
        is temporary (this session's, dropped at once, and by the server with the transaction
        anyway), the rows keep their order (``ord``: serial rowids are allocated in the order the
        caller gave, as the VALUES statements do), and the INSERT is the same statement with the
        same ON CONFLICT clause, so triggers see one statement with every row.
        """
        self._stages += 1
        stage = f"mnemon_stage_{self._stages}"
        columns, select = multi.staged_columns()
        bound = ", ".join(columns)
        cur.execute(
            f"CREATE TEMP TABLE {stage} ON COMMIT DROP AS SELECT 0::bigint AS ord, {bound} FROM {multi.table} WITH NO DATA"
        )
        with cur.copy(f"COPY {stage} (ord, {bound}) FROM STDIN") as copy:
            for k, row in enumerate(rows):
                copy.write_row((k, *row))
        cur.execute(f"{multi.head} SELECT {select} FROM {stage} ORDER BY ord{multi.tail}")
        written = max(cur.rowcount, 0)
        cur.execute(f"DROP TABLE {stage}")
        return written

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
