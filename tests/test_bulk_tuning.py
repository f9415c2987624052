"""A bulk writer's connection tuning is undone afterwards (store/connection.py)."""

from __future__ import annotations

from pathlib import Path

import apsw

from mnemon.store import connection


def _pragma(conn: apsw.Connection, name: str) -> int:
    return int(connection.scalar(conn, f"PRAGMA {name}"))


def test_bulk_tuning_and_sort_cache_restore_the_pragmas(tmp_path: Path) -> None:
    conn = connection.open_writable(tmp_path / "mnemon.db")
    before = (_pragma(conn, "cache_size"), _pragma(conn, "wal_autocheckpoint"))
    with connection.bulk_tuning(conn):
        assert _pragma(conn, "wal_autocheckpoint") == connection.BULK_WAL_AUTOCHECKPOINT_PAGES
        assert _pragma(conn, "cache_size") == -connection.BULK_CACHE_MIN_KIB  # an empty file: the lower bound
        with connection.sort_cache(conn):
            assert _pragma(conn, "cache_size") == -connection.SORT_CACHE_KIB
        assert _pragma(conn, "cache_size") == -connection.BULK_CACHE_MIN_KIB
    assert (_pragma(conn, "cache_size"), _pragma(conn, "wal_autocheckpoint")) == before
    conn.close()


def test_a_failing_body_still_restores_them(tmp_path: Path) -> None:
    conn = connection.open_writable(tmp_path / "mnemon.db")
    before = _pragma(conn, "cache_size")
    try:
        with connection.sort_cache(conn):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert _pragma(conn, "cache_size") == before
    conn.close()


def _rows_in_main_file(db: Path, tmp: Path) -> int:
    """Rows of ``t`` in the database file alone (its WAL left behind): what a checkpoint copied."""
    alone = tmp / "alone.db"
    alone.write_bytes(db.read_bytes())
    conn = apsw.Connection(str(alone))
    try:
        return int(connection.scalar(conn, "SELECT COUNT(*) FROM t"))
    finally:
        conn.close()


def _write_rows(conn: apsw.Connection, n: int) -> None:
    """n rows in the WAL only (the table itself already in the database file)."""
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with conn:
        conn.executemany("INSERT INTO t VALUES (?)", [(f"row {k}",) for k in range(n)])


def test_batches_commit_without_a_sync_until_the_last_transaction_asks_again(tmp_path: Path) -> None:
    conn = connection.open_writable(tmp_path / "mnemon.db")
    assert _pragma(conn, "synchronous") == 2  # FULL
    with connection.bulk_tuning(conn):
        assert _pragma(conn, "synchronous") == 1  # NORMAL: the batches
        connection.commits_synced(conn)
        assert _pragma(conn, "synchronous") == 2  # the last transaction waits for the disk
    assert _pragma(conn, "synchronous") == 2
    conn.close()


def test_a_failing_bulk_write_checkpoints_what_it_committed(tmp_path: Path) -> None:
    db = tmp_path / "mnemon.db"
    conn = connection.open_writable(db)
    try:
        with connection.bulk_tuning(conn):
            _write_rows(conn, 50)
            assert _rows_in_main_file(db, tmp_path) == 0  # still only in the WAL
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert _pragma(conn, "synchronous") == 2
    assert _rows_in_main_file(db, tmp_path) == 50  # the checkpoint synced and copied them
    conn.close()


def test_checkpoint_aside_copies_the_wal_into_the_database_beside_the_caller(tmp_path: Path) -> None:
    db = tmp_path / "mnemon.db"
    conn = connection.open_writable(db)
    _write_rows(conn, 200)
    assert _rows_in_main_file(db, tmp_path) == 0
    join = connection.checkpoint_aside(db)
    with conn:  # the caller reads meanwhile (in its own snapshot), as the index build does
        assert connection.scalar(conn, "SELECT COUNT(*) FROM t") == 200
    join()
    assert _rows_in_main_file(db, tmp_path) == 200
    busy, log, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert busy == 0 and log == copied  # nothing left for the close to copy
    conn.close()
