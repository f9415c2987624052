"""Where a store's derived files live: one folder beside the database, ``mnemon.db.index/``.

Owns the names of every rebuildable file (the hot index ``hot``, ``hot.delta``, ``hot.stamp``;
the vector matrix ``vec`` with ``vec.norms``, ``vec.ids``, ``vec.rowids``, ``vec.active``,
its int8 codes ``vec.q8``, ``vec.qmult``, ``vec.qresid``, the hint ``vec.hotrows``, ``vec.json``, ``vec.lock``; the
word vectors ``words``) and the silent move from the old layout, where they sat beside the
database as ``mnemon.db.hot``, ``mnemon.db.vec.json``, ... SQLite stays the truth: deleting the
folder loses nothing, and it is the one documented way to force a rebuild.

The move runs on every writable open (a few ``stat`` calls when there is nothing to move) and is
safe when several processes open an old-layout store at once: each file moves by a hard link
into the folder (which never replaces a file already there: the folder's copy wins) and then
the unlink of the old name; a process that finds a file already moved (ENOENT) leaves it. So when
any opener's move returns, no old file is left, and the vector lock file keeps its inode, so a
lock taken on it still excludes. ``--readonly`` never calls it: a
read-only open creates and moves nothing, and an old-layout store is served from memory until a
writable open moves its files.
"""

from __future__ import annotations

import os
from pathlib import Path

from mnemon.store.connection import ensure_private_dir

FOLDER_SUFFIX = ".index"
# Every file the folder may hold, as named in the old layout after "<db>." (a fixed list: the move
# never touches a file it does not know).
NAMES = (
    "hot", "hot.delta", "hot.stamp",
    "vec", "vec.norms", "vec.ids", "vec.rowids", "vec.active", "vec.json", "vec.lock",
    "vec.q8", "vec.qmult", "vec.qresid", "vec.hotrows", "words",  # later than the old layout: never found there
)  # fmt: skip


def folder(db_path: Path) -> Path:
    """``<db>.index``: the store's derived-file folder."""
    return db_path.with_name(db_path.name + FOLDER_SUFFIX)


def path(db_path: Path, name: str) -> Path:
    """The derived file ``name`` (one of :data:`NAMES`) of the store at ``db_path``."""
    return folder(db_path) / name


def ensure_folder(db_path: Path) -> Path:
    """Create the folder (0700) if missing, e.g. after a user deleted it to force a rebuild."""
    target = folder(db_path)
    if not target.is_dir():
        ensure_private_dir(target)
    return target


def legacy_files(db_path: Path) -> list[Path]:
    """Old-layout derived files still beside the database, and their leftover temp files."""
    parent = db_path.parent
    found = [parent / f"{db_path.name}.{name}" for name in NAMES]
    out = [p for p in found if p.exists()]
    tmp_prefix = f".{db_path.name}."
    try:
        out += [p for p in parent.iterdir() if p.name.startswith(tmp_prefix) and p.name.endswith(".tmp")]
    except OSError:
        pass
    return out


def move_legacy(db_path: Path) -> list[str]:
    """Move old-layout derived files into the folder; return the names moved (writable opens only)."""
    old = legacy_files(db_path)
    if not old:
        return []
    target = ensure_folder(db_path)
    moved: list[str] = []
    prefix = db_path.name + "."
    for source in old:
        name = source.name[len(prefix) :] if source.name.startswith(prefix) else None
        try:
            if name is not None:
                try:
                    os.link(source, target / name)  # never replaces: a file already there wins
                    moved.append(name)
                except FileExistsError:
                    pass
            os.unlink(source)  # moved, an older copy, or a temp file of an interrupted write
        except FileNotFoundError:
            continue  # another process moved or removed it first
    return moved
