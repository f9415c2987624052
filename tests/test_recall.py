"""Smart and basic recall through the CLI (contract §3.4, §4.10, §4.12; Decisions 1, 2, 12-14).

Real SQLite stores in a temp dir, the real hot index, an injectable clock so that created_at
order (and the 24 h proximity window) is under the test's control.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from conftest import Result

from mnemon.cli import main
from mnemon.cli.state import GlobalOptions
from mnemon.records import (
    NEIGHBOUR_EXPANSION_TOKENS,
    NEIGHBOUR_LIFT_WEIGHTS_TOKENS,
    RERANK_WEIGHTS_TOKENS,
    SESSION_PRIOR_WEIGHT,
)
from tests.gateway_server import store_dir
from tests.test_cli_errors import snapshot  # the byte (and PostgreSQL row) snapshot the readonly tests compare

SIGNALS = ("keyword", "entity", "similarity", "graph")  # the order of the weight tables

T0 = datetime(2026, 3, 1, 9, 0, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


class TimedCli:
    """``mnemon`` in-process with a controlled clock (``advance`` moves it between commands)."""

    def __init__(self, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.data_dir = data_dir
        self.capsys = capsys
        self.clock = Clock()

    def __call__(self, *args: str) -> Result:
        self.capsys.readouterr()
        code = main(["--data-dir", str(self.data_dir), *args], options=GlobalOptions(engine_kwargs={"clock": self.clock}))
        out = self.capsys.readouterr()
        return Result(code, out.out, out.err)

    def ok(self, *args: str) -> object:
        res = self(*args)
        assert res.code == 0, res.err
        return res.json()

    def remember(self, text: str, *flags: str, hours: float = 1.0) -> str:
        self.clock.now += timedelta(hours=hours)
        return self.ok("remember", text, "--no-diff", *flags)["id"]  # type: ignore[index]

    def error(self, *args: str) -> str:
        res = self(*args)
        assert res.code == 1 and res.out == "" and "Traceback" not in res.err, res
        return res.err


@pytest.fixture
def tcli(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> TimedCli:
    return TimedCli(data_dir, capsys)


def db_file(data_dir: Path) -> Path:
    return store_dir(data_dir) / "mnemon.db"  # the gateway's, when the store is remote


def verbose(tcli: TimedCli, *args: str) -> dict:
    return tcli.ok("recall", *args, "--verbose")  # type: ignore[return-value]


# --- intent (§4.12) through recall ----------------------------------------------------------------

INTENT_ROWS = [
    ("為什麼選擇 Alpha？", "WHY"),
    ("हमने Alpha क्यों चुना?", "WHY"),
    ("¿Cuándo elegimos Alpha?", "WHEN"),
    ("ما هو Alpha؟", "ENTITY"),
    ("Qu’est-ce que Alpha ?", "ENTITY"),
    ("Alpha কী?", "ENTITY"),
    ("Alpha por quê?", "WHY"),
    ("Kapan memilih Alpha?", "WHEN"),
    ("Почему выбрали Alpha?", "WHY"),
    ("Was ist Alpha?", "ENTITY"),
    ("Alpha index tuning", "GENERAL"),
    ("Alpha কখনো कब्ज যখন", "GENERAL"),
    ("¿Por qué y cuándo elegimos Alpha?", "GENERAL"),
    ("Why Alpha, wann gewählt?", "GENERAL"),
    ("Pourquoi Alpha, why?", "WHY"),
]


def test_every_contract_intent_example_reaches_meta(tcli: TimedCli) -> None:
    tcli.remember("Alpha is our routing service", "--entities", "Alpha")
    for query, expected in INTENT_ROWS:
        out = verbose(tcli, query)
        assert out["meta"]["intent"] == expected, query
        assert out["meta"]["intent_source"] == "auto"
        assert all(r["intent"] == expected for r in out["results"])


def test_empty_store_still_reports_intent_and_override_wins(tcli: TimedCli) -> None:
    out = verbose(tcli, "why did we pick it")
    assert out == {
        "results": [],
        "meta": {"intent": "WHY", "intent_source": "auto", "anchor_count": 0, "traversed": 0, "hint": "sparse_results"},
    }
    out = verbose(tcli, "why did we pick it", "--intent", " when ")
    assert out["meta"]["intent"] == "WHEN" and out["meta"]["intent_source"] == "override"
    assert tcli.ok("recall", "anything") == {"results": [], "hint": "sparse_results"}


def test_when_and_why_detection_and_invalid_override(tcli: TimedCli) -> None:
    tcli.remember("Migrated the billing service to Postgres")
    assert verbose(tcli, "when did we migrate billing")["meta"]["intent"] == "WHEN"
    assert verbose(tcli, "why did we migrate billing")["meta"]["intent"] == "WHY"
    assert verbose(tcli, "what is the reason for billing")["meta"]["intent"] == "ENTITY"
    err = tcli.error("recall", "billing", "--intent", "HOW")
    assert err == 'Error: unknown intent "HOW"; valid: WHY, WHEN, ENTITY, GENERAL\n'


# --- the causal chain, WHY ordering ------------------------------------------------------------


def test_depth_two_causal_chain_is_found_and_why_ordered(tcli: TimedCli) -> None:
    # Three days apart and from different sources: no backbone or proximity edge joins them,
    # only the causal links, so Z (no shared word with the query) is reached at depth 2.
    x = tcli.remember("Alpha service routing was slow under load", "--source", "ops", hours=48)
    for i in range(6):
        tcli.remember(f"Unrelated note number {i} about gardening tomatoes", "--source", f"noise{i}", hours=48)
    y = tcli.remember("Added a caching tier in front of the primary database", "--source", "dev", hours=48)
    z = tcli.remember("Stale cache entries produced wrong invoices", "--source", "qa", hours=48)
    tcli.ok("link", x, y, "--type", "causal", "--weight", "0.9")
    tcli.ok("link", y, z, "--type", "causal", "--weight", "0.9")
    out = verbose(tcli, "why Alpha service routing")
    assert out["meta"]["intent"] == "WHY"
    ids = [r["insight"]["id"] for r in out["results"]]
    assert {x, y, z} <= set(ids)
    via = {r["insight"]["id"]: r["via"] for r in out["results"]}
    assert via[x] == "keyword" and via[y] == "causal" and via[z] == "causal"
    # `link` writes causal edges both ways (a cycle for Kahn), so this is the score order.
    assert ids.index(x) < ids.index(y) < ids.index(z)


def test_why_ordering_puts_causes_first_even_when_they_score_lower(tcli: TimedCli) -> None:
    # The remember-time causal producer writes ONE directed edge cause → effect (§4.6): the
    # new text carries "because", so it is the effect of the earlier same-source insight.
    cause = tcli.remember("Traffic doubled on the checkout cluster", "--source", "ops")
    effect = tcli.remember("Checkout autoscaling enabled because traffic doubled", "--source", "ops")
    why = verbose(tcli, "why checkout autoscaling enabled", "--intent", "WHY")
    by_id = {r["insight"]["id"]: r for r in why["results"]}
    assert by_id[effect]["score"] > by_id[cause]["score"]
    ids = [r["insight"]["id"] for r in why["results"]]
    assert ids.index(cause) < ids.index(effect)  # Kahn: the cause first despite its lower score
    general = verbose(tcli, "why checkout autoscaling enabled", "--intent", "GENERAL")
    ids = [r["insight"]["id"] for r in general["results"]]
    assert ids.index(effect) < ids.index(cause)  # other intents keep score order


# --- outputs ------------------------------------------------------------------------------------


def test_compact_output_shape_rounding_and_confidence(tcli: TimedCli) -> None:
    tcli.remember("Chose Qdrant because Rust performance is critical", "--cat", "decision", "--imp", "4")
    out = tcli.ok("recall", "Qdrant", "Rust")
    (hit,) = out["results"]
    assert list(hit) == ["id", "content", "category", "importance", "intent", "matched_via", "confidence", "score"]
    assert hit["category"] == "decision" and hit["importance"] == 4 and hit["intent"] == "GENERAL"
    assert hit["matched_via"] == "hybrid"  # keyword and entity anchor
    assert hit["score"] == round(hit["score"], 3)
    assert hit["confidence"] == ("high" if hit["score"] >= 0.6 else "medium" if hit["score"] >= 0.25 else "low")
    assert out["hint"] == "sparse_results"


def test_round_half_away_from_zero_and_confidence_bands() -> None:
    from mnemon.cli.retrieve import confidence, round_score

    assert round_score(0.0625) == 0.063 and round_score(-0.0625) == -0.063 and round_score(0.1234) == 0.123
    assert [confidence(v) for v in (0.249, 0.25, 0.599, 0.6)] == ["low", "medium", "medium", "high"]


def test_verbose_signals_and_meta(tcli: TimedCli) -> None:
    # Two days apart, different sources: no edge joins them, so the score is the rerank alone.
    a = tcli.remember("Redis cache eviction policy tuned to allkeys-lru", "--entities", "Redis", "--source", "a", hours=48)
    tcli.remember("Team lunch moved to Friday", "--source", "b", hours=48)
    out = verbose(tcli, "Redis eviction")
    (first,) = out["results"]
    assert first["insight"]["id"] == a and first["insight"]["access_count"] == 0  # before the bump
    assert first["via"] == "hybrid"
    s = first["signals"]
    assert s == {"keyword": 1, "entity": 1, "similarity": 0, "graph": 0}
    assert first["relevance"] == 1.0  # it carries every term of the query (mnemon.relevance)
    # No embeddings: Decision 1's token table, plus the session prior: the lone hit is its day's best
    # own match (keyword and entity signals with the same weights, no graph).
    w_kw, w_ent, _, w_graph = RERANK_WEIGHTS_TOKENS
    own = w_kw * s["keyword"] + w_ent * s["entity"]
    assert math.isclose(first["score"], own + w_graph * s["graph"] + SESSION_PRIOR_WEIGHT * own, abs_tol=5e-4)
    assert out["meta"] == {
        "intent": "GENERAL", "intent_source": "auto", "anchor_count": 1, "traversed": 1, "hint": "sparse_results",
    }


def test_brief_output_and_errors(tcli: TimedCli) -> None:
    long = "Kubernetes <probe> &   readiness\n\ncheck " + "x" * 300
    kid = tcli.remember(long, "--cat", "fact")
    res = tcli("recall", "Kubernetes", "readiness", "--brief", "--excerpt-chars", "20")
    assert res.code == 0 and res.out.count("\n") == 1 and "\\u003c" not in res.out
    out = res.json()
    (hit,) = out["results"]
    assert list(hit) == ["id", "excerpt", "category", "score", "confidence", "relevance"]
    assert hit["id"] == kid and hit["excerpt"] == "Kubernetes <probe>…" and hit["category"] == "fact"
    assert out["detail_command"] == "mnemon show <id>" and out["hint"] == "sparse_results"
    empty = tcli("recall", "nothing-matches-this", "--brief")
    assert empty.json() == {"results": [], "hint": "sparse_results"}
    assert tcli.error("recall", "x", "--brief", "--verbose") == "Error: --brief and --verbose cannot be used together\n"
    assert tcli.error("recall", "x", "--brief", "--excerpt-chars", "0") == "Error: --excerpt-chars must be greater than 0\n"
    assert tcli.error("recall", "x", "--limit", "0") == "Error: --limit must be at least 1, got 0\n"
    assert tcli.error("recall") == "Error: requires at least 1 arg(s), only received 0\n"
    tcli.ok("recall", "x", "--excerpt-chars", "0")  # only an error together with --brief
    # int64's bounds, as Go's flag parse and --limit have them: the largest is a whole excerpt, one more is refused
    whole = tcli("recall", "Kubernetes", "readiness", "--brief", "--excerpt-chars", str(2**63 - 1)).json()
    assert whole["results"][0]["excerpt"] == " ".join(long.split())
    for value in (str(2**63), str(-(2**63) - 1)):
        assert tcli.error("recall", "x", "--brief", "--excerpt-chars", value) == (
            f'Error: invalid argument "{value}" for "--excerpt-chars" flag: strconv.ParseInt: parsing "{value}": '
            "value out of range\n")


def test_smart_flag_is_a_hidden_no_op_and_words_join(tcli: TimedCli) -> None:
    tcli.remember("Graph traversal budget tuning")
    a = tcli.ok("recall", "graph", "traversal", "--smart", "--verbose")
    b = tcli.ok("recall", "graph traversal", "--verbose")
    assert [r["insight"]["id"] for r in a["results"]] == [r["insight"]["id"] for r in b["results"]]


# --- basic ---------------------------------------------------------------------------------------


def test_basic_is_like_with_escaped_wildcards_and_values_before_bump(tcli: TimedCli) -> None:
    a = tcli.remember("Coverage reached 100% today", "--imp", "2")
    b = tcli.remember("Coverage reached 1000 lines", "--imp", "5")
    c = tcli.remember("snake_case names everywhere", "--cat", "preference")
    out = tcli.ok("recall", "100%", "--basic")
    assert [i["id"] for i in out] == [a] and out[0]["access_count"] == 0
    assert list(out[0]) == ["id", "content", "category", "importance", "tags", "entities", "source",
                            "access_count", "created_at", "updated_at"]
    assert [i["id"] for i in tcli.ok("recall", "COVERAGE", "--basic")] == [b, a]  # importance first
    assert tcli.ok("recall", "e_n", "--basic") == []  # "_" is literal ("case names" would match "e_n" as a wildcard)
    assert [i["id"] for i in tcli.ok("recall", "", "--basic")] == [b, c, a]
    assert [i["id"] for i in tcli.ok("recall", "", "--basic", "--cat", "preference")] == [c]
    assert tcli.ok("recall", "100%", "--basic")[0]["access_count"] == 3  # three earlier hits
    brief = tcli("recall", "snake", "--basic", "--brief")
    assert brief.json() == {
        "results": [{"id": c, "excerpt": "snake_case names everywhere", "category": "preference"}],
        "detail_command": "mnemon show <id>",
    }
    assert "recall:basic" in tcli("log").out and "q=100% hits=1" in tcli("log").out


def test_basic_with_a_query_longer_than_any_content_finds_nothing(tcli: TimedCli) -> None:
    # past SQLite's 50,000-byte LIKE pattern limit this was "Error: database error: LIKE or GLOB pattern too
    # complex"; no memory (at most 8000 bytes) can hold such a query, so the answer is no hit
    tcli.remember("Coverage reached 100% today")
    for query in ("coverage " * 6000, "x" * 8001):
        res = tcli("recall", query, "--basic")
        assert res.code == 0, res.err
        assert res.json() == []
    assert "recall:basic" in tcli("log", "--limit", "1").out


# --- scoping, supersedes, expansion, ties -------------------------------------------------------------


def test_cat_and_source_scope_before_anchors_and_traversal(tcli: TimedCli) -> None:
    d = tcli.remember("Kafka retention set to seven days", "--cat", "decision", "--source", "ops")
    f = tcli.remember("Kafka brokers run on three nodes", "--cat", "fact", "--source", "ops")
    g = tcli.remember("Kafka consumer lag alert fired", "--cat", "fact", "--source", "bot")
    ids = lambda *a: [r["insight"]["id"] for r in verbose(tcli, "Kafka", *a)["results"]]  # noqa: E731
    assert set(ids()) == {d, f, g}
    assert ids("--cat", "decision") == [d]  # the backbone neighbour f is outside the scope
    assert set(ids("--cat", "fact")) == {f, g}
    assert ids("--source", "bot") == [g]
    assert ids("--cat", "fact", "--source", "ops") == [f]
    assert ids("--source", "nobody") == []


def test_supersedes_demotes_by_a_quarter_and_flags(tcli: TimedCli) -> None:
    old = tcli.remember("Project Alpha stores orders in PostgreSQL")
    new = tcli.remember("Project Alpha moved orders to CockroachDB")
    before = {r["insight"]["id"]: r for r in verbose(tcli, "Project Alpha orders")["results"]}
    tcli.ok("link", new, old, "--type", "supersedes", "--weight", "1.0")
    after = {r["insight"]["id"]: r for r in verbose(tcli, "Project Alpha orders")["results"]}
    assert after[old]["superseded"] is True and "superseded" not in after[new]
    assert math.isclose(after[old]["score"], before[old]["score"] * 0.25)
    assert math.isclose(after[new]["score"], before[new]["score"])
    compact = tcli.ok("recall", "Project Alpha orders")["results"]
    assert [r["id"] for r in compact] == [new, old] and compact[1]["superseded"] is True


def test_neighbour_expansion_brings_the_backbone_neighbour(tcli: TimedCli) -> None:
    # Same source, written next to each other: the backbone joins them (Decision 14).
    q = tcli.remember("Incident 4711: checkout latency spiked", "--source", "pager")
    n = tcli.remember("Rolled back the deploy and it recovered", "--source", "pager")
    out = verbose(tcli, "incident 4711 checkout")
    by_id = {r["insight"]["id"]: r for r in out["results"]}
    assert q in by_id and n in by_id
    assert out["results"][0]["insight"]["id"] == q
    after, _before = NEIGHBOUR_EXPANSION_TOKENS  # n follows q: q's own match lifts n by `after`
    lent = sum(w * by_id[q]["signals"][k] for w, k in zip(NEIGHBOUR_LIFT_WEIGHTS_TOKENS, SIGNALS, strict=True))
    assert lent > 0 and by_id[n]["score"] >= after * lent - 1e-9


def test_equal_scores_tie_by_importance_then_recency_then_id(tcli: TimedCli) -> None:
    same = [tcli.remember("identical twin memory", "--source", f"s{i}", hours=0) for i in range(3)]
    out = tcli.ok("recall", "identical twin memory")["results"]
    scores = {r["score"] for r in out}
    assert len(scores) == 1
    assert [r["id"] for r in out] == sorted(same)
    assert tcli.ok("recall", "identical twin memory") == {"results": out, "hint": "sparse_results"}


# --- side effects and read-only -----------------------------------------------------------------------


def test_access_bump_and_oplog_in_one_transaction(tcli: TimedCli) -> None:
    a = tcli.remember("Disk alarms on the storage nodes")
    tcli.ok("recall", "disk alarms")
    tcli.ok("recall", "disk alarms")
    assert tcli.ok("show", a)["access_count"] == 2
    log = tcli("log").out
    assert log.count("recall") == 2 and "q=disk alarms hits=1" in log


def test_readonly_recall_changes_no_byte_even_with_a_stale_index(tcli: TimedCli, data_dir: Path) -> None:
    a = tcli.remember("Readonly snapshots serve the GUI")
    tcli.ok("recall", "snapshots")  # the index file exists now
    b = tcli.remember("A newer memory about snapshots")  # index caught up by remember...
    (folder,) = db_file(data_dir).parent.glob("*.index")  # mnemon.db.index, or postgres-<store id>.index
    hot = folder / "hot"
    hot.unlink()  # ...and then lost: a read-only reader must rebuild in memory
    before = snapshot(data_dir)
    out = tcli.ok("--readonly", "recall", "snapshots", "--verbose")
    assert {r["insight"]["id"] for r in out["results"]} == {a, b}
    assert tcli.ok("--readonly", "search", "snapshots") != []
    assert tcli.ok("--readonly", "recall", "snapshots", "--basic") != []
    assert snapshot(data_dir) == before


def test_recall_on_a_missing_store_under_readonly_is_an_error(tcli: TimedCli, data_dir: Path) -> None:
    err = tcli.error("--readonly", "recall", "x")
    assert err.startswith("Error: database not found:")


def test_a_long_query_is_led_by_its_rare_terms(tcli: TimedCli, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long query (a whole dialogue turn: more than records.LONG_QUERY_TERMS terms the index knows)
    weighs each term by idf ** LONG_QUERY_IDF_POWER: the one memory carrying its rare word comes
    first, not a memory that shares many of its everyday words; a short query keeps plain BM25."""
    from mnemon.engine import retrieve
    from mnemon.records import LONG_QUERY_TERMS

    common = ("weekend busy weather plans kids garden neighbours dinner party movie school traffic coffee "
              "shopping holiday rain bicycle concert laundry bakery museum football picnic homework").split()  # fmt: skip
    for k in range(8):  # each everyday word is in half the memories
        tcli.remember(" ".join(common[(k + j) % len(common)] for j in range(0, len(common), 2)) + f" note{k}")
    rare = tcli.remember("Grandma keeps a sourdough starter")
    query = "the " + " and the ".join(common) + " and grandma asked about the sourdough"
    assert len(common) + 2 > LONG_QUERY_TERMS  # the terms the index knows: every everyday word, grandma, sourdough

    def first(q: str) -> str:
        return tcli.ok("recall", q, "--limit", "3")["results"][0]["id"]  # type: ignore[index]

    assert first(query) == rare
    monkeypatch.setattr(retrieve, "LONG_QUERY_TERMS", 10**6)  # plain idf: the everyday words win
    assert first(query) != rare
    assert first("sourdough starter") == rare
