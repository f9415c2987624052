"""The derived token/edge hot index: persistent, 0600, current by fingerprint, caught up after
writes by other processes or behind its back (a crash between commit and index write), rebuilt
when deleted, identical to a fresh build after catching up, never written under --readonly."""

from __future__ import annotations

import stat
from pathlib import Path

import apsw
import numpy as np
import pytest
from conftest import run_process

from mnemon.cli.state import GlobalOptions
from mnemon.engine.hot import HotIndex
from mnemon.store import hotindex


def db_file(data_dir: Path) -> Path:
    return data_dir / "data" / "default" / "mnemon.db"


def hot_file(data_dir: Path) -> Path:
    return hotindex.index_path(db_file(data_dir))


def ids_of(out: dict) -> set[str]:
    return {r["insight"]["id"] for r in out["results"]}


def fresh_build(data_dir: Path) -> HotIndex:
    conn = apsw.Connection(str(db_file(data_dir)))
    try:
        with hotindex.read_snapshot(conn):
            return HotIndex.build(conn, hotindex.fingerprint(conn))
    finally:
        conn.close()


def same_content(a: HotIndex, b: HotIndex) -> None:
    """Two indexes describe the same active rows, tokens and live edges (row order may differ)."""
    def rows(ix: HotIndex) -> dict[str, tuple]:
        out = {}
        for r in np.flatnonzero(ix.active).tolist():
            lo, hi = int(ix.r_ptr[r]), int(ix.r_ptr[r + 1])
            terms = sorted(zip((ix.vocab[t] for t in ix.r_term[lo:hi]), ix.r_tf[lo:hi].tolist()))
            plo, phi = int(ix.p_ptr[r]), int(ix.p_ptr[r + 1])
            plain = sorted(ix.vocab[t] for t in ix.p_term[plo:phi])
            out[ix.id_at(r)] = (terms, plain, int(ix.doc_len[r]), int(ix.importance[r]), bytes(ix.created[r]))
        return out

    def edges(ix: HotIndex) -> set[tuple]:
        live = ix.active[ix.edge_src] & ix.active[ix.edge_dst]
        return {
            (ix.id_at(int(s)), ix.id_at(int(t)), int(k), float(w), bool(bb))
            for s, t, k, w, bb in zip(ix.edge_src[live], ix.edge_dst[live], ix.edge_type[live],
                                      ix.edge_weight[live], ix.edge_backbone[live])
        }  # fmt: skip

    def derived(ix: HotIndex) -> dict[str, tuple]:
        prev, nxt, sup = ix.derived("prev"), ix.derived("next"), ix.derived("superseded")
        result = {}
        for r in np.flatnonzero(ix.active).tolist():
            nbr, typ, wt, out = ix.incident(r)  # the big CSR's entries, then the delta adjacency's
            entries = sorted(
                (ix.id_at(int(v)), int(k), float(w), bool(o))
                for v, k, w, o in zip(nbr, typ, wt, out) if ix.active[int(v)]
            )  # fmt: skip
            link = [ix.id_at(int(x)) if x >= 0 and ix.active[int(x)] else None for x in (prev[r], nxt[r])]
            result[ix.id_at(r)] = (entries, link, bool(sup[r]))
        return result

    assert rows(a) == rows(b)
    assert edges(a) == edges(b)
    assert derived(a) == derived(b)


def test_index_file_is_private_and_current_after_recall(cli, data_dir: Path) -> None:
    cli.ok("remember", "Hot index sits beside the database")
    cli.ok("recall", "hot index")
    path = hot_file(data_dir)
    assert path.exists() and stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded = hotindex.read_index(db_file(data_dir))
    assert loaded is not None
    conn = apsw.Connection(str(db_file(data_dir)))
    live = hotindex.fingerprint(conn)
    conn.close()
    stamp = hotindex.read_stamp(db_file(data_dir))
    recorded = stamp[1] if stamp and stamp[0] == loaded[0]["build_id"] else hotindex.Fingerprint.from_json(
        loaded[0]["fingerprint"])
    assert recorded == live  # recall's own access bump did not leave it stale


def test_write_by_another_process_is_caught_up(cli, data_dir: Path) -> None:
    cli.ok("remember", "First memory about lighthouses")
    cli.ok("recall", "lighthouses")
    made = run_process(["remember", "Second memory about lighthouses and fog"], data_dir=data_dir)
    assert made.code == 0, made.err
    new_id = made.json()["id"]
    assert new_id in ids_of(cli.ok("recall", "fog", "--verbose"))
    assert [h["id"] for h in cli.ok("search", "fog")] == [new_id]


def test_changes_behind_the_index_back_never_give_a_wrong_answer(cli, data_dir: Path) -> None:
    """A crash after the commit, before the index write: simulated by writing SQL directly."""
    keep = cli.ok("remember", "Walrus colony count rose")["id"]
    gone = cli.ok("remember", "Walrus feeding grounds moved")["id"]
    cli.ok("recall", "walrus")  # index current and persisted
    conn = apsw.Connection(str(db_file(data_dir)))
    conn.execute("UPDATE insights SET deleted_at = '2030-01-01T00:00:00Z' WHERE id = ?", (gone,))
    conn.execute("DELETE FROM edges WHERE source_id = ? OR target_id = ?", (gone, gone))
    conn.execute(
        "INSERT INTO insights (id, content, category, importance, tags, entities, source, created_at, updated_at) "
        "VALUES ('11111111-2222-4333-8444-555555555555', 'Walrus tusks measured', 'fact', 3, '[]', '[]', 'go', "
        "'2030-01-01T00:00:00Z', '2030-01-01T00:00:00Z')"
    )
    conn.close()  # no generation bump: as a Go writer (or a crash) would leave it
    out = cli.ok("recall", "walrus", "--verbose")
    assert ids_of(out) == {keep, "11111111-2222-4333-8444-555555555555"}
    assert {h["id"] for h in cli.ok("search", "walrus")} == ids_of(out)
    cli.ok("recall", "walrus")
    same_content(_cached_index(data_dir), fresh_build(data_dir))


def _cached_index(data_dir: Path) -> HotIndex:
    loaded = hotindex.read_index(db_file(data_dir))
    assert loaded is not None
    index = HotIndex.from_file(*loaded)
    assert index is not None
    return index


def test_deleted_index_files_are_rebuilt(cli, data_dir: Path) -> None:
    a = cli.ok("remember", "Penguins prefer cold water")["id"]
    cli.ok("recall", "penguins")
    hot_file(data_dir).unlink()
    hotindex.stamp_path(db_file(data_dir)).unlink(missing_ok=True)
    assert ids_of(cli.ok("recall", "penguins", "--verbose")) == {a}
    assert hot_file(data_dir).exists()


def test_an_index_built_twice_is_the_same_whatever_the_hash_seed(cli, data_dir: Path) -> None:
    """The plain tokens' order within a row once followed a set's order, which the process's hash
    seed moves: two builds of one store then differed in ``p_term``. Every array must be equal."""
    for text in ("Alice moved the API rate limit to 100 requests per second", "张伟决定周三发布 v2 版本，因为测试已经通过",
                 "The deploy of 《数据之书》 notes failed twice on Friday", "Bob prefers tea; Alice prefers coffee"):
        cli.ok("remember", text, "--tags", "ops,notes", "--entities", "Alice,张伟")
    builds = []
    for seed in ("1", "2"):
        hot_file(data_dir).unlink(missing_ok=True)
        hotindex.stamp_path(db_file(data_dir)).unlink(missing_ok=True)
        result = run_process(["recall", "api limit", "--verbose"], data_dir=data_dir,
                             env={"PYTHONHASHSEED": seed, "MNEMON_SERVER": "off"})
        assert result.code == 0, result.err
        loaded = hotindex.read_index(db_file(data_dir))
        assert loaded is not None
        builds.append(loaded[1])
    first, second = builds
    assert sorted(first) == sorted(second)
    assert [k for k in first if not np.array_equal(first[k], second[k])] == []


def test_garbage_index_file_is_ignored_and_replaced(cli, data_dir: Path) -> None:
    a = cli.ok("remember", "Otters hold hands while sleeping")["id"]
    cli.ok("recall", "otters")
    hot_file(data_dir).write_bytes(b"MNEMHOT1" + b"\xff" * 40)
    assert ids_of(cli.ok("recall", "otters", "--verbose")) == {a}
    assert hotindex.read_index(db_file(data_dir)) is not None


def test_catch_up_equals_a_fresh_build_after_mixed_writes(cli, data_dir: Path) -> None:
    ids = [cli.ok("remember", f"Seal number {i} tagged near Rust harbour", "--source", f"s{i % 2}")["id"]
           for i in range(6)]  # fmt: skip
    cli.ok("recall", "seal")
    cli.ok("forget", ids[2])
    cli.ok("link", ids[0], ids[5], "--type", "causal", "--weight", "0.7")
    cli.ok("link", ids[0], ids[5], "--type", "causal", "--weight", "0.2")  # replaces an edge row in place
    cli.ok("link", ids[1], ids[4], "--type", "supersedes", "--weight", "1.0")
    cli.ok("remember", "A late seal memory", "--source", "s0")
    cli.ok("remember", "Another late seal memory near Rust", "--source", "s1")
    cli.ok("link", ids[3], ids[0], "--type", "supersedes", "--weight", "1.0")
    cli.ok("recall", "seal")
    cached = _cached_index(data_dir)
    same_content(cached, fresh_build(data_dir))
    weights = {(cached.id_at(int(s)), cached.id_at(int(t))): float(w)
               for s, t, w in zip(cached.edge_src, cached.edge_dst, cached.edge_weight)}  # fmt: skip
    assert weights[(ids[0], ids[5])] == 0.2


def test_readonly_builds_in_memory_and_writes_nothing(cli, data_dir: Path) -> None:
    a = cli.ok("remember", "Readonly index lives in memory")["id"]
    before = {p.name for p in db_file(data_dir).parent.iterdir()}
    hot_file(data_dir).unlink(missing_ok=True)
    after_unlink = {p.name for p in db_file(data_dir).parent.iterdir()}
    assert ids_of(cli.ok("--readonly", "recall", "readonly index", "--verbose")) == {a}
    assert {p.name for p in db_file(data_dir).parent.iterdir()} == after_unlink
    assert before >= after_unlink


def test_remember_keeps_an_existing_index_current(cli, data_dir: Path) -> None:
    cli.ok("remember", "Narwhal tusks are teeth")
    cli.ok("recall", "narwhal")
    cli.ok("remember", "Narwhal pods migrate in autumn")
    conn = apsw.Connection(str(db_file(data_dir)))
    live = hotindex.fingerprint(conn)
    conn.close()
    assert _cached_index(data_dir).fp == live  # persisted by remember's after_write, not by a reader


@pytest.mark.parametrize("remove", ["stamp", "none"])
def test_stamp_only_trusted_for_its_own_build(cli, data_dir: Path, remove: str) -> None:
    a = cli.ok("remember", "Puffins nest in burrows")["id"]
    cli.ok("recall", "puffins")
    if remove == "stamp":
        hotindex.stamp_path(db_file(data_dir)).unlink(missing_ok=True)
    else:
        hotindex.write_stamp(db_file(data_dir), "not-this-build", hotindex.Fingerprint(999, 0, 0, 0, ""))
    assert ids_of(cli.ok("recall", "puffins", "--verbose")) == {a}


def test_engine_scan_matches_plain_token_scan(data_dir: Path) -> None:
    """The write-path scan over the index ranks exactly like re-tokenising every row (§4.2, §4.7)."""
    from mnemon.engine import Engine
    from mnemon.engine.scan import ActiveTokens
    from mnemon.store import insights
    from mnemon.text import content_similarity, insight_tokens, keyword_score, tokenize

    texts = ["alpha beta gamma", "alpha beta", "beta delta", "gamma gamma epsilon", "alpha", "zeta eta theta"]
    with Engine(GlobalOptions(data_dir=str(data_dir)).settings()) as eng:
        for i, t in enumerate(texts):
            eng.remember(t, no_diff=True, importance=1 + i % 5, tags=["beta"] if i == 5 else [])
        scan = ActiveTokens(eng.store.conn)
        rows = insights.all_active(eng.store.conn)
        for query in ("alpha beta", "gamma", "beta zeta", "nothing here"):
            q = tokenize(query)
            expect = sorted(
                ((keyword_score(q, insight_tokens(r.content, r.tags, r.entities)), r) for r in rows),
                key=lambda p: (-p[0], -p[1].importance, _neg(p[1].created_at), p[1].id),
            )
            expect = [(r.id, s) for s, r in expect if s > 0][:5]
            assert [(h.row.id, h.score) for h in scan.keyword(q, 5)] == expect
            sim = sorted(
                ((content_similarity(q, insight_tokens(r.content, r.tags, r.entities)), r) for r in rows),
                key=lambda p: (-p[0], -p[1].importance, _neg(p[1].created_at), p[1].id),
            )
            sim = [(r.id, s) for s, r in sim if s >= 0.1 and s > 0][:5]
            assert [(h.row.id, h.score) for h in scan.similar(q, 0.1, 5)] == sim


def _neg(text: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in text)


def test_new_ids_find_their_rank_by_bisection_as_by_a_sorted_copy() -> None:
    from mnemon.engine.hot import _FEW_BISECTIONS, _sorted_positions

    rng = np.random.default_rng(5)
    values = np.array([f"{x:08x}" for x in rng.integers(0, 1 << 20, 3000)], dtype="S8")
    order = np.argsort(values, kind="stable")
    for k in (1, 7, _FEW_BISECTIONS + 50):  # bisected in place, and through the sorted copy
        wanted = np.sort(np.concatenate([values[rng.integers(0, 3000, k // 2)],
                                         np.array([f"{x:08x}" for x in rng.integers(0, 1 << 20, k - k // 2)], dtype="S8")]))
        np.testing.assert_array_equal(_sorted_positions(values, order, wanted), np.searchsorted(values[order], wanted))


def test_terms_are_found_in_the_mapped_vocabulary_bytes_as_in_a_list() -> None:
    from mnemon.engine.hot import _SortedTerms

    terms = sorted({"alpha", "beta", "zeta", "é", "中文", "記憶", "a", "ab", "abc", "b\u00e9", "😀"})
    mapped = _SortedTerms(np.frombuffer("\n".join(terms).encode("utf-8"), dtype=np.uint8))
    assert len(mapped) == len(terms) and mapped.tolist() == terms
    for i, term in enumerate(terms):
        assert mapped.find(term) == i
    for absent in ("", "aa", "zz", "中", "\ud800", "alphab"):
        assert mapped.find(absent) is None
    assert len(_SortedTerms(np.zeros(0, dtype=np.uint8))) == 0


def test_the_mapped_vocabulary_remembers_its_answers_up_to_a_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    from mnemon.engine.hot import _SortedTerms, vocabulary

    monkeypatch.setattr(vocabulary, "FOUND_MAX", 3)
    terms = [f"t{k:03d}" for k in range(50)]
    mapped = _SortedTerms(np.frombuffer("\n".join(terms).encode("utf-8"), dtype=np.uint8))
    for _ in range(3):  # asked again, from the memory or after it was forgotten: the same answers
        for i, term in enumerate(terms):
            assert mapped.find(term) == i
            assert mapped.find(term + "x") is None
            assert len(mapped._found) <= 3


@pytest.mark.parametrize("collide", [False, True])
def test_rows_of_many_ids_by_hash_equals_the_id_lookup(cli, data_dir: Path, monkeypatch, collide: bool) -> None:
    # rows_of hashes every row's id once for large batches (a vector index in another row order);
    # the answer must be the plain id -> row mapping, -1 for unknown ids, whatever the hashes do.
    import mnemon.engine.hot.rowids as hot  # where rows_of reads its threshold and hash

    for i in range(40):
        cli.ok("remember", f"rows_of probe number {i} about topic {i % 7}", "--no-diff")
    index = fresh_build(data_dir)
    truth = {index.id_at(r): r for r in range(index.n)}
    monkeypatch.setattr(hot, "_HASHED_LOOKUP_MIN_IDS", 1)
    if collide:  # every id shares its hash with about a third of the others
        real = hot._id_hashes
        monkeypatch.setattr(hot, "_id_hashes", lambda ids: real(ids) % np.uint64(3))
    rng = np.random.default_rng(3)
    known = list(truth)
    asked = [known[k] for k in rng.permutation(len(known))] + ["not-an-id", "", known[0][:-1], known[0] + "x"]
    as_bytes = np.array([a.encode() for a in asked])
    want = [truth.get(a, -1) for a in asked]
    for ids in (as_bytes, np.array(asked)):  # bytes (a vector index's ids) or str
        assert index.rows_of(ids).tolist() == want
    monkeypatch.setattr(hot, "_HASHED_LOOKUP_MIN_IDS", 10**9)  # the bisection path agrees
    assert index.rows_of(as_bytes).tolist() == want


@pytest.mark.parametrize("stale", [1, 2, 3])
def test_an_index_of_a_previous_format_is_rebuilt_not_read(cli, data_dir: Path, stale: int) -> None:
    # Format 1 held no single Han characters among a row's terms: read as current, "限" would miss.
    # Format 2 held the light stemmer's terms ("adoption" for "adoption", Porter2's "adopt"); format 3 no
    # camel-case identifier's words ("router" of "OrderRouter").
    a = cli.ok("remember", "API 限流为每秒一百个请求", "--no-diff")["id"]
    b = cli.ok("remember", "Caroline looked into the adoption agencies", "--no-diff")["id"]
    cli.ok("remember", "Switched OrderRouter to async retries", "--no-diff")
    cli.ok("recall", "限流")
    header, arrays = hotindex.read_index(db_file(data_dir))
    from mnemon.engine.hot import FORMAT_VERSION

    assert header["version"] == FORMAT_VERSION == 4
    index = _cached_index(data_dir)
    assert "限" in set(index.vocab)
    assert {"adopt", "router"} <= set(index.vocab)
    # the same file stamped as an older format: a reader must rebuild it, whatever it holds
    hotindex.write_index(db_file(data_dir), {**header, "version": stale}, dict(arrays))
    assert hotindex.read_index(db_file(data_dir))[0]["version"] == stale
    assert a in ids_of(cli.ok("recall", "限", "--verbose"))
    assert hotindex.read_index(db_file(data_dir))[0]["version"] == FORMAT_VERSION
    assert {"adopt", "router"} <= set(_cached_index(data_dir).vocab)
    assert b in ids_of(cli.ok("recall", "who adopted", "--verbose"))
    same_content(_cached_index(data_dir), fresh_build(data_dir))


@pytest.mark.parametrize(
    "raw", ['["a","b"]', ' ["a"] ', '[1,"x"]', "", None, "{}", "[", '"x"', '["a"] x', 5, b'["a"]', "[NaN]", "[]", '["é", ""]']
)
def test_tags_and_entities_read_by_the_c_scanner_are_those_json_loads_gives(raw: object) -> None:
    import json

    from mnemon.engine.hot.catchup import _loads

    try:
        value = json.loads(str(raw)) if raw else []
    except ValueError:
        value = []
    assert _loads(raw) == ([str(v) for v in value] if isinstance(value, list) else [])
