"""The int8 first pass of a large store's vector scan (issue 13): the bound holds on hostile
vectors, recall through the codes equals recall through the exact scan bit for bit, and old
(version-1) vector indexes gain their codes in place, never under --readonly."""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

import kernels
from kernels import quantized
from mnemon.config import Settings
from mnemon.drafts import parse_draft
from mnemon.embed.fake import HashEmbedder
from mnemon.engine import Engine
from mnemon.engine import vectors as engine_vectors
from mnemon.engine import write
from mnemon import recall as recall_pipeline
from mnemon.store import vectors as vector_store

NOW = datetime(2026, 9, 2, 12, 0, 0, tzinfo=timezone.utc)
DIM = 48
WORDS = [f"w{k}" for k in range(30)]


def _hostile(rng: np.random.Generator, d: int) -> np.ndarray:
    """Rows that stress the coding: one-hot, constant, huge and tiny scales, a spike, zeros,
    negated and duplicated rows, and plain Gaussian ones."""
    rows = [np.eye(d)[3], np.full(d, 0.5), rng.standard_normal(d) * 1e6, rng.standard_normal(d) * 1e-6,
            np.zeros(d), np.r_[100.0, rng.standard_normal(d - 1) * 1e-3]]  # fmt: skip
    gauss = rng.standard_normal((200, d))
    rows += [gauss[0], -gauss[0], gauss[1], gauss[1]]
    return np.ascontiguousarray(np.vstack([np.array(rows), gauss]), dtype=np.float64)


@pytest.mark.parametrize("d", [7, 48, 768, 3072])
def test_the_coded_cosine_is_within_its_slack_of_the_exact_one(d: int) -> None:
    rng = np.random.default_rng(d)
    vectors = _hostile(rng, d)
    norms = np.sqrt(np.einsum("ij,ij->i", vectors, vectors))
    codes, mult, resid = vector_store.quantize(vectors)
    for query in (rng.standard_normal(d), vectors[2].copy(), np.eye(d)[3] * 1e-9, -vectors[6]):
        coded = quantized.code_query(query)
        assert coded is not None
        q, scale, error = coded
        dots = quantized.code_dots(codes, q)
        assert np.array_equal(dots, quantized.code_dots_numpy(codes, q))  # exact integers on both paths
        approx = quantized.approx_cosines(dots, mult, scale)
        exact = kernels.cosine_scores(vectors, norms, query)
        slack = quantized.slack(resid, mult, error)
        assert np.all(np.abs(approx - exact) <= slack)
        assert approx[4] == exact[4] == 0.0 and slack[4] == 0.0  # a zero row is exactly 0
        rows = np.arange(len(vectors), dtype=np.int64)[::-1].copy()
        assert np.array_equal(quantized.cosine_rows(vectors, norms, query, rows), exact[rows])
    assert quantized.code_query(np.zeros(d)) is None


def test_query_codes_that_could_overflow_int32_are_refused() -> None:
    d = 3072
    codes = np.full((2, d), 127, dtype=np.int8)
    top = quantized.query_code_max(d)
    assert 127 * top * d <= 2**31 - 1
    q = np.full(d, top, dtype=np.int16)
    assert int(quantized.code_dots(codes, q)[0]) == 127 * top * d  # the largest sum still fits
    with pytest.raises(ValueError, match="overflow"):
        quantized.code_dots(codes, np.full(d, top + 1, dtype=np.int16))


def test_coding_a_row_does_not_depend_on_its_block() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((40_000, 8))
    whole = vector_store.quantize(vectors)
    part = vector_store.quantize(vectors[16_000:16_010])
    for a, b in zip(whole, part, strict=True):
        assert np.array_equal(a[16_000:16_010], b)


# --- recall through the codes equals recall through the exact scan ------------------------------


def _texts(n: int, seed: int = 9) -> list[str]:
    """Word bags from a small vocabulary: many similar vectors near every cut, and exact duplicates."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        if k % 17 == 5 and out:
            out.append(out[-3] if len(out) > 3 else out[-1])  # a duplicate vector (text repeated)
            continue
        out.append(" ".join(rng.sample(WORDS, rng.randint(3, 7))) + f" item{k % 50}")
    return out


def _settings(data_dir: Path, *, readonly: bool = False) -> Settings:
    return Settings(data_dir=data_dir, store="default", readonly=readonly, embed_endpoint="http://127.0.0.1:9",
                    max_insights=0, auto_prune_min_age=0.0)  # fmt: skip


def _engine(data_dir: Path, *, readonly: bool = False) -> Engine:
    return Engine(_settings(data_dir, readonly=readonly), clock=lambda: NOW, embedder=HashEmbedder(dim=DIM))


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("coded")
    texts = _texts(1200)
    items = [
        {"content": t, "source": ("user", "agent")[k % 2], "created_at": f"2026-05-01T{k // 3600:02d}:{k // 60 % 60:02d}:{k % 60:02d}Z"}
        for k, t in enumerate(texts)
    ]  # fmt: skip
    draft = json.dumps({"schema_version": "1", "insights": items})
    with _engine(data_dir) as engine:
        engine.import_draft(parse_draft(draft), no_diff=True)
        hot = engine.hot_index()
        ids = [hot.id_at(r) for r in range(hot.n)]
        engine.forget(ids[10])
        engine.embed_one(ids[20])  # a re-embedded row: its vector row moves to the end
        engine.remember("w1 w2 w3 fresh after the import", no_diff=True)
    return data_dir


QUERIES = ["w1 w2 w3", "w4 w5 item7", "why w9 w10", "when w11", "w12 w13 w14 w15 item3", "w20", "how w21 w22",
           "what w0 w1 item0", "unrelated words entirely"]  # fmt: skip


def _paths(monkeypatch: pytest.MonkeyPatch, coded: bool, numba: bool) -> None:
    """Choose the coded or the exact scan, on numba or on numpy (each coded path's exact cosines
    are its own exact scan's: the numba row kernel, or numpy's einsum)."""
    monkeypatch.setattr(engine_vectors, "CODED_MIN_ROWS", 0 if coded else 10**12)
    if numba:
        kernels.warmup()
    monkeypatch.setattr(engine_vectors, "NUMBA_COLD_MIN_ROWS", 0 if numba else 10**12)
    monkeypatch.setattr(engine_vectors, "NUMBA_WARM_MIN_ROWS", 0 if numba else 10**12)
    monkeypatch.setattr(recall_pipeline, "use_numba", lambda n_rows: numba)  # the beam's path too


def _recalls(data_dir: Path, monkeypatch: pytest.MonkeyPatch, coded: bool, numba: bool) -> list[object]:
    _paths(monkeypatch, coded, numba)
    out: list[object] = []
    with _engine(data_dir, readonly=True) as engine:
        for query in QUERIES:
            for limit, category in ((10, ""), (20, ""), (5, "general")):
                result = engine.recall(query, limit=limit, category=category)
                out.append([(h.insight.id, h.score, h.via, h.signals, h.superseded) for h in result.hits])
                out.append((result.intent, result.anchor_count, result.traversed, result.hint))
    return out


@pytest.mark.parametrize("numba", [True, False], ids=["numba", "numpy"])
def test_recall_through_the_codes_equals_the_exact_scan(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch, numba: bool
) -> None:
    refined: list[int] = []
    original = engine_vectors.SimilarityBounds.refine

    def counting(self: engine_vectors.SimilarityBounds, values: np.ndarray, rows: np.ndarray) -> None:
        refined.append(int(np.count_nonzero(self.slack[np.unique(np.asarray(rows, dtype=np.int64))] > 0)))
        original(self, values, rows)

    monkeypatch.setattr(engine_vectors.SimilarityBounds, "refine", counting)
    in_search: list[bool] = []  # whether the numba beam made rows exact itself, as it read them
    original_read = engine_vectors.SimilarityBounds.exact_read

    def recording(self: engine_vectors.SimilarityBounds) -> object:
        read = original_read(self)
        in_search.append(read is not None)
        return read

    monkeypatch.setattr(engine_vectors.SimilarityBounds, "exact_read", recording)
    coded = _recalls(store_dir, monkeypatch, coded=True, numba=numba)
    assert refined, "the coded path was not taken"
    assert all(in_search) and len(in_search) == (len(QUERIES) * 3 if numba else 0)
    exact = _recalls(store_dir, monkeypatch, coded=False, numba=numba)
    assert coded == exact
    # the bound prunes: a recall made far fewer rows exact than the store holds
    per_recall = sum(refined) / (len(QUERIES) * 3)
    assert per_recall < 1200 / 2


def test_a_version_1_index_gains_its_codes_in_place(store_dir: Path, tmp_path: Path) -> None:
    import shutil

    data_dir = tmp_path / "v1"
    shutil.copytree(store_dir, data_dir)
    folder = data_dir / "data" / "default" / "mnemon.db.index"
    header_path = folder / "vec.json"
    header = json.loads(header_path.read_text())
    assert header["version"] == vector_store.INDEX_VERSION == 2
    for name in ("vec.q8", "vec.qmult", "vec.qresid"):
        (folder / name).unlink()
    header_path.write_text(json.dumps({**header, "version": 1}))
    before = sorted(p.name for p in folder.iterdir())
    with _engine(data_dir, readonly=True) as engine:  # --readonly: used without codes, nothing created
        index = engine.vector_index()
        assert index is not None and not index.coded and index.rows == header["rows"]
    assert sorted(p.name for p in folder.iterdir()) == before
    with _engine(data_dir) as engine:
        index = engine.vector_index()
        assert index is not None and index.coded and index.rows == header["rows"]
        codes, mult, resid = vector_store.quantize(np.asarray(index.vectors))
        assert np.array_equal(index.codes, codes) and np.array_equal(index.qmult, mult)
        assert np.array_equal(index.qresid, resid)
    assert json.loads(header_path.read_text())["version"] == 2
    inode = (folder / "vec").stat().st_ino
    with _engine(data_dir) as engine:  # the upgraded files are mapped as they are
        assert engine.vector_index().coded  # type: ignore[union-attr]
    assert (folder / "vec").stat().st_ino == inode


@pytest.mark.parametrize("numba", [True, False], ids=["numba", "numpy"])
def test_vector_search_through_the_codes_equals_the_exact_scan(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch, numba: bool
) -> None:
    """search, remember's semantic edges and the diff's neighbours: same hits, ties by id."""
    emb = HashEmbedder(dim=DIM)
    texts = _texts(1200)
    queries = [emb.embed(t) for t in (texts[2], texts[5], "w1 w2 w3", "w7 item9 w8")]  # texts[2] has duplicates
    results = {}
    for coded in (True, False):
        _paths(monkeypatch, coded, numba)
        with _engine(store_dir, readonly=True) as engine:
            results[coded] = [
                engine.vector_search(q, k, floor, exclude)
                for q in queries for k in (1, 3, 5, 20) for floor in (-np.inf, 0.4, 0.8)
                for exclude in (None, engine.vector_search(q, 1)[0][0])
            ]  # fmt: skip
    assert results[True] == results[False]
    assert any(len(hits) > 1 and hits[0][1] == hits[1][1] for hits in results[True])  # real ties were cut


def test_the_hot_row_hint_saves_lookups_and_is_never_trusted(store_dir: Path, tmp_path: Path, monkeypatch) -> None:
    """After the rows drifted apart (a re-embed, a forget), the positions found by id are kept as a
    hint; the next process matches every row from it; a garbage hint still gives exact results."""
    import shutil

    data_dir = tmp_path / "hint"
    shutil.copytree(store_dir, data_dir)
    hint_path = data_dir / "data" / "default" / "mnemon.db.index" / "vec.hotrows"
    hint_path.unlink(missing_ok=True)
    with _engine(data_dir) as engine:  # 40 re-embedded rows: their vector rows moved to the end
        hot = engine.hot_index()
        for r in range(100, 140):
            engine.embed_one(hot.id_at(r))
    monkeypatch.setattr(engine_vectors, "HINT_MIN_MISSES", 8)
    monkeypatch.setattr(engine_vectors, "TAIL_MAX_MISSES", 0)  # first: every miss through rows_of
    tail_looked_up: list[int] = []
    tail_lookup = engine_vectors._tail_lookup

    def counting_tail(row_ids: np.ndarray, wanted: np.ndarray, n: int) -> np.ndarray:
        tail_looked_up.append(len(wanted))
        return tail_lookup(row_ids, wanted, n)

    monkeypatch.setattr(engine_vectors, "_tail_lookup", counting_tail)
    query = HashEmbedder(dim=DIM).embed("w1 w2 w3")
    looked_up: list[int] = []

    def scores(writable: bool = True) -> list[float]:
        with _engine(data_dir, readonly=not writable) as engine:
            hot = engine.hot_index()
            original = hot.rows_of

            def counting(ids: np.ndarray) -> np.ndarray:
                looked_up.append(len(ids))
                return original(ids)

            return engine.vector_scores_aligned(query, hot.id_blob[: hot.n], counting).tolist()

    with _engine(data_dir) as engine:  # the reference: every id looked up in a dict
        hot = engine.hot_index()
        by_id = dict(zip(*(a.tolist() for a in engine.vector_scores(query))))
        want = [by_id.get(hot.id_at(r), 0.0) for r in range(hot.n)]
    assert scores() == want and looked_up and looked_up[-1] >= 40
    assert hint_path.exists()
    looked_up.clear()
    assert scores() == want and looked_up == []  # every row matched through the hint
    # rows written since the hint, one of them without a vector (the embedder was away): the
    # newest rows are found by the tail look-up, still without the whole-index look-up
    with _engine(data_dir) as engine:
        engine.remember("w5 w6 w7 written after the hint", no_diff=True)
    with Engine(_settings(data_dir), clock=lambda: NOW) as engine:  # no embedder: no vector
        assert engine.remember("w8 w9 stored without a vector", no_diff=True)["embedded"] is False
    with _engine(data_dir) as engine:
        engine.remember("w10 w11 after the gap", no_diff=True)
        hot = engine.hot_index()
        by_id = dict(zip(*(a.tolist() for a in engine.vector_scores(query))))
        want = [by_id.get(hot.id_at(r), 0.0) for r in range(hot.n)]
    monkeypatch.setattr(engine_vectors, "TAIL_MAX_MISSES", 2048)
    looked_up.clear()
    assert scores() == want and looked_up == [] and 1 <= sum(tail_looked_up) <= 2  # only the new rows
    rng = np.random.default_rng(5)
    hint_path.write_bytes(rng.integers(-5, 5000, 900, dtype="<i8").tobytes())  # garbage, too short
    looked_up.clear()
    tail_looked_up.clear()
    assert scores(writable=False) == want and sum(looked_up) + sum(tail_looked_up) > 900  # the misses looked up
    hint_path.write_bytes(b"torn")
    assert scores(writable=False) == want


class _CountingIds:
    """The hot index's ids as the alignment reads them, counting the rows it gathers to compare."""

    def __init__(self, ids: np.ndarray) -> None:
        self.ids, self.gathered = ids, 0

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        self.gathered += len(rows)
        return self.ids[rows]


def test_a_certified_hint_skips_the_id_comparison_only_for_the_builds_it_names(
    store_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    """A hint written after every row was checked carries a certificate of the vector index's and the
    hot base's build ids: the next process compares no id of the rows it covers, and compares them all
    again when either build is another one, when the file is damaged, or for rows written since."""
    import shutil

    data_dir = tmp_path / "cert"
    shutil.copytree(store_dir, data_dir)
    folder = data_dir / "data" / "default" / "mnemon.db.index"
    (folder / "vec.hotrows").unlink(missing_ok=True)
    with _engine(data_dir) as engine:  # re-embedded rows: the two row orders drift apart
        hot = engine.hot_index()
        for r in range(100, 140):
            engine.embed_one(hot.id_at(r))
    monkeypatch.setattr(engine_vectors, "CERTIFY_MIN_CHECKED", 8)
    query = HashEmbedder(dim=DIM).embed("w1 w2 w3")

    def scores(hot_base: object = "own", writable: bool = True) -> tuple[list[float], int]:
        """The cosines by hot row, and how many ids were compared beyond the hot delta's rows
        (a row of the delta is always compared: its position is not fixed by the base's build)."""
        with _engine(data_dir, readonly=not writable) as engine:
            hot = engine.hot_index()
            ids = _CountingIds(hot.id_blob[: hot.n])
            base = (hot.build_id, hot.base_n) if hot_base == "own" else hot_base
            out = engine.vector_scores_aligned(query, ids, hot.rows_of, hot_base=base)  # type: ignore[arg-type]
            return out.tolist(), ids.gathered - (hot.n - hot.base_n)

    def reference() -> list[float]:
        with _engine(data_dir) as engine:
            hot = engine.hot_index()
            by_id = dict(zip(*(a.tolist() for a in engine.vector_scores(query))))
            return [by_id.get(hot.id_at(r), 0.0) for r in range(hot.n)]

    want = reference()
    got, gathered = scores()  # checks every row, finds the moved ones, writes a certified hint
    assert got == want and gathered > 0
    with _engine(data_dir) as engine:
        index = engine.vector_index()
        hot = engine.hot_index()
        cert = vector_store.read_hint_certificate(index)
        assert cert == vector_store.HintCertificate(hot.build_id, hot.base_n, index.header.build_id, index.rows)
        assert (folder / "vec.hotrows").stat().st_size == 8 * (index.rows + 6)
    assert scores() == (want, 0)  # every row vouched for: not one id gathered
    got, gathered = scores(("0123456789abcdef", 1 << 20))  # another hot base: every row checked again
    assert got == want and gathered > 100
    assert scores()[1] > 100  # (that call certified its own base) and back: checked, certified again
    assert scores()[1] == 0
    with _engine(data_dir) as engine:  # a row written since: only it is compared
        engine.remember("w5 w6 w7 written after the certificate", no_diff=True)
    want = reference()
    got, gathered = scores(writable=False)
    assert got == want and gathered <= 1  # the new row sits in the delta; nothing else compared
    raw = bytearray((folder / "vec.hotrows").read_bytes())
    raw[8] ^= 0x01  # one bit of a hot row flipped: the CRC no longer holds, nothing is vouched for
    (folder / "vec.hotrows").write_bytes(bytes(raw))
    got, gathered = scores(writable=False)
    assert got == want and gathered > 100
    # a rebuilt vector index is another build: the old certificate names rows it no longer holds
    scores()  # certify again first
    assert scores(writable=False)[1] == 0
    header = json.loads((folder / "vec.json").read_text())
    for suffix in ("", ".json", ".ids", ".norms", ".rowids", ".active", ".q8", ".qmult", ".qresid"):
        (folder / f"vec{suffix}").unlink()
    got, gathered = scores(writable=True)
    assert got == want and gathered > 100
    with _engine(data_dir) as engine:
        assert engine.vector_index().header.build_id not in ("", header["build_id"])


def test_a_vector_header_field_from_a_later_version_is_ignored_not_a_rebuild(store_dir: Path, tmp_path: Path) -> None:
    """An index written before ``build_id`` existed gets one (no rebuild); an unknown field is ignored."""
    import shutil

    data_dir = tmp_path / "fields"
    shutil.copytree(store_dir, data_dir)
    path = data_dir / "data" / "default" / "mnemon.db.index" / "vec.json"
    with _engine(data_dir) as engine:
        engine.vector_index()
    header = json.loads(path.read_text())
    inode = path.with_name("vec.ids").stat().st_ino
    header.pop("build_id")
    header["a_later_field"] = [1, 2]
    path.write_text(json.dumps(header))
    with _engine(data_dir) as engine:
        index = engine.vector_index()
        assert index.rows == header["rows"] and len(index.header.build_id) == 16
    assert path.with_name("vec.ids").stat().st_ino == inode
    after = json.loads(path.read_text())
    assert after["build_id"] == index.header.build_id and "a_later_field" not in after
    with _engine(data_dir, readonly=True) as engine:  # --readonly names nothing and writes nothing
        assert engine.vector_index().header.build_id == after["build_id"]


@pytest.mark.parametrize("numba", [True, False], ids=["numba", "numpy"])
def test_remember_through_the_codes_equals_the_exact_scan(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, numba: bool
) -> None:
    """remember's two scans with one vector (semantic edges in the transaction, candidates after,
    the second reusing the first's int8 products for all but the new row): same as exact."""
    import shutil

    outputs = {}
    for coded in (True, False):
        data_dir = tmp_path / f"r{coded}"
        shutil.copytree(store_dir, data_dir)
        _paths(monkeypatch, coded, numba)
        counter = iter(range(10**6))
        monkeypatch.setattr(write, "new_id", lambda _c=counter: f"00000000-0000-4000-8000-{next(_c):012d}")
        scanned: list[int] = []
        for name in ("code_dots", "code_dots_numpy"):
            def counting(codes, q, *args, _f=getattr(quantized, name), _s=scanned, **kw):  # type: ignore[no-untyped-def]
                _s.append(codes.shape[0])
                return _f(codes, q, *args, **kw)

            monkeypatch.setattr(quantized, name, counting)
        with _engine(data_dir) as engine:
            got = []
            for text in ("w1 w2 w3 w4 item3", "w1 w2 w3 w4 item3", "w9 w8 w7 item9", "w4 w3 w2 w1 item3"):
                out = engine.remember(text)
                got.append((out["diff_suggestion"], out.get("edges_created"), out.get("semantic_candidates")))
            outputs[coded] = got
        if coded:  # a full scan per new vector; the scan after its commit covers the new row only
            assert scanned and min(scanned) == 1 and max(scanned) >= 1200
    assert outputs[True] == outputs[False]
    assert any(cands for _, _, cands in outputs[True])


def test_the_threaded_numpy_scan_sums_the_same_integers(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(12)
    codes = rng.integers(-127, 128, (10_007, 96), dtype=np.int8)
    q = rng.integers(-3000, 3000, 96).astype(np.int16)
    want = codes.astype(np.int64) @ q.astype(np.int64)
    monkeypatch.setattr(quantized, "PARALLEL_MIN_ROWS", 1000)  # ten row blocks on four threads at most
    for threads in (1, 2, 3, 8):
        assert np.array_equal(quantized.code_dots_numpy(codes, q, threads), want)
    assert np.array_equal(quantized.code_dots(codes, q), want)
