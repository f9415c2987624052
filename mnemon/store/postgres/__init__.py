"""The PostgreSQL backend: a ``Store`` whose database is one schema on a PostgreSQL server.

Opened only for a store directory that holds a registration (``store/registration.py``), so psycopg
is imported only then. The store modules' functions run unchanged on its connection
(``connection.PgConnection`` translates their statements, ``dialect.py``); the derived caches (hot
index, vector matrix) live under the local store directory in a folder named after the remote
store's identity (``postgres-<store_id>.index``), so a dropped and re-created remote store is never
served from the old caches; the generation and row markers they compare are the same as SQLite's.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from mnemon.errors import InputError, NotFoundError, ReadonlyModeError, StoreError
from mnemon.store import Store, registration
from mnemon.store.postgres import connection, schema


class PostgresStore(Store):
    """An open PostgreSQL store (writable or read-only)."""

    backend = "postgres"

    def __init__(self, conn: connection.PgConnection, path: Path, reg: registration.Registration, *, readonly: bool) -> None:
        super().__init__(conn, path, readonly=readonly)  # type: ignore[arg-type]
        self.registration = reg

    @classmethod
    def open_registered(cls, store_dir: Path, *, readonly: bool, now: str) -> PostgresStore:
        return cls.open_with(registration.read(store_dir), store_dir, readonly=readonly)

    @classmethod
    def open_with(cls, reg: registration.Registration, store_dir: Path, *, readonly: bool) -> PostgresStore:
        """Connect; a writable open creates and migrates the schema, a read-only one never writes."""
        conn = connection.connect(reg.conninfo, store=reg.name, schema=reg.schema, filename="", readonly=readonly)
        try:
            if readonly:
                if not schema.exists(conn):
                    raise NotFoundError(f'database not found: PostgreSQL schema "{reg.schema}" of store "{reg.name}"')
            elif not schema.is_current(conn):
                schema.migrate(conn, connection.quoted(reg.schema), reg.schema)
            # The caches read the edge change log only where it exists (a read-only open may meet
            # a schema an older mnemon created): writable opens have just migrated.
            conn.edge_change_log = not readonly or schema.is_current(conn)
            path = store_dir / f"postgres-{schema.store_id(conn)}"
            conn.filename = str(path)
            return cls(conn, path, reg, readonly=readonly)
        except BaseException:
            conn.close()
            raise

    def bulk_tuning(self) -> contextlib.AbstractContextManager[None]:
        return connection.bulk_tuning(self.conn)  # type: ignore[arg-type]

    def write_mark(self) -> tuple[int, int]:
        """Only mnemon writes a PostgreSQL store, and every write bumps the generation."""
        return self.generation(), 0

    def trigger_problems(self) -> list[str]:
        """Missing tables the triggers write into, and missing triggers of the schema beyond the
        counter triggers ``counts.problems`` names."""
        from mnemon.store import counts

        tables = [f"table {name} missing" for name in schema.missing_tables(self.conn)]  # type: ignore[arg-type]
        return tables + [f"trigger {name} missing" for name in schema.missing_triggers(self.conn) if name not in counts.TRIGGER_NAMES]  # type: ignore[arg-type]

    def reinstall_triggers(self, conn: object) -> bool:
        from mnemon.store import counts

        restarted = schema.reinstall_triggers(conn)  # type: ignore[arg-type]
        counts.rebuild(conn)  # type: ignore[arg-type]
        return restarted

    def compact(self) -> tuple[int, int]:
        """VACUUM the store's tables (``gc --compact``); return the bytes before and after."""
        if self.readonly:
            raise ReadonlyModeError("gc --compact")
        before = self.size_bytes()
        for table in ("insights", "edges", "oplog", "insight_entities", "mnemon_counts", "entity_counts", "mnemon_meta"):
            self.conn.execute(f"VACUUM {table}", raw=True)  # type: ignore[call-arg]
        return before, self.size_bytes()

    def size_bytes(self) -> int:
        row = self.conn.execute(  # type: ignore[call-arg]
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'm')",
            raw=True,
        ).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception as exc:  # noqa: BLE001 - closing a broken connection
            raise StoreError(f"cannot close the PostgreSQL connection: {exc}") from exc


def drop_remote(store_dir: Path) -> None:
    """Drop the registered store's schema on the server (``store remove --drop``)."""
    reg = registration.read(store_dir)
    conn = connection.connect(reg.conninfo, store=reg.name, schema=reg.schema, filename="", readonly=False)
    try:
        schema.drop(conn, connection.quoted(reg.schema))
    finally:
        conn.close()


def parse_conninfo(conninfo: str) -> dict[str, str]:
    """The libpq parameters of a URL or ``key=value`` string (``service=NAME`` included)."""
    import psycopg

    try:
        return {str(k): str(v) for k, v in psycopg.conninfo.conninfo_to_dict(conninfo).items()}
    except psycopg.Error as exc:
        raise InputError(f"invalid PostgreSQL connection string: {str(exc).strip()}") from exc
