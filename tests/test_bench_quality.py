"""bench/quality.py on a tiny LoCoMo-format conversation: loading, mapping results back, scoring."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import quality  # noqa: E402

SAMPLE = {
    "sample_id": "tiny",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a greyhound called Comet last week."},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely! I started pottery classes.", "blip_caption": "a photo of a clay bowl"},
        ],
        "session_2_date_time": "10:00 am on 2 June, 2023",
        "session_2": [
            {"speaker": "Ana", "dia_id": "D2:1", "text": "Comet loves the beach near Brighton."},
            {"speaker": "Bo", "dia_id": "D2:2", "text": "My kiln finally arrived today."},
        ],
    },
    "observation": {
        "session_1_observation": {"Ana": [["Ana adopted a greyhound named Comet.", "D1:1"]],
                                  "Bo": [["Bo takes pottery classes.", "D1:2"]]},  # fmt: skip
        "session_2_observation": {"Ana": [["Comet likes the beach in Brighton.", "D2:1"]],
                                  "Bo": [["Bo received a kiln.", ["D2:2"]]]},  # fmt: skip
    },
    "qa": [
        {"question": "Who adopted a greyhound?", "answer": "Ana", "evidence": ["D1:1"], "category": 4},
        {"question": "Where does Comet like to go, and what did Bo get?", "answer": "beach; kiln",
         "evidence": ["D2:1; D2:2"], "category": 1},  # fmt: skip
        {"question": "No evidence here", "answer": "", "evidence": [], "category": 5},
    ],
}


def test_session_dates_and_evidence_ids() -> None:
    assert quality.session_start("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    assert quality.session_start("12:05 am on 1 January, 2024") == datetime(2024, 1, 1, 0, 5, tzinfo=timezone.utc)
    assert quality.evidence_ids(["D8:6; D9:17", "D1:3"]) == {"D8:6", "D9:17", "D1:3"}
    with pytest.raises(ValueError):
        quality.session_start("sometime")


def test_units_carry_dates_speakers_and_cited_turns() -> None:
    turns = quality.turn_units(SAMPLE)
    assert [u.content for u in turns][:2] == [
        "Ana: I adopted a greyhound called Comet last week.",
        "Bo: Lovely! I started pottery classes. [shares a photo of a clay bowl]",
    ]
    assert [u.created_at for u in turns] == ["2023-05-08T13:56:00Z", "2023-05-08T13:56:01Z",
                                             "2023-06-02T10:00:00Z", "2023-06-02T10:00:01Z"]  # fmt: skip
    facts = quality.fact_units(SAMPLE)
    assert [(u.source, sorted(u.covers)) for u in facts] == [
        ("Ana", ["D1:1"]), ("Bo", ["D1:2"]), ("Ana", ["D2:1"]), ("Bo", ["D2:2"])]  # fmt: skip


@pytest.mark.parametrize("units", ["turns", "facts"])
def test_scores_through_the_cli_in_process(units: str) -> None:
    result = quality.run_all([SAMPLE], units, "none", "inprocess", 20, None)
    single, multi = result.by_category[4], result.by_category[1]
    assert single.recall[5] == [1.0] and single.mrr == [1.0]  # the only row naming a greyhound
    assert multi.recall[20] == [1.0]  # both evidence turns are among the four rows
    assert len(result.latencies) == 2  # the question without evidence is not asked
    table = quality.table(result)
    assert "| 4 single-hop | 1 | 100.0 | 100.0 | 100.0 | 1.000 |" in table and "| 5 adversarial | 0 |" in table
    per_conversation = quality.conversation_table(result)  # R@10 over categories 1-4, by conversation
    assert "| tiny | 2 | 100.0 | 100.0 | - | - | 100.0 |" in per_conversation
    assert "| **mean of 1** | 2 | **100.0** |" in per_conversation


def test_long_queries_borrow_a_turn_and_leave_it_out_of_the_ranking() -> None:
    turns = quality.conversation_turns(SAMPLE)
    position = {t["dia_id"]: i for i, t in enumerate(turns)}
    question = "Where does Comet like to go?"
    assert quality.long_query(question, {"D2:1"}, turns, position, "prev") == (
        "Lovely! I started pottery classes. " + question, "D1:2")  # fmt: skip
    assert quality.long_query(question, {"D1:1"}, turns, position, "prev")[1] == "D1:2"  # the first turn: the next one
    assert quality.long_query(question, {"D1:1"}, turns, position, "far")[1] == "D2:1"  # half the conversation away
    other = [{"dia_id": "D1:1", "text": "Der Zug fährt um acht."}]
    assert quality.long_query(question, {"D2:1"}, turns, position, "other", other) == ("Der Zug fährt um acht. " + question, "")
    # The borrowed turn never counts as a result; the scores stay in [0, 1] for both engines.
    for long in ("prev", "far"):
        result = quality.run_all([SAMPLE], "turns", "none", "inprocess", 20, None, long=long)
        assert all(0.0 <= v <= 1.0 for s in result.by_category.values() for v in s.recall[10])
        plain = quality.plain_bm25([SAMPLE], "turns", 20, long)
        assert plain.by_category[4].recall[10] == [1.0]


def test_a_probe_is_the_turn_before_the_evidence_alone() -> None:
    turns = quality.conversation_turns(SAMPLE)
    position = {t["dia_id"]: i for i, t in enumerate(turns)}
    question = "Where does Comet like to go?"
    assert quality.long_query(question, {"D2:1"}, turns, position, "probe") == ("Lovely! I started pottery classes.", "D1:2")
    assert quality.long_query(question, {"D1:1"}, turns, position, "probe")[1] == "D1:2"  # the first turn: the next one
    units = quality.turn_units(SAMPLE)
    assert quality.out_of_scope_index("turns", units, "D1:2", "probe", False) == 1  # always out of scope for probe
    assert quality.out_of_scope_index("turns", units, "D1:2", "far", False) is None  # far: only with --borrowed-out
    assert quality.out_of_scope_index("turns", units, "D1:2", "far", True) == 1
    assert quality.out_of_scope_index("facts", quality.fact_units(SAMPLE), "D1:2", "probe", False) is None


@pytest.mark.parametrize("mode", ["inprocess", "cli"])
def test_an_insight_out_of_scope_is_no_memory_for_that_recall_only(tmp_path: Path, mode: str) -> None:
    units = quality.turn_units(SAMPLE)
    draft = tmp_path / "draft.json"
    draft.write_text(quality.json.dumps(quality.draft_of(units)), encoding="utf-8")
    env = {k: v for k, v in quality.os.environ.items() if not k.startswith("MNEMON_")}
    env.update({"MNEMON_SERVER": "off", "MNEMON_EMBED_ENDPOINT": "http://127.0.0.1:9"})
    run = quality.Runner(tmp_path / "store", env, mode)
    run("import", str(draft), "--no-diff")
    probe = units[1]  # "Bo: Lovely! I started pottery classes. [...]"

    def contents(exclude: quality.Key | None) -> list[str]:
        out = run("recall", "pottery classes", "--limit", "5", "--verbose", exclude=exclude)[1]
        return [r["insight"]["content"] for r in quality.json.loads(out)["results"]]

    assert contents(None)[:1] == [probe.content]  # the only row naming pottery
    assert probe.content not in contents((probe.content, probe.created_at))  # out of scope: not found at all
    assert contents(None)[:1] == [probe.content]  # the exclusion lasted one command: the store is untouched


def test_probe_view_scores_and_the_baseline_drops_the_probe_turn_from_its_corpus() -> None:
    result = quality.run_all([SAMPLE], "turns", "none", "inprocess", 20, None, long="probe")
    assert all(0.0 <= v <= 1.0 for s in result.by_category.values() for v in s.recall[10])
    assert all(["D1:2"] not in pq["ranked"] for pq in result.per_question)  # the probe turn never ranks
    plain = quality.plain_bm25([SAMPLE], "turns", 20, "probe")
    assert plain.by_category[4].recall[10] == [1.0]  # "I" is the probe's one word its event shares
    assert all(["D1:2"] not in pq["ranked"] for pq in plain.per_question)


@pytest.mark.parametrize("mode", ["inprocess", "cli"])
def test_a_turn_out_of_scope_reads_as_a_store_imported_without_it(tmp_path: Path, mode: str) -> None:
    """The probe view's condition is a store that never held the turn: the turn's neighbours are each
    other's backbone neighbours (the lift, the temporal edge), not two ends of a hole."""
    texts = ["Ana: I went hiking in the mountains near Chamonix last weekend.", "Bo: Which trail?",
             "Ana: The glacier path, six hours up and down.", "Bo: I bought a new guitar.",
             "Ana: Do you play often?", "Bo: Every evening after work, mostly blues."]  # fmt: skip
    units = [quality.Unit(t, f"2023-05-08T13:56:0{i}Z", "user", frozenset({f"D1:{i + 1}"})) for i, t in enumerate(texts)]
    env = {k: v for k, v in quality.os.environ.items() if not k.startswith("MNEMON_")}
    env.update({"MNEMON_SERVER": "off", "MNEMON_EMBED_ENDPOINT": "http://127.0.0.1:9"})

    def store(name: str, rows: list[quality.Unit]) -> quality.Runner:
        draft = tmp_path / f"{name}.json"
        draft.write_text(quality.json.dumps(quality.draft_of(rows)), encoding="utf-8")
        run = quality.Runner(tmp_path / name, env, mode)
        run("import", str(draft), "--no-diff")
        return run

    def ranked(run: quality.Runner, exclude: quality.Key | None = None) -> list[tuple[str, float]]:
        out = run("recall", "hiking in the mountains last weekend", "--limit", "5", "--verbose", exclude=exclude)[1]
        return [(r["insight"]["content"], round(r["score"], 9)) for r in quality.json.loads(out)["results"]]

    turn = units[1]
    whole, without = store("whole", units), store("without", units[:1] + units[2:])
    assert ranked(whole, (turn.content, turn.created_at)) == ranked(without)
    whole.hole = True  # the view before: the turn after the hole lends and borrows no lift across it
    holed = ranked(whole, (turn.content, turn.created_at))
    assert turn.content not in [c for c, _ in holed]
    assert dict(holed)[units[2].content] < dict(ranked(without))[units[2].content]
    assert ranked(whole)[0][0] == units[0].content  # the store itself is untouched


@pytest.mark.parametrize("how", quality.SEPARATE_KINDS)
def test_separate_memories_carry_no_backbone_between_conversation_neighbours(tmp_path: Path, how: str) -> None:
    """--separate: the held-out Chinese set's memories are separate events, not consecutive turns. A store
    built that way has no backbone edge between two turns that follow each other in the conversation
    (shuffle: its backbone runs along the shuffled order, one memory a day; alone: none at all)."""
    texts = [f"Ana: turn number {i} about topic {i}" for i in range(12)]
    units = [quality.Unit(t, f"2023-05-08T13:56:{i:02d}Z", "user", frozenset({f"D1:{i + 1}"})) for i, t in enumerate(texts)]
    separate = quality.separate_units(units, how, "tiny")
    assert separate == quality.separate_units(units, how, "tiny")  # seeded: the same store every run
    assert sorted(u.content for u in separate) == sorted(texts) and {u.covers for u in separate} == {u.covers for u in units}
    days = [u.created_at[:10] for u in separate]
    assert len(set(days)) == len(units) and days == sorted(days)  # one memory a day, in the shuffled order
    assert [u.content for u in separate] != texts
    assert len({u.source for u in separate}) == (len(units) if how == "alone" else 1)
    draft = tmp_path / "draft.json"
    draft.write_text(quality.json.dumps(quality.draft_of(separate)), encoding="utf-8")
    env = {k: v for k, v in quality.os.environ.items() if not k.startswith("MNEMON_")}
    env.update({"MNEMON_SERVER": "off", "MNEMON_EMBED_ENDPOINT": "http://127.0.0.1:9"})
    quality.Runner(tmp_path / "store", env, "inprocess")("import", str(draft), "--no-diff")
    import apsw

    conn = apsw.Connection(str(tmp_path / "store" / "data" / "default" / "mnemon.db"))
    backbone = conn.execute(
        "SELECT s.content, d.content FROM edges e JOIN insights s ON s.id = e.source_id JOIN insights d ON d.id = e.target_id "
        "WHERE e.edge_type = 'temporal' AND e.metadata LIKE '%backbone%' AND e.metadata LIKE '%precedes%'").fetchall()  # fmt: skip
    order = [u.content for u in separate]
    if how == "alone":
        assert backbone == []
    else:
        assert sorted(backbone) == sorted(zip(order, order[1:], strict=False))  # the shuffled order's neighbours
    conversation = set(zip(texts, texts[1:], strict=False))
    assert len(conversation & {tuple(p) for p in backbone}) <= 2  # at most what a random order keeps by chance
    result = quality.run_all([SAMPLE], "turns", "none", "inprocess", 20, None, long="probe", separate=how)
    assert all(0.0 <= v <= 1.0 for s in result.by_category.values() for v in s.recall[10])


def test_turns_as_written_are_stored_without_speaker_or_caption(tmp_path: Path) -> None:
    """--as-written: a data set whose turns are event memories stores each as its text alone, as an agent's
    remember call would, in mnemon's store and in the plain baseline's corpus; results map back to the turns."""
    units = quality.turn_units(SAMPLE, as_written=True)
    assert [u.content for u in units] == [t["text"] for t in quality.conversation_turns(SAMPLE)]
    assert [u.created_at for u in units] == [u.created_at for u in quality.turn_units(SAMPLE)]
    assert quality.units_of(SAMPLE, "facts", as_written=True) == quality.fact_units(SAMPLE)
    draft = tmp_path / "draft.json"
    draft.write_text(quality.json.dumps(quality.draft_of(units)), encoding="utf-8")
    env = {k: v for k, v in quality.os.environ.items() if not k.startswith("MNEMON_")}
    env.update({"MNEMON_SERVER": "off", "MNEMON_EMBED_ENDPOINT": "http://127.0.0.1:9"})
    run = quality.Runner(tmp_path / "store", env, "inprocess")
    run("import", str(draft), "--no-diff")
    stored = quality.json.loads(run("recall", "Lovely pottery", "--limit", "5", "--verbose")[1])["results"]
    assert stored[0]["insight"]["content"] == "Lovely! I started pottery classes."
    for separate in ("", "alone"):
        result = quality.run_all([SAMPLE], "turns", "none", "inprocess", 20, None, separate=separate, as_written=True)
        assert result.by_category[4].recall[5] == [1.0]  # "greyhound": the row's own words
        assert result.by_category[1].recall[20][0] >= 0.5  # "Comet": found; "kiln" ("what did Bo get?"): not named
    # "... what did Bo get?": "My kiln finally arrived today." no longer names Bo, and no other word matches
    plain = quality.plain_bm25([SAMPLE], "turns", 20, as_written=True)
    assert plain.by_category[4].recall[5] == [1.0] and plain.by_category[1].recall[20] == [0.5]
    assert quality.plain_bm25([SAMPLE], "turns", 20).by_category[1].recall[20] == [1.0]  # with the names: both


def test_dump_holds_the_baseline_question_by_question(tmp_path: Path) -> None:
    """--dump with --baseline writes the plain BM25 baseline's per-question results beside mnemon's, with the
    question and its evidence, so the two can be compared probe by probe."""
    data, dump = tmp_path / "tiny.json", tmp_path / "dump.json"
    data.write_text(quality.json.dumps([SAMPLE]), encoding="utf-8")
    assert quality.main([str(data), "--units", "turns", "--mode", "inprocess", "--baseline", "--dump", str(dump)]) == 0
    written = quality.json.loads(dump.read_text(encoding="utf-8"))
    assert sorted(written) == ["baseline", "none"]
    for view in written.values():
        assert [(pq["q"], pq["evidence"]) for pq in view] == [
            ("Who adopted a greyhound?", ["D1:1"]),
            ("Where does Comet like to go, and what did Bo get?", ["D2:1", "D2:2"]),
        ]
    assert written["baseline"][0]["ranked"][0] == ["D1:1"]  # "greyhound" is that turn's alone
