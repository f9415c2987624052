"""Neighbour terms (records.TERM_NEIGHBOURS): with a model whose word cosines were measured, an ordinary
query's words bring in the store's words its model puts near them, as BM25 terms at a weight; the word
vectors live in ``<db>.index/words``, derived from the database and the model (engine.wordvectors)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from mnemon import neighbours, thesaurus
from mnemon.config import Settings
from mnemon.drafts import parse_draft
from mnemon.embed.fake import HashEmbedder, tokens
from mnemon.engine import Engine, wordvectors
from mnemon.records import TERM_NEIGHBOUR_WEIGHT, similarity_scale
from mnemon.sortedtable import SortedTable
from mnemon.store import wordvectors as word_store
from mnemon.text import vocabulary_words

NOW = datetime(2026, 12, 7, 12, 0, 0, tzinfo=timezone.utc)
# words the embedder below gives one vector: a question's word and the memory's word for the same thing
ALIASES = {"pets": "turtles", "pet": "turtles"}


class AliasEmbedder(HashEmbedder):
    """HashEmbedder named as a model (MiniLM by default, whose word cosines were measured), reading a word of
    ALIASES as the word it stands for: "pets" and "turtles" get one vector, every other pair of words
    near-orthogonal ones (dimension 1024)."""

    def __init__(self, model: str = "all-MiniLM-L6-v2") -> None:
        super().__init__(dim=1024, model=model)
        self.batches: list[list[str]] = []

    def embed(self, text: str) -> np.ndarray:
        return super().embed(" ".join(ALIASES.get(t, t) for t in tokens(text)) or text)

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return np.array([self.embed(t) for t in texts])


TURTLES = "Two turtles live in a tank by the window and eat lettuce every morning."
OTHERS = [f"Joanna wrote chapter {k} of her screenplay about a road trip through town number {k}." for k in range(30)]


def _engine(data_dir: Path, model: str = "all-MiniLM-L6-v2", readonly: bool = False) -> Engine:
    settings = Settings(data_dir=data_dir, store="default", embed_endpoint="http://127.0.0.1:9", readonly=readonly)
    return Engine(settings, clock=lambda: NOW, embedder=AliasEmbedder(model))


def _fill(data_dir: Path, model: str = "all-MiniLM-L6-v2") -> None:
    items = [{"content": t, "created_at": f"2026-11-{1 + k % 28:02d}T00:00:00Z"} for k, t in enumerate(OTHERS + [TURTLES])]
    with _engine(data_dir, model) as engine:
        engine.import_draft(parse_draft(json.dumps({"schema_version": "1", "insights": items})), no_diff=True)


def _keyword_of(data_dir: Path, query: str, content: str, model: str = "all-MiniLM-L6-v2", **kw: bool) -> float:
    with _engine(data_dir, model, **kw) as engine:
        hits = engine.recall(query, limit=40).hits
    found = [h for h in hits if h.insight.content == content]
    return found[0].signals["keyword"] if found else 0.0


def _words_file(data_dir: Path) -> Path:
    return word_store.words_path(data_dir / "data" / "default" / "mnemon.db")


# --- the policy ----------------------------------------------------------------------------------------


def test_choose_takes_the_closest_words_at_or_above_the_floor() -> None:
    cosines = np.array([
        [0.9, 0.5, 0.49, 0.7, 0.7, 0.95, 0.8],  # query word 0, stem "pet"
        [0.6, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],  # query word 1, stem "anim"
    ])  # fmt: skip
    vocabulary = ["turtl", "fish", "rock", "dog", "cat", "pet", "rare"]
    chosen = neighbours.choose(
        ["pet", "anim"], cosines, vocabulary, floor=0.5, per_word=3, weight=0.8, skip={"rare"},
        usable=lambda stem: stem != "fish",
    )  # fmt: skip
    # word 0: its own stem (0.95) and a skipped term (0.8) take no place; turtl 0.9, then dog and cat at 0.7
    # (equal cosines: the word the store wrote first); fish is not usable; rock is below the floor
    assert chosen == pytest.approx({"turtl": 0.8 * 0.8, "dog": 0.8 * 0.4, "cat": 0.8 * 0.4})
    # a stem found for two query words keeps its largest weight
    cosines[1, 3] = 0.9
    again = neighbours.choose(["pet", "anim"], cosines, vocabulary, floor=0.5, per_word=3, weight=0.8,
                              skip={"rare"}, usable=lambda stem: stem != "fish")  # fmt: skip
    assert again["dog"] == pytest.approx(0.8 * 0.8)


def test_vocabulary_words_are_the_ascii_words_of_three_letters_or_more() -> None:
    assert vocabulary_words("What pets does Nate have? Dairy-free, it's Nate's; 42 猫 ox") == [
        "pets", "nate", "dairy-free", "it's", "nate's",
    ]  # fmt: skip


def test_only_a_measured_model_reads_neighbour_terms() -> None:
    assert similarity_scale("all-MiniLM-L6-v2").term_floor == 0.5
    assert similarity_scale("sentence-transformers/all-MiniLM-L6-v2").term_floor == 0.5
    assert similarity_scale("multilingual-e5-small").term_floor == 0.0  # its word cosines bunch high: not measured
    assert similarity_scale("nomic-embed-text").term_floor == 0.0


# --- recall ---------------------------------------------------------------------------------------------


def test_a_question_finds_the_memory_that_names_its_word_otherwise(tmp_path: Path) -> None:
    _fill(tmp_path)
    with _engine(tmp_path) as engine:
        hits = engine.recall("Which pets do we keep?", limit=5).hits
    assert hits[0].insight.content == TURTLES
    assert hits[0].signals["keyword"] == pytest.approx(1.0)  # the only BM25 match, through "turtles"
    # without a measured model (the same vectors under another name) the memory has no keyword match at all
    assert _keyword_of(tmp_path, "Which pets do we keep?", TURTLES, model="nomic-embed-text") == 0.0


def test_a_long_query_and_a_query_without_similarity_read_no_neighbour(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(tmp_path)
    # long by the words the store knows (engine.retrieve.long_query_share): 15 of them
    long = "Joanna wrote chapter 1, 2, 3, 4, 5 of her screenplay about a road trip through town number 6: our pets?"
    assert _keyword_of(tmp_path, long, TURTLES) == 0.0
    # without similarity the store's word table is not read (the bundled thesaurus is, test_thesaurus: set aside
    # here, so that only the word table could give "turtles")
    monkeypatch.setattr(thesaurus, "TABLE", SortedTable(tmp_path / "no-thesaurus.txt"))
    settings = Settings(data_dir=tmp_path, store="default", embed_endpoint="http://127.0.0.1:9")
    with Engine(settings, clock=lambda: NOW) as engine:  # no embedder answers: no similarity, no neighbours
        hits = engine.recall("Which pets do we keep?", limit=40).hits
    assert all(h.insight.content != TURTLES or h.signals["keyword"] == 0.0 for h in hits)


def test_a_word_carried_by_too_many_memories_is_no_neighbour(tmp_path: Path) -> None:
    # "turtles" in every memory: it says nothing about which one is asked for
    items = [{"content": f"{t} The turtles watched.", "created_at": "2026-11-01T00:00:00Z"} for t in OTHERS]
    with _engine(tmp_path) as engine:
        engine.import_draft(parse_draft(json.dumps({"schema_version": "1", "insights": items})), no_diff=True)
        hits = engine.recall("Which pets?", limit=5).hits
    assert all(h.signals["keyword"] == 0.0 for h in hits)


# --- the word table -----------------------------------------------------------------------------------


def test_import_writes_the_whole_table_and_a_recall_embeds_only_its_query(tmp_path: Path) -> None:
    _fill(tmp_path)
    db = tmp_path / "data" / "default" / "mnemon.db"
    table = word_store.read(db, "all-MiniLM-L6-v2", 1024)
    assert table is not None and "turtles" in table.words and "lettuce" in table.words
    assert table.stems[table.words.index("turtles")] == "turtl"
    assert table.watermark == word_store.max_rowid(_engine(tmp_path).store.conn)
    norms = np.linalg.norm(np.asarray(table.vectors), axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5)
    embedder = AliasEmbedder()
    settings = Settings(data_dir=tmp_path, store="default", embed_endpoint="http://127.0.0.1:9")
    with Engine(settings, clock=lambda: NOW, embedder=embedder) as engine:
        engine.recall("Which pets do we keep?")
    assert embedder.batches == [["pets", "keep"]]  # the query's words, one request: nothing of the store's again


def test_a_query_word_the_store_has_written_is_not_embedded_again(tmp_path: Path) -> None:
    """The table holds the vector of every word the store has written, each embedded alone as a query's words
    are: a recall embeds only the words it lacks, and ranks as if it had embedded them all."""
    _fill(tmp_path)
    embedder = AliasEmbedder()
    settings = Settings(data_dir=tmp_path, store="default", embed_endpoint="http://127.0.0.1:9")
    with Engine(settings, clock=lambda: NOW, embedder=embedder) as engine:
        known = engine.recall("Which turtles eat lettuce?", limit=40).hits
        mixed = engine.recall("Which pets eat lettuce?", limit=40).hits
    assert embedder.batches == [["pets"]]  # "turtles", "eat" and "lettuce" are the store's words
    assert known and known[0].insight.content == TURTLES
    assert mixed and mixed[0].insight.content == TURTLES and mixed[0].signals["keyword"] == 1.0

    with Engine(settings, clock=lambda: NOW, embedder=embedder) as engine:
        table = word_store.read(tmp_path / "data" / "default" / "mnemon.db", "all-MiniLM-L6-v2", 1024)
        assert table is not None
        rows = table.rows_of(["turtles", "lettuce", "pets"])
        assert rows[2] is None and rows[0] is not None and rows[1] is not None
        vectors = np.asarray(table.vectors)[[rows[0], rows[1]]]
        alone = np.asarray(embedder.embed_batch(["turtles", "lettuce"]), dtype=np.float32)
        assert np.allclose(vectors, alone / np.linalg.norm(alone, axis=1, keepdims=True), atol=1e-6)


def test_a_table_read_once_is_read_again_only_when_its_file_is_replaced(tmp_path: Path) -> None:
    _fill(tmp_path)
    db = tmp_path / "data" / "default" / "mnemon.db"
    first = word_store.read(db, "all-MiniLM-L6-v2", 1024)
    assert first is not None and word_store.read(db, "all-MiniLM-L6-v2", 1024) is first  # the same file: no parse
    assert word_store.read(db, "another-model", 1024) is None  # the header is still read and checked
    with _engine(tmp_path) as engine:
        engine.remember("Caroline keeps a parrot called Kiwi in the kitchen.", no_diff=True)
    _keyword_of(tmp_path, "Which pets do we keep?", TURTLES)  # catches the table up: a new file
    after = word_store.read(db, "all-MiniLM-L6-v2", 1024)
    assert after is not None and after is not first and "parrot" in after.words and "parrot" not in first.words


def test_embed_all_writes_the_whole_table_of_a_store_stored_without_a_model(tmp_path: Path) -> None:
    items = [{"content": t, "created_at": "2026-11-01T00:00:00Z"} for t in [*OTHERS, TURTLES]]
    settings = Settings(data_dir=tmp_path, store="default", embed_endpoint="http://127.0.0.1:9")
    with Engine(settings, clock=lambda: NOW) as engine:  # no embedder answers: no vectors, no table
        engine.import_draft(parse_draft(json.dumps({"schema_version": "1", "insights": items})), no_diff=True)
    assert not _words_file(tmp_path).exists()
    with _engine(tmp_path) as engine:
        assert engine.embed_all()["succeeded"] == len(items)
        top = word_store.max_rowid(engine.store.conn)
    table = word_store.read(tmp_path / "data" / "default" / "mnemon.db", "all-MiniLM-L6-v2", 1024)
    assert table is not None and table.watermark == top and "turtles" in table.words


def test_a_recall_catches_up_with_new_words_and_rebuilds_a_deleted_or_damaged_table(tmp_path: Path) -> None:
    _fill(tmp_path)
    with _engine(tmp_path) as engine:
        engine.remember("Caroline keeps a parrot called Kiwi in the kitchen.", no_diff=True)
    db = tmp_path / "data" / "default" / "mnemon.db"
    before = word_store.read(db, "all-MiniLM-L6-v2", 1024)
    assert before is not None and "parrot" not in before.words  # remember embeds no words
    _keyword_of(tmp_path, "Which pets do we keep?", TURTLES)
    after = word_store.read(db, "all-MiniLM-L6-v2", 1024)
    assert after is not None and "parrot" in after.words and after.watermark > before.watermark
    assert after.words[: len(before.words)] == before.words  # appended, in the order written
    whole = (after.words, after.stems, np.asarray(after.vectors).copy())

    path = _words_file(tmp_path)
    path.unlink()
    assert _keyword_of(tmp_path, "Which pets do we keep?", TURTLES) > 0.0
    rebuilt = word_store.read(db, "all-MiniLM-L6-v2", 1024)
    assert rebuilt is not None and (rebuilt.words, rebuilt.stems) == whole[:2]
    assert np.array_equal(np.asarray(rebuilt.vectors), whole[2])

    raw = bytearray(path.read_bytes())
    raw[raw.index(b"turtles")] ^= 0x20  # a flipped byte in the word list
    path.write_bytes(bytes(raw))
    assert word_store.read(db, "all-MiniLM-L6-v2", 1024) is None  # its checksum says so
    assert _keyword_of(tmp_path, "Which pets do we keep?", TURTLES) > 0.0
    assert word_store.read(db, "all-MiniLM-L6-v2", 1024) is not None
    path.write_bytes(path.read_bytes()[:-8])  # truncated vectors
    assert word_store.read(db, "all-MiniLM-L6-v2", 1024) is None
    assert word_store.read(db, "another-model", 1024) is None  # another model's table is none of ours


def test_readonly_recall_catches_up_in_memory_and_builds_no_table(tmp_path: Path) -> None:
    _fill(tmp_path)
    with _engine(tmp_path) as engine:
        engine.remember("The parrot sleeps in the kitchen.", no_diff=True)
    before = _words_file(tmp_path).read_bytes()
    # the table on disk is one memory behind: caught up in memory, the file untouched
    assert _keyword_of(tmp_path, "Which pets do we keep?", TURTLES, readonly=True) > 0.0
    assert _words_file(tmp_path).read_bytes() == before
    # no table at all: a read-only recall builds none (and reads no neighbour)
    _words_file(tmp_path).unlink()
    assert _keyword_of(tmp_path, "Which pets do we keep?", TURTLES, readonly=True) == 0.0
    assert not _words_file(tmp_path).exists()


def test_a_recall_embeds_at_most_its_budget_and_reads_no_partial_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(tmp_path)
    _words_file(tmp_path).unlink()
    monkeypatch.setattr(wordvectors, "WORD_CATCH_UP_BUDGET", 4)
    db = tmp_path / "data" / "default" / "mnemon.db"
    seen = []
    for _ in range(10):
        seen.append(_keyword_of(tmp_path, "Which pets do we keep?", TURTLES))
        table = word_store.read(db, "all-MiniLM-L6-v2", 1024)
        assert table is not None
        if table.watermark == word_store.max_rowid(_engine(tmp_path).store.conn):
            break
    # every recall before the last read the table as absent (no neighbour), and each kept its progress
    assert seen[:-1] == [0.0] * (len(seen) - 1) and len(seen) > 1
    assert seen[-1] == pytest.approx(1.0)


def test_a_recall_reads_at_most_its_rows_while_catching_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(tmp_path)
    _words_file(tmp_path).unlink()
    monkeypatch.setattr(wordvectors, "WORD_ROWS", 5)
    monkeypatch.setattr(wordvectors, "WORD_CATCH_UP_ROWS", 10)  # two statements of 5 rows a recall
    db = tmp_path / "data" / "default" / "mnemon.db"
    marks = []
    for _ in range(5):
        _keyword_of(tmp_path, "Which pets do we keep?", TURTLES)
        table = word_store.read(db, "all-MiniLM-L6-v2", 1024)
        assert table is not None
        marks.append(table.watermark)
    assert marks[:3] == [10, 20, 30] and marks[3] == marks[4] == 31  # 31 rows: whole after the fourth


def test_the_table_holds_at_most_its_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wordvectors, "WORD_TABLE_MAX", 12)
    _fill(tmp_path)  # an import completes the table: whole, with the first 12 words written
    with _engine(tmp_path) as engine:
        top = word_store.max_rowid(engine.store.conn)
    table = word_store.read(tmp_path / "data" / "default" / "mnemon.db", "all-MiniLM-L6-v2", 1024)
    assert table is not None and len(table.words) == 12 and table.watermark == top
    assert table.words[:4] == ["joanna", "wrote", "chapter", "screenplay"]  # ("her" is a stopword)


def test_the_neighbour_weight_is_the_constant_at_cosine_one(tmp_path: Path) -> None:
    # "pets" and "turtles" share one vector (cosine 1): the neighbour's BM25 weight is TERM_NEIGHBOUR_WEIGHT
    _fill(tmp_path)
    with _engine(tmp_path) as engine:
        table = wordvectors.catch_up(engine, engine.embedder())
        assert table is not None
        asked = wordvectors.embed_words(engine.embedder(), ["pets"])
        cosines = asked @ np.asarray(table.vectors).T
    chosen = neighbours.choose(["pet"], cosines, table.stems, floor=0.5, per_word=8, weight=TERM_NEIGHBOUR_WEIGHT,
                               skip=set(), usable=lambda s: True)  # fmt: skip
    assert chosen == pytest.approx({"turtl": TERM_NEIGHBOUR_WEIGHT})


def test_a_postgresql_store_reads_neighbour_terms_too(tmp_path: Path, capsys: pytest.CaptureFixture[str], pg_db: str) -> None:
    from tests.conftest import Cli

    cli = Cli(tmp_path, capsys, served=False)
    assert cli("store", "create", "pg", "--postgres", pg_db).code == 0
    items = [{"content": t, "created_at": "2026-11-01T00:00:00Z"} for t in [*OTHERS, TURTLES]]
    settings = Settings(data_dir=tmp_path, store="pg", embed_endpoint="http://127.0.0.1:9")
    with Engine(settings, clock=lambda: NOW, embedder=AliasEmbedder()) as engine:
        engine.import_draft(parse_draft(json.dumps({"schema_version": "1", "insights": items})), no_diff=True)
        table = word_store.read(engine.store.path, "all-MiniLM-L6-v2", 1024)
        assert table is not None and "turtles" in table.words
        assert table.watermark == word_store.max_rowid(engine.store.conn)
        hits = engine.recall("Which pets do we keep?", limit=5).hits
    assert hits[0].insight.content == TURTLES and hits[0].signals["keyword"] == pytest.approx(1.0)
