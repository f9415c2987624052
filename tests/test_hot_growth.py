"""The hot index's catch-up costs O(delta): per-row arrays grow in buffers with spare room, the
entity index grows with the entity list, and the write path's scan ranks its candidates without
the whole-store ranks. What must not change: an index caught up row by row holds exactly what a
fresh build holds, array by array, and an array a caller already read never changes under it."""

from __future__ import annotations

from pathlib import Path

import apsw
import numpy as np
from test_hotindex import db_file, fresh_build, same_content

from mnemon.cli.state import GlobalOptions
from mnemon.engine import Engine
from mnemon.engine import hot
from mnemon.engine.hot import HotIndex
from mnemon.engine.scan import ActiveTokens
from mnemon.store import hotindex

PER_ROW = ("importance", "category", "source", "active", "doc_len", "n_plain", "r_ptr", "p_ptr", "e_ptr")
SOURCES = ("user", "agent", "import")
CATEGORIES = ("general", "decision", "fact", "context")


def _write(eng: Engine, i: int) -> str:
    out = eng.remember(
        f"Beacon {i} on Harbour Rock logs fog level {i % 7} for Rust ferries",
        category=CATEGORIES[i % len(CATEGORIES)], importance=1 + i % 5, tags=[f"t{i % 3}"],
        entities=[f"Rock{i % 4}", f"Ferry{i}"] if i % 2 else [], source=SOURCES[i % len(SOURCES)], no_diff=True,
    )  # fmt: skip
    return str(out["id"])


def _caught_up(data_dir: Path, index: HotIndex) -> HotIndex:
    conn = apsw.Connection(str(db_file(data_dir)))
    try:
        return hot.open_index(conn, db_file(data_dir), readonly=True, cached=index)
    finally:
        conn.close()


def _terms(ix: HotIndex, ptr: np.ndarray, values: np.ndarray) -> list[list[str]]:
    vocab = ix.vocab
    return [[vocab[t] for t in values[int(ptr[r]) : int(ptr[r + 1])].tolist()] for r in range(ix.n)]


def _assert_equal_arrays(a: HotIndex, b: HotIndex) -> None:
    """Array by array (term ids compared as the terms they name: a base's vocabulary is sorted,
    the terms a catch-up adds are appended after it)."""
    assert a.n == b.n
    for name in PER_ROW:
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
        assert getattr(a, name).dtype == getattr(b, name).dtype, name
    assert a.ids_list() == b.ids_list()
    assert a.created.tolist() == b.created.tolist()
    assert a.entities == b.entities and a.sources == b.sources
    assert np.array_equal(a.e_ent, b.e_ent)
    assert _terms(a, a.r_ptr, a.r_term) == _terms(b, b.r_ptr, b.r_term)
    assert np.array_equal(a.r_tf, b.r_tf)
    assert _terms(a, a.p_ptr, a.p_term) == _terms(b, b.p_ptr, b.p_term)
    for name in ("id_rank", "created_rank"):
        assert np.array_equal(a.derived(name), b.derived(name)), name
    assert a.known_entities() == b.known_entities()
    assert a.row_of(b.id_at(b.n - 1)) == b.n - 1


def test_an_index_caught_up_row_by_row_equals_a_fresh_build(data_dir: Path) -> None:
    with Engine(GlobalOptions(data_dir=str(data_dir)).settings()) as eng:
        ids = [_write(eng, i) for i in range(12)]
        index = fresh_build(data_dir)
        index.prepare_for_forks(rows=8)  # as the warm server leaves it: derived, with room for 8 rows
        buffers = {name: index._buffers[name][0] for name in PER_ROW}
        for i in range(12, 20):  # within the room: no per-row array is copied
            _write(eng, i)
            index = _caught_up(data_dir, index)
        assert all(index._buffers[name][0] is buffers[name] for name in PER_ROW)
        _assert_equal_arrays(index, fresh_build(data_dir))
        grown = set()
        for i in range(20, 90):  # past the room: regrown geometrically, still equal
            _write(eng, i)
            index = _caught_up(data_dir, index)
            grown.add(id(index._buffers["importance"][0]))
        _assert_equal_arrays(index, fresh_build(data_dir))
        assert len(grown) <= 3  # a few reallocations for 70 rows, not one per row
        assert index._buffers["importance"][0].shape[0] < 2 * index.n + 128
        eng.forget(ids[3])  # a fresh build leaves deleted rows out: compare what both describe
        eng.forget(ids[8])
        _write(eng, 90)
        same_content(_caught_up(data_dir, index), fresh_build(data_dir))


def test_arrays_already_read_never_change_under_a_reader(data_dir: Path) -> None:
    with Engine(GlobalOptions(data_dir=str(data_dir)).settings()) as eng:
        ids = [_write(eng, i) for i in range(6)]
        index = fresh_build(data_dir)
        index.reserve(16)
        held = {name: getattr(index, name) for name in PER_ROW}
        copies = {name: np.array(a, copy=True) for name, a in held.items()}
        base_active = np.array(index.base_active, copy=True)
        before = index.known_entities()  # kept until the rows change: the catch-up below must renew it
        assert "Ferry1" in before
        eng.forget(ids[1])
        _write(eng, 6)
        index = _caught_up(data_dir, index)
        assert not index.active[1] and index.n == 7
        for name, array in held.items():
            assert np.array_equal(array, copies[name]), name  # a deletion copies; an append writes past the end
        assert np.array_equal(index.base_active, base_active)
        assert index.known_entities() == fresh_build(data_dir).known_entities()
        assert "Ferry1" not in index.known_entities() and "Ferry5" in index.known_entities()


def test_the_scan_ranks_candidates_over_base_and_delta_parts_as_a_fresh_build(data_dir: Path) -> None:
    """The write path's scan orders ties by importance, created_at and id read from the candidate
    rows themselves; over an index whose ids sit in several parts it ranks as over a fresh build."""
    with Engine(GlobalOptions(data_dir=str(data_dir)).settings()) as eng:
        for i in range(10):
            _write(eng, i)
        conn = apsw.Connection(str(db_file(data_dir)))
        try:
            with hotindex.read_snapshot(conn):
                index = HotIndex.build(conn, hotindex.fingerprint(conn))
        finally:
            conn.close()
        for i in range(10, 16):
            _write(eng, i)
            index = _caught_up(data_dir, index)
        assert len(index._parts["id_blob"]) > 1
        rows = np.array([0, 3, 11, 15, 9, 12], dtype=np.int64)
        assert index.row_values("id_blob", rows).tolist() == index.id_blob[rows].tolist()
        fresh = ActiveTokens.__new__(ActiveTokens)
        mixed = ActiveTokens.__new__(ActiveTokens)
        fresh._conn = mixed._conn = eng.store.conn
        fresh._index, mixed._index, fresh._rows, mixed._rows = fresh_build(data_dir), index, None, None
        for query in ({"beacon", "fog"}, {"rust", "ferries", "level"}, {"harbour"}):
            assert [(h.row.id, h.score) for h in mixed.keyword(query, 5)] == \
                [(h.row.id, h.score) for h in fresh.keyword(query, 5)]
            assert [(h.row.id, h.score) for h in mixed.similar(query, 0.1, 5)] == \
                [(h.row.id, h.score) for h in fresh.similar(query, 0.1, 5)]
