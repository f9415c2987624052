"""The data directory's layout on disk (contract §2.1, §3.16): stores, the active file, legacy move."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from mnemon.errors import InputError, StoreError
from mnemon.store.connection import ensure_private_dir

DB_NAME = "mnemon.db"
SIDE_SUFFIXES = ("-wal", "-shm")


def stores_dir(data_dir: Path) -> Path:
    return data_dir / "data"


def store_db_path(data_dir: Path, name: str) -> Path:
    return stores_dir(data_dir) / name / DB_NAME


def check_outside(data_dir: Path, output: str) -> None:
    """Refuse (InputError) an output file inside the data folder (``<data-dir>/data``: every store's database,
    its WAL and the indexes beside it) or over a database not yet moved there (``<data-dir>/mnemon.db``):
    ``export -o data/default/mnemon.db`` once overwrote the store it was exporting, and every later command
    said "file is not a database". Symbolic links are followed, as the write would follow them."""
    try:
        target = Path(output).resolve()
        root = data_dir.resolve()
    except (OSError, ValueError, RuntimeError):  # a NUL in the path, a symlink loop: the write says what is wrong
        return
    if target.is_relative_to(stores_dir(root)):
        raise InputError(f"refusing to write {output}: it is inside mnemon's data folder {stores_dir(root)}, "
                         "whose files are the stores' own; choose a path outside it")
    if target in {root / (DB_NAME + suffix) for suffix in ("", *SIDE_SUFFIXES)}:
        raise InputError(f"refusing to write {output}: it is a store's database (not yet moved into "
                         f"{stores_dir(root)}); choose a path outside mnemon's data")


def migrate_legacy(data_dir: Path) -> Path | None:
    """Move ``<data-dir>/mnemon.db`` (+ side files) into ``data/default/`` when that is free.

    Returns the new path when a move happened, so the caller can print the contract's notice.
    """
    legacy = data_dir / DB_NAME
    target = store_db_path(data_dir, "default")
    if not legacy.is_file() or target.exists():
        return None
    ensure_private_dir(target.parent)
    try:
        os.replace(legacy, target)
        for suffix in SIDE_SUFFIXES:
            side = Path(str(legacy) + suffix)
            if side.exists():
                os.replace(side, Path(str(target) + suffix))
    except OSError as exc:
        raise StoreError(f"cannot migrate legacy database: {exc.strerror}") from exc
    return target


def list_stores(data_dir: Path) -> list[str] | None:
    """Sorted store directory names, or None when there is no ``data/`` directory yet."""
    from mnemon.config import valid_store_name

    base = stores_dir(data_dir)
    if not base.is_dir():
        return None
    return sorted(p.name for p in base.iterdir() if p.is_dir() and valid_store_name(p.name))


def store_exists(data_dir: Path, name: str) -> bool:
    try:
        return (stores_dir(data_dir) / name).is_dir()
    except OSError:  # ENAMETOOLONG and friends: no such store can exist
        return False


def remove_store(data_dir: Path, name: str) -> None:
    path = stores_dir(data_dir) / name
    if path.is_symlink():
        path.unlink()
        return
    try:
        shutil.rmtree(path)
    except OSError as exc:
        raise StoreError(f"cannot remove store {name!r}: {exc.strerror}") from exc


def write_active(data_dir: Path, name: str) -> None:
    """Write the active store name atomically (a crash never leaves a half-written file)."""
    ensure_private_dir(data_dir)
    tmp = data_dir / ".active.tmp"
    try:
        # 0600 whatever the umask: a world-writable active file would let anyone redirect writes.
        fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(name + "\n")
        os.chmod(tmp, 0o600)  # an older tmp left by a crash keeps its mode otherwise
        os.replace(tmp, data_dir / "active")
    except OSError as exc:
        raise StoreError(f"cannot write active store: {exc.strerror}") from exc
