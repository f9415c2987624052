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
