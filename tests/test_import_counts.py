"""An import counts its own edge rows once per statement (``counts.edge_inserts_counted``) instead
of a trigger per row (issue 24): the counters still equal ``COUNT(*)`` after an import, after a
kill -9 between chunks or inside the counted window, after rows written behind mnemon's back
with the ``sqlite3`` shell (also between two chunks of an import), and the store an import
writes is the one main c651df5 wrote for the same draft (a recorded digest).

Run as a script (``python tests/test_import_counts.py``) to print the digest of the store the
``mnemon`` on ``sys.path`` imports: how ``C651DF5_DIGEST`` was recorded (``PYTHONPATH`` set to a
checkout of c651df5).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import apsw
import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # appended: as a script, the PYTHONPATH's mnemon comes first

from bench.generate import generate_draft  # noqa: E402

NOW = datetime(2026, 9, 2, 12, 0, 0, tzinfo=timezone.utc)
DIGEST_N, DIGEST_SEED = 2000, 7
# The digest of generate_draft(2000, seed=7) imported at NOW by main c651df5 (see the module doc).
C651DF5_DIGEST = "0d59d99b25522e04bedcc92beb6d49e7190f60c55d21e6da2cf134ce036276ee"


def _db(data_dir: Path) -> Path:
    return data_dir / "data" / "default" / "mnemon.db"


def _import(data_dir: Path, draft: dict[str, object], **kwargs: object) -> dict[str, object]:
    from mnemon.config import Settings
    from mnemon.drafts import parse_draft
    from mnemon.engine import Engine

    settings = Settings(data_dir=data_dir, store="default", embed_endpoint="http://127.0.0.1:9")
    with Engine(settings, clock=lambda: NOW) as engine:
        return engine.import_draft(parse_draft(json.dumps(draft)), **kwargs)  # type: ignore[attr-defined,no-any-return]


def store_digest(db: Path) -> str:
    """SHA-256 over the store's rows with every id replaced by its insight's content (ids are
    random): insights (every column but id and stored_at), edges (keys, weights, metadata,
    created_at), the oplog in order, and the counters; row order aside from the oplog's is not
    part of it (edge rowids follow the random ids)."""
    conn = apsw.Connection(str(db))
    try:
        content = {str(r[0]): str(r[1]) for r in conn.execute("SELECT id, content FROM insights")}
        insight_rows = Counter(
            tuple(r) for r in conn.execute(
                "SELECT content, category, importance, tags, entities, source, access_count, created_at, updated_at, "
                "deleted_at, last_accessed_at, effective_importance FROM insights"
            )
        )  # fmt: skip
        edge_rows = Counter(
            (content[s], content[t], kind, weight, meta, created)
            for s, t, kind, weight, meta, created in conn.execute(
                "SELECT source_id, target_id, edge_type, weight, metadata, created_at FROM edges"
            )
        )
        log = [
            (op, content.get(str(ref), ref), str(detail).replace(str(ref), content.get(str(ref), str(ref))), created)
            for op, ref, detail, created in conn.execute(
                "SELECT operation, insight_id, detail, created_at FROM oplog ORDER BY id"
            )
        ]
        kept = sorted(tuple(r) for r in conn.execute("SELECT key, n FROM mnemon_counts WHERE n != 0"))
        kept_entities = sorted(tuple(r) for r in conn.execute("SELECT entity, n FROM entity_counts"))
    finally:
        conn.close()
    text = json.dumps(
        [sorted(map(list, insight_rows.items())), sorted(map(list, edge_rows.items())), log, kept, kept_entities],
        sort_keys=True, default=list,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _assert_exact(db: Path) -> None:
    """Every counter equals a real count and every counter trigger is there; the entity rows are
    the ones the triggers derive from the insights; the edges' target index and the insight
    indexes a large import builds at its end (``store/bulkwrite.py``) are there, as the schema
    writes them, and the schema is current."""
    from mnemon.store import counts, schema

    conn = apsw.Connection(str(db))
    try:
        assert counts.problems(conn) == []
        derived = sorted(conn.execute(
            "SELECT j.value, i.created_at, i.id FROM insights i, json_each(i.entities) j "
            "WHERE i.deleted_at IS NULL AND j.type = 'text'"
        ))  # fmt: skip
        assert sorted(conn.execute("SELECT entity, created_at, insight_id FROM insight_entities")) == derived
        assert schema.is_current(conn)
        for name in (schema.EDGE_TARGET_INDEX, *schema.BULK_DEFERRED_INDEXES):
            assert conn.execute(
                "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?", (name,)
            ).fetchone()[0] == schema.index_sql(name).replace(" IF NOT EXISTS", "")
        assert counts.edge_count(conn) == conn.execute("SELECT COUNT(*) FROM edges").fetchone()[0]
        assert counts.deleted_count(conn) == conn.execute(
            "SELECT COUNT(*) FROM insights WHERE deleted_at IS NOT NULL"
        ).fetchone()[0]
        assert counts.active_count(conn) == conn.execute(
            "SELECT COUNT(*) FROM insights WHERE deleted_at IS NULL"
        ).fetchone()[0]
    finally:
        conn.close()


def test_an_import_writes_the_store_c651df5_wrote(tmp_path: Path) -> None:
    report = _import(tmp_path, generate_draft(DIGEST_N, seed=DIGEST_SEED))
    assert report["imported"] == DIGEST_N and report["errors"] == 0
    _assert_exact(_db(tmp_path))
    assert store_digest(_db(tmp_path)) == C651DF5_DIGEST


def test_counts_are_exact_after_imports_into_a_fresh_and_a_filled_store(tmp_path: Path) -> None:
    """The second import re-imports half of the first draft (skipped items whose explicit edges
    then join two old insights: probed keys, some present) and adds new items."""
    first = generate_draft(600, seed=31)
    _import(tmp_path, first)
    _assert_exact(_db(tmp_path))
    second = generate_draft(400, seed=32)
    mixed = {
        "schema_version": "1",
        "insights": first["insights"][:300] + second["insights"],  # type: ignore[index,operator]
        "edges": first["edges"][:2000] + [  # type: ignore[index,operator]
            {**e, "source_index": e["source_index"] + 300, "target_index": e["target_index"] + 300}
            for e in second["edges"]  # type: ignore[union-attr]
        ],
    }
    report = _import(tmp_path, mixed)
    assert report["skipped"] == 300 and report["imported"] == 400
    _assert_exact(_db(tmp_path))


_CRASH = r"""
import json, os, signal, sys
from datetime import datetime, timezone
from pathlib import Path
sys.path.insert(0, {root!r})
from mnemon.config import Settings
from mnemon.drafts import parse_draft
from mnemon.engine import Engine, bulk
from mnemon.store import counts
from bench.generate import generate_draft

bulk.IMPORT_BATCH, bulk.IMPORT_BATCH_GROWTH = 500, 0  # chunks of 500
where = sys.argv[1]
calls = []
def die(*args):
    calls.append(1)
    if len(calls) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
if where == "counted":  # inside the counted window of the second edge write: trigger dropped, rows in
    real = counts.add_edges
    def add_edges(conn, n):
        real(conn, n)
        die()
    counts.add_edges = add_edges
settings = Settings(data_dir=Path(sys.argv[2]), store="default", embed_endpoint="http://127.0.0.1:9")
with Engine(settings, clock=lambda: datetime(2026, 9, 2, tzinfo=timezone.utc)) as engine:
    engine.import_draft(parse_draft(json.dumps(generate_draft(2000, seed=41))),
                        progress=die if where == "between" else None)
"""


@pytest.mark.parametrize("where", ["between", "counted"])
def test_counts_are_exact_after_a_kill_9_mid_import_then_any_command(tmp_path: Path, where: str) -> None:
    """kill -9 after the second chunk committed (its rows stay; the target index the import
    builds at its end is missing, and the next command's open recreates it), or while the second
    edge write has the trigger dropped and its counter bumped but not committed (all of it rolls
    back)."""
    env = dict(os.environ, MNEMON_SERVER="off")
    proc = subprocess.run(
        [sys.executable, "-c", _CRASH.format(root=str(ROOT)), where, str(tmp_path)],
        capture_output=True, env=env, timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    if where == "between":  # the import deferred the target index: gone, and the schema says so
        from mnemon.store import schema

        conn = apsw.Connection(str(_db(tmp_path)))
        try:
            assert not schema.is_current(conn)
            for name in (schema.EDGE_TARGET_INDEX, *schema.BULK_DEFERRED_INDEXES):
                assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchall()
        finally:
            conn.close()
    status = subprocess.run(
        [sys.executable, "-m", "mnemon", "--data-dir", str(tmp_path), "status"],
        capture_output=True, env=dict(env, MNEMON_EMBED_ENDPOINT="http://127.0.0.1:9"), timeout=120,
    )
    assert status.returncode == 0, status.stderr.decode()
    shown = json.loads(status.stdout)
    conn = apsw.Connection(str(_db(tmp_path)))
    try:
        insights = conn.execute("SELECT COUNT(*) FROM insights").fetchone()[0]
        edge_rows = conn.execute("SELECT COUNT(*) FROM edges").fetchone()[0]
    finally:
        conn.close()
    assert insights == (1000 if where == "between" else 500)  # chunks of 500: what committed stays
    assert shown["total_insights"] == insights and shown["edge_count"] == edge_rows > 0
    _assert_exact(_db(tmp_path))


def _sqlite3_shell(db: Path, sql: str) -> None:
    """Write as a user would, with the sqlite3 shell (no mnemon code, triggers as stored)."""
    proc = subprocess.run(["sqlite3", str(db)], input=sql.encode(), capture_output=True, timeout=60)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr.decode()


def shell_writes(source: int, target: int, deleted: int) -> str:
    """An edge inserted between two insights (by rowid) that have no semantic edge yet, and an
    insight soft-deleted, as forget does."""
    return (
        "PRAGMA foreign_keys = ON;\n"
        "INSERT INTO edges (source_id, target_id, edge_type, weight, metadata, created_at) "
        "SELECT a.id, b.id, 'semantic', 0.7, '{}', '2026-09-03T00:00:00Z' FROM insights a, insights b "
        f"WHERE a.rowid = {source} AND b.rowid = {target};\n"
        f"UPDATE insights SET deleted_at = '2026-09-03T00:00:00Z' WHERE rowid = {deleted};\n"
    )


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="the sqlite3 shell is not installed")
def test_counts_are_exact_after_sqlite3_shell_writes_and_an_import_around_them(tmp_path: Path) -> None:
    _import(tmp_path, generate_draft(500, seed=51))
    db = _db(tmp_path)
    _sqlite3_shell(db, shell_writes(3, 400, 7))
    _assert_exact(db)
    draft = generate_draft(1200, seed=52)
    texts = [item["content"] for item in draft["insights"]]  # type: ignore[index]
    # An explicit edge of the draft between two items of the first chunk: the shell writes its key
    # before the import's finalize does, which must then count it as replaced, not added.
    early = next(e for e in draft["edges"] if max(e["source_index"], e["target_index"]) < 500)  # type: ignore[index]
    quote = lambda text: "'" + text.replace("'", "''") + "'"  # noqa: E731
    calls: list[int] = []

    def between_chunks(done: int, total: int) -> None:
        calls.append(done)
        if len(calls) == 1:  # the shell writes while the import waits between two chunks
            _sqlite3_shell(
                db,
                "INSERT OR REPLACE INTO edges (source_id, target_id, edge_type, weight, metadata, created_at) "
                f"SELECT a.id, b.id, {quote(early['edge_type'])}, 0.2, '{{}}', '2026-09-03T00:00:00Z' "
                f"FROM insights a, insights b WHERE a.content = {quote(texts[early['source_index']])} "
                f"AND b.content = {quote(texts[early['target_index']])};\n"
                + shell_writes(4, 401, 9),
            )

    report = _import(tmp_path, draft, progress=between_chunks)
    assert report["imported"] == 1200 and len(calls) >= 2
    _assert_exact(db)


def test_a_foreign_commit_moves_the_write_mark_and_ours_does_not(tmp_path: Path) -> None:
    """``Store.write_mark``: what tells the import that the sqlite3 shell or the Go program wrote
    between its chunks (they never bump mnemon's generation)."""
    from mnemon.store import Store

    _import(tmp_path, generate_draft(20, seed=61))
    store = Store.open(_db(tmp_path), readonly=False, now="2026-09-02T00:00:00Z")
    try:
        mark = store.write_mark()
        with store.transaction("test") as conn:
            conn.execute("UPDATE insights SET importance = 4 WHERE rowid = 1")
        ours = store.write_mark()
        assert ours[0] == mark[0] + 1 and ours[1] == mark[1]
        other = apsw.Connection(str(_db(tmp_path)))
        other.execute("UPDATE insights SET importance = 5 WHERE rowid = 2")
        other.close()
        theirs = store.write_mark()
        assert theirs[0] == ours[0] and theirs[1] != ours[1]
    finally:
        store.close()


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        _import(Path(scratch), generate_draft(DIGEST_N, seed=DIGEST_SEED))
        import mnemon

        print(store_digest(_db(Path(scratch))), "by", Path(mnemon.__file__).parent)


def test_a_command_between_two_chunks_of_a_large_import_gets_the_target_index_back(tmp_path: Path) -> None:
    """A large import drops the edges' target index until its end; a writable open in between
    (here ``remember`` through another engine) migrates, which recreates it and recounts, and the
    import then finishes with the index kept, the counters exact and its own rows all written."""
    from mnemon.config import Settings
    from mnemon.engine import Engine
    from mnemon.store import schema

    db = _db(tmp_path)
    calls: list[int] = []

    def between_chunks(done: int, total: int) -> None:
        calls.append(done)
        if len(calls) == 1:
            conn = apsw.Connection(str(db))
            try:
                assert not schema.is_current(conn)  # deferred by the import's first chunk
            finally:
                conn.close()
            settings = Settings(data_dir=tmp_path, store="default", embed_endpoint="http://127.0.0.1:9")
            with Engine(settings, clock=lambda: NOW) as other:
                other.remember("a note written while an import runs", no_diff=True)  # type: ignore[attr-defined]
            conn = apsw.Connection(str(db))
            try:
                assert schema.is_current(conn)
            finally:
                conn.close()

    report = _import(tmp_path, generate_draft(1200, seed=61), progress=between_chunks)
    assert report["imported"] == 1200 and len(calls) >= 2
    _assert_exact(db)
    conn = apsw.Connection(str(db))
    try:
        assert conn.execute("SELECT COUNT(*) FROM insights").fetchone()[0] == 1201
    finally:
        conn.close()
