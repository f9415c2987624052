"""Open SQLite connections the one way mnemon uses them (contract §2.3).

Writable: WAL, foreign keys on, a busy timeout (the Go program set none and lost writes to
"database is locked"), synchronous FULL so an acknowledged write survives a power cut, double
quoted string literals off. Read-only (``--readonly``): an absolute ``file:`` URI with
``mode=ro&immutable=1`` so no ``-wal``/``-shm`` side file ever appears and the bytes stay identical; a
snapshot, "not for following a live DB". Live read-only (the gateway's read-only calls, which serve a
store other tokens write): ``mode=ro`` alone, reading through the WAL like any reader. Directories are
created 0700 and the database 0600: memories are private. Only this package imports apsw.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import apsw

from mnemon.errors import NotFoundError, StoreError
from mnemon.records import BUSY_TIMEOUT_MS

DIR_MODE = 0o700
FILE_MODE = 0o600
# Test-only hook: the reliability suite sets this to a registered fault-injecting apsw VFS name.
VFS_NAME: str | None = None


def one_row(conn: apsw.Connection, sql: str, params: tuple[object, ...] = ()) -> Any:
    """The one row of an aggregate query (COUNT, MAX, ... without GROUP BY: always exactly one row)."""
    row = conn.execute(sql, params).fetchone()
    if row is None:
        raise StoreError(f"no row from an aggregate query: {sql}")
    return row


def scalar(conn: apsw.Connection, sql: str, params: tuple[object, ...] = ()) -> Any:
    """The one value of an aggregate query."""
    return one_row(conn, sql, params)[0]


def _pragma(conn: apsw.Connection, statement: str) -> object:
    """Run one pragma and return its first value (apsw skips later pragmas in a multi-statement string)."""
    row = conn.execute(statement).fetchone()
    return row[0] if row else None


def ensure_private_dir(path: Path) -> None:
    """Create ``path`` (and parents) with mode 0700, refusing a symlinked store directory."""
    try:
        if path.is_symlink():
            raise StoreError(f"refusing to use symlinked directory: {path}")
        missing = []
        probe = path
        while not probe.exists():
            missing.append(probe)
            probe = probe.parent
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise StoreError(f"cannot use directory {path}: {exc.strerror}") from exc
    # Create each missing level 0700 ourselves: mkdir(parents=True) gives parents the umask mode.
    for level in reversed(missing):
        try:
            level.mkdir(mode=DIR_MODE)
        except FileExistsError:
            pass  # a concurrent process created it
        except OSError as exc:
            raise StoreError(f"cannot create directory {level}: {exc.strerror}") from exc
    if not path.is_dir():
        raise StoreError(f"not a directory: {path}")


def ensure_private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 if missing, so SQLite inherits private permissions."""
    if path.is_symlink():
        raise StoreError(f"refusing to use symlinked database: {path}")
    try:
        fd = os.open(path, os.O_CREAT | os.O_RDWR, FILE_MODE)
    except OSError as exc:
        raise StoreError(f"cannot create database {path}: {exc.strerror}") from exc
    os.close(fd)


WAL_RETRY_SLEEP_S = 0.01


def _enable_wal(conn: apsw.Connection) -> object:
    """``PRAGMA journal_mode=WAL``, retried until the busy timeout.

    Switching a new database to WAL upgrades a SHARED lock to EXCLUSIVE. When another process is
    creating the same database at that moment (two first commands at once, e.g. an import and a
    hook's ``status``), SQLite sees a possible deadlock and returns SQLITE_BUSY at once, without
    calling the busy handler; so the wait is ours.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            return _pragma(conn, "PRAGMA journal_mode=WAL")
        except apsw.BusyError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(WAL_RETRY_SLEEP_S)


def open_writable(path: Path) -> apsw.Connection:
    """Open (creating if needed) a writable WAL connection to ``path``."""
    ensure_private_dir(path.parent)
    ensure_private_file(path)
    try:
        conn = apsw.Connection(
            str(path), flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE, vfs=VFS_NAME
        )
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        mode = _enable_wal(conn)
        if str(mode).lower() != "wal":
            raise StoreError(f"cannot enable WAL on {path} (journal_mode={mode})")
        _pragma(conn, "PRAGMA foreign_keys=ON")
        _pragma(conn, "PRAGMA synchronous=FULL")
        conn.config(apsw.SQLITE_DBCONFIG_DQS_DML, 0)
        conn.config(apsw.SQLITE_DBCONFIG_DQS_DDL, 0)
    except apsw.Error as exc:
        raise StoreError(f"cannot open database {path}: {exc}") from exc
    return conn


# Bulk writes (import): edge b-trees keyed by random UUIDs touch pages all over the file, so the
# default 2 MB page cache thrashes, and a checkpoint after every 1000 WAL pages copies the same hot
# pages back into the database again and again. SQLite allocates cache pages only as they are used,
# and every used page is resident memory: 1 GiB made a 100k import with vectors peak at 2.4 GB beyond
# its vector file; 256 MiB imported a 50k draft no slower (the import writes edge rows in key order,
# so the hot pages are few) and peaked 400 MB lower. The cache follows the database instead, half its
# size within [BULK_CACHE_MIN_KIB, BULK_CACHE_KIB] (bulk_cache_follow, before each chunk): a 10k import
# (a 117 MB database) took the same CPU with 256, 64 or 32 MiB (6.04 / 6.08 / 6.06 s) and peaked at
# 312 / 252 / 216 MB, while a 100k import (1.2 GB) took 94.8 s of CPU with 256 MiB, 112.7 s with 32.
BULK_CACHE_KIB = 262_144
BULK_CACHE_MIN_KIB = 65_536
BULK_WAL_AUTOCHECKPOINT_PAGES = 65_536


@contextmanager
def bulk_tuning(conn: apsw.Connection) -> Iterator[None]:
    """Tune this connection for a bulk write, and restore its settings afterwards.

    The page cache and the checkpoint interval grow, both connection-local. The batches commit
    without waiting for the disk (``synchronous=NORMAL``; in WAL mode a commit is then safe from
    a crash of the process, not from a power cut): the caller turns the wait back on for its last
    transaction (``commits_synced``), whose sync of the WAL file makes every earlier batch's
    frames durable too, before the result is printed. A body that fails part-way checkpoints
    what it committed, which syncs it. A 10k import waited 0.1-0.3 s for the batches' syncs.
    """
    with _pragmas_restored(conn, "cache_size", "wal_autocheckpoint", "synchronous"):
        bulk_cache_follow(conn)
        _pragma(conn, f"PRAGMA wal_autocheckpoint={BULK_WAL_AUTOCHECKPOINT_PAGES}")
        _pragma(conn, "PRAGMA synchronous=NORMAL")
        try:
            yield
        except BaseException:
            try:
                commits_synced(conn)
                _pragma(conn, "PRAGMA wal_checkpoint(PASSIVE)")  # syncs the WAL before copying it
            except apsw.Error:
                pass  # the original error matters; a failed connection has nothing more to sync
            raise


def commits_synced(conn: apsw.Connection) -> None:
    """Inside ``bulk_tuning``: every commit from now on waits for the disk again (FULL)."""
    _pragma(conn, "PRAGMA synchronous=FULL")


def checkpoint_aside(path: Path) -> Callable[[], None]:
    """Copy the WAL into the database from a thread on a connection of its own, while this
    process goes on (a large import builds its hot index meanwhile); return the join.

    The copy would otherwise be paid by the closing connection, the last one, after everything
    else (0.27 s of a 10k import). SQLite runs the checkpoint without the GIL and beside this
    process's reads, which see the same pages from the WAL until they are copied. Best effort:
    an error leaves the copy to the close, as before.
    """
    import threading

    def run() -> None:
        try:
            aside = open_writable(path)
        except StoreError:
            return
        try:
            _pragma(aside, "PRAGMA wal_checkpoint(PASSIVE)")
        except apsw.Error:
            pass
        finally:
            aside.close()

    thread = threading.Thread(target=run, name="mnemon-checkpoint", daemon=True)
    thread.start()
    return thread.join


def bulk_cache_follow(conn: apsw.Connection) -> None:
    """Set a bulk writer's page cache to half the database's current size, within the bulk bounds
    (pages are allocated as they are used: the bound is what a large store may keep resident)."""
    kib = int(scalar(conn, "PRAGMA page_count")) * int(scalar(conn, "PRAGMA page_size")) // 2048
    _pragma(conn, f"PRAGMA cache_size=-{min(BULK_CACHE_KIB, max(BULK_CACHE_MIN_KIB, kib))}")


# An index built from a large table (an import's deferred indexes, bulkwrite) sorts in memory up to
# the page cache's size before it merges runs from temporary files: 3.5M edge keys (100k import)
# built with 256 MiB took 3.24 s of CPU and peaked at 534 MB, with 64 MiB 2.99 s and 148 MB.
SORT_CACHE_KIB = 65_536


@contextmanager
def sort_cache(conn: apsw.Connection) -> Iterator[None]:
    """At most SORT_CACHE_KIB of page cache (and so of in-memory sort) while the body builds an
    index; the connection's size is restored afterwards."""
    with _pragmas_restored(conn, "cache_size"):
        _pragma(conn, f"PRAGMA cache_size=-{SORT_CACHE_KIB}")
        from mnemon.heap import release_free_memory

        # The pages the smaller cache let go, beyond what the sort allocates itself (100k: 110 MiB free).
        release_free_memory(SORT_CACHE_KIB << 10)
        yield


@contextmanager
def _pragmas_restored(conn: apsw.Connection, *names: str) -> Iterator[None]:
    """Put the connection's integer pragmas ``names`` back to their values before the body."""
    saved = [(name, int(_pragma(conn, f"PRAGMA {name}"))) for name in names]  # type: ignore[call-overload]
    try:
        yield
    finally:
        try:
            for name, value in saved:
                _pragma(conn, f"PRAGMA {name}={value}")
        except apsw.Error:
            pass  # a closed or failed connection keeps nothing to restore


@contextmanager
def foreign_keys_unchecked(conn: apsw.Connection) -> Iterator[None]:
    """Skip per-row foreign-key checks for the enclosed transaction (the pragma is a no-op inside one).

    Only for a bulk writer that checks every edge endpoint itself, set-based, inside the same
    transaction (import: about 40 % of each edge row's cost is the two parent look-ups).
    """
    _pragma(conn, "PRAGMA foreign_keys=OFF")
    try:
        yield
    finally:
        try:
            _pragma(conn, "PRAGMA foreign_keys=ON")
        except apsw.Error:
            pass  # a closed connection enforces nothing any more


def holds_connections() -> bool:
    """Whether this process has a SQLite connection open. A process forked while it has one must
    not open that database again (SQLite keeps the process's lock state for a file in memory,
    which the child would inherit wrong): ``engine.hotaside`` forks only when this is False."""
    return bool(apsw.connections())


def open_readonly(path: Path, *, live: bool = False) -> apsw.Connection:
    """Open ``path`` read-only; the file must exist and its database is never modified.

    By default immutable (``--readonly``, contract §2.3): SQLite reads the main file alone, takes no
    lock and writes no side file, so the bytes stay identical; but commits still in the WAL are not
    seen and a checkpoint running meanwhile may rewrite a page under it. ``live`` is the reader of a
    store others are writing (the gateway's read-only tokens): ``mode=ro`` without ``immutable``, a
    WAL reader with its shared-memory locks, which sees every commit and is safe against a concurrent
    checkpoint. It may create the ``-wal``/``-shm`` files a WAL reader needs (a writer's next close
    removes them); the database itself is never written (``query_only`` as well as ``mode=ro``).
    """
    # Same refusal as a writable open: a symlinked store or database is never followed.
    if path.parent.is_symlink():
        raise StoreError(f"refusing to use symlinked directory: {path.parent}")
    if path.is_symlink():
        raise StoreError(f"refusing to use symlinked database: {path}")
    absolute = path.resolve()
    if not absolute.is_file():
        raise NotFoundError(f"database not found: {path}")
    uri = "file:" + quote(str(absolute), safe="/") + ("?mode=ro" if live else "?mode=ro&immutable=1")
    try:
        conn = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI, vfs=VFS_NAME)
        if live:  # a reader can meet a lock (a WAL recovery, a checkpoint's reset): wait as a writer would
            conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        _pragma(conn, "PRAGMA query_only=ON")
    except apsw.Error as exc:
        raise StoreError(f"cannot open database {path}: {exc}") from exc
    return conn
