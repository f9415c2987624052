"""`remember` through the real CLI (contract §3.3, §4.3-4.9, Decisions 4-6): flags, stdin, the
exact-duplicate rule, the advisory diff, the graph edges it writes and auto-prune.

Commands run in-process through ``mnemon.cli.main`` against a real SQLite file; a fixed clock is
injected where the contract's time rules (proximity hours, grace period) must be exact.
"""

from __future__ import annotations

import io
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import apsw
import pytest

from mnemon.cli import main
from mnemon.cli.state import GlobalOptions
from tests.conftest import Result, run_process
from tests.gateway_server import store_dir

T0 = datetime(2026, 2, 18, 10, 0, 0, tzinfo=timezone.utc)

REMEMBER_KEYS = [
    "id", "content", "category", "importance", "tags", "entities", "action", "diff_suggestion",
    "created_at", "edges_created", "semantic_candidates", "causal_candidates", "embedded",
    "effective_importance", "auto_pruned", "auto_pruned_ids",
]


def run_at(data_dir: Path, capsys: pytest.CaptureFixture[str], moment: datetime | None, *args: str) -> Result:
    """Run one command in-process, with the engine's clock fixed at ``moment`` when given."""
    options = GlobalOptions()
    if moment is not None:
        options.engine_kwargs = {"clock": lambda: moment}
    capsys.readouterr()
    code = main(["--data-dir", str(data_dir), *args], options=options)
    out, err = capsys.readouterr()
    return Result(code, out, err)


def ok_at(data_dir: Path, capsys: pytest.CaptureFixture[str], moment: datetime | None, *args: str) -> dict:
    res = run_at(data_dir, capsys, moment, *args)
    assert res.code == 0, res.err
    value = res.json()
    assert isinstance(value, dict)
    return value


def db_path(data_dir: Path, store: str = "default") -> Path:
    return store_dir(data_dir, store) / "mnemon.db"  # the gateway's, when the store is remote


def stored_state(data_dir: Path, store: str = "default") -> object:
    """What a store holds, to compare before and after a command that must change nothing: the
    SQLite file's bytes, or every row of a PostgreSQL store (and its change sequence)."""
    from mnemon.store import registration

    if not registration.is_postgres(db_path(data_dir, store).parent):
        return db_path(data_dir, store).read_bytes()
    tables = ("insights", "edges", "oplog", "mnemon_meta", "insight_entities", "mnemon_counts", "entity_counts")
    state = {t: query(data_dir, f"SELECT * FROM {t} ORDER BY 1, 2", store=store) for t in tables}
    state["seq"] = query(data_dir, "SELECT last_value FROM mnemon_change_seq", store=store)
    return state


def query(data_dir: Path, sql: str, params: tuple = (), store: str = "default") -> list[tuple]:
    """Run one SQLite statement on a store: its file, or its PostgreSQL schema (translated, as the
    store modules' statements are)."""
    from mnemon.store import registration

    if registration.is_postgres(db_path(data_dir, store).parent):
        from mnemon.store import Store

        opened = Store.open(db_path(data_dir, store), readonly=False, now="2026-01-01T00:00:00Z")
        try:
            return [tuple(r) for r in opened.conn.execute(sql, params)]
        finally:
            opened.close()
    conn = apsw.Connection(str(db_path(data_dir, store)))
    try:
        return [tuple(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def edge_rows(data_dir: Path) -> dict[tuple[str, str, str], tuple[float, dict[str, str]]]:
    rows = query(data_dir, "SELECT source_id, target_id, edge_type, weight, metadata FROM edges")
    return {(r[0], r[1], r[2]): (r[3], json.loads(r[4])) for r in rows}


# --- output shape and flags ---------------------------------------------------------------------


def test_first_remember_prints_every_field_in_go_order(cli) -> None:
    res = cli("remember", "Chose Qdrant because Rust performance is critical")
    assert res.code == 0 and res.err == ""
    out = res.json()
    assert list(out) == REMEMBER_KEYS
    assert out["action"] == "added" and out["diff_suggestion"] == "ADD"
    assert out["category"] == "general" and out["importance"] == 3 and out["tags"] == []
    assert out["entities"] == ["Qdrant", "Rust"]
    assert out["edges_created"] == {"temporal": 0, "entity": 0, "causal": 0, "semantic": 0}
    assert out["semantic_candidates"] == [] and out["causal_candidates"] == []
    assert out["embedded"] is False and out["auto_pruned"] == 0 and out["auto_pruned_ids"] == []
    assert out["effective_importance"] == 0.5
    assert "replaced_id" not in out
    # Go's encoder: two-space indent, "key": value, one trailing newline.
    assert res.out.startswith('{\n  "id": "') and res.out.endswith("}\n")


def test_all_flags_words_joined_and_flags_interspersed(cli) -> None:
    out = cli.ok(
        "remember", "--cat", "decision", "Use", "Postgres", "--imp", "5", "for billing",
        "--tags", " db, billing,,  ", "--entities", "Billing,Ledger", "--entity-mode", "provided",
        "--source", "agent-7",
    )
    assert out["content"] == "Use Postgres for billing"
    assert (out["category"], out["importance"]) == ("decision", 5)
    assert out["tags"] == ["db", "billing"]
    assert out["entities"] == ["Billing", "Ledger"]  # provided only: no "Postgres" from the dictionary
    shown = cli.ok("show", out["id"])
    assert shown["source"] == "agent-7" and shown["tags"] == ["db", "billing"]
    assert out["effective_importance"] == 1  # base 1.0 for importance 5, printed as Go prints 1.0


@pytest.mark.in_process  # patches this process
def test_stdin_dash_reads_content_from_a_pipe(cli, monkeypatch) -> None:
    text = "line one of a piped memory\nline two <with> & markup — ünïcode"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8"))))
    res = cli("remember", "-", "--cat", "fact")
    assert res.code == 0, res.err
    assert res.json()["content"] == text
    assert "\\u003cwith\\u003e \\u0026 markup" in res.out  # html escaping like Go
    assert "ünïcode" in res.out  # non-ASCII raw


def test_stdin_dash_in_a_whole_process(data_dir: Path) -> None:
    res = run_process(["remember", "-", "--tags", "piped"], data_dir=data_dir, stdin=b"from a real pipe\n")
    assert res.code == 0, res.err
    out = res.json()
    assert out["content"] == "from a real pipe\n" and out["tags"] == ["piped"]


# --- duplicates and the advisory diff (Decision 5, §4.9) -------------------------------------------


def test_exact_duplicate_is_skipped_and_logged(cli) -> None:
    first = cli.ok("remember", "The deploy script lives in ops/deploy.sh")
    res = cli("remember", "The deploy script lives in ops/deploy.sh")
    assert res.code == 0
    out = res.json()
    assert list(out) == ["id", "content", "action", "diff_suggestion", "replaced_id"]
    assert out["action"] == "skipped" and out["diff_suggestion"] == "DUPLICATE"
    assert out["replaced_id"] == first["id"] and out["id"] != first["id"]
    assert cli.ok("status")["total_insights"] == 1
    log = cli("log").out
    assert "diff-skip" in log and f"duplicate of {first['id'][:8]}" in log


def test_no_diff_inserts_an_exact_repeat(cli) -> None:
    first = cli.ok("remember", "Repeat me exactly")
    second = cli.ok("remember", "Repeat me exactly", "--no-diff")
    assert second["action"] == "added" and second["id"] != first["id"]
    assert "replaced_id" not in second
    assert cli.ok("status")["total_insights"] == 2


def test_duplicate_check_ignores_forgotten_insights(cli) -> None:
    first = cli.ok("remember", "Ephemeral note about caching")
    cli.ok("forget", first["id"])
    again = cli.ok("remember", "Ephemeral note about caching")
    assert again["action"] == "added"


ALPHA = "Project Alpha uses PostgreSQL database for persistent application storage"
BETA = "Project Beta uses PostgreSQL database for persistent application storage"
TAIL = (
    " with nightly backups replicas monitoring alerts dashboards failover runbooks audits "
    "migrations schemas indexes vacuum tuning partitions pooling encryption"
)


def test_alpha_beta_similar_is_update_advice_only(cli) -> None:
    # 7 shared of 9 distinct tokens: Jaccard 0.78 ⇒ UPDATE, but nothing is replaced (§4.9 e2e).
    alpha = cli.ok("remember", ALPHA)
    beta = cli.ok("remember", BETA)
    assert beta["diff_suggestion"] == "UPDATE" and beta["action"] == "added"
    assert "replaced_id" not in beta
    assert cli.ok("show", alpha["id"])["content"] == ALPHA
    assert cli.ok("status")["total_insights"] == 2


def test_alpha_beta_long_tail_is_duplicate_advice_but_added(cli) -> None:
    # 25 shared of 27 distinct tokens: Jaccard 0.93 > 0.9 ⇒ DUPLICATE advisory; still added.
    alpha = cli.ok("remember", ALPHA + TAIL)
    beta = cli.ok("remember", BETA + TAIL)
    assert beta["diff_suggestion"] == "DUPLICATE" and beta["action"] == "added"
    assert "replaced_id" not in beta
    assert "deleted_at" not in cli.ok("show", alpha["id"])
    assert cli.ok("status")["total_insights"] == 2


# --- entities (§4.3) ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("Our HttpServer is written in TypeScript", ["HttpServer", "TypeScript"]),
        ('Edit src/main.go and "docs/guide.md" today', ["src/main.go", "docs/guide.md"]),
        ("我们读了《三体》和「流浪地球」", ["三体", "流浪地球"]),
        ("We deploy with Docker and Kubernetes on AWS", ["AWS", "Docker", "Kubernetes"]),
        ("THE API AND HTTP FOR JWT", ["API", "HTTP", "JWT"]),
        ("IT IS UP TO YOU AND THE API", ["API"]),
    ],
)
def test_entity_extraction_worked_examples(cli, content: str, expected: list[str]) -> None:
    assert cli.ok("remember", content)["entities"] == expected


def test_entity_modes(cli) -> None:
    merge = cli.ok("remember", "Rust service one", "--entities", "Alpha, ,Rust")
    assert merge["entities"] == ["Alpha", "Rust"]  # provided first, extracted after, de-duplicated
    provided = cli.ok("remember", "Rust service two", "--entities", "Alpha", "--entity-mode", "provided")
    assert provided["entities"] == ["Alpha"]
    auto = cli.ok("remember", "Rust service three", "--entities", "Alpha", "--entity-mode", "auto")
    assert auto["entities"] == ["Rust"]
    # Index-aware path: "Alpha" is now a known entity, so a capitalised "Alpha" is admitted.
    known = cli.ok("remember", "Alpha shipped on time", "--entity-mode", "auto")
    assert known["entities"] == ["Alpha"]


def test_entity_edges_link_insights_sharing_an_entity(data_dir, capsys) -> None:
    a = ok_at(data_dir, capsys, T0, "remember", "Redis holds the session cache", "--source", "s1")
    b = ok_at(data_dir, capsys, T0 + timedelta(days=3), "remember", "Evict Redis keys hourly", "--source", "s2")
    assert b["edges_created"]["entity"] == 2
    edges = edge_rows(data_dir)
    assert edges[(b["id"], a["id"], "entity")] == (1.0, {"entity": "Redis"})
    assert edges[(a["id"], b["id"], "entity")] == (1.0, {"entity": "Redis"})


# --- temporal and causal edges (§4.4, §4.6) --------------------------------------------------------


def test_temporal_backbone_and_proximity_metadata(data_dir, capsys) -> None:
    a = ok_at(data_dir, capsys, T0, "remember", "alpha note", "--source", "user")
    b = ok_at(data_dir, capsys, T0 + timedelta(hours=2), "remember", "bravo note", "--source", "agent")
    # Different source: no backbone; proximity 2 h ⇒ weight 1/(1+2), hours_diff "2.00".
    assert b["edges_created"]["temporal"] == 2
    c = ok_at(data_dir, capsys, T0 + timedelta(hours=3), "remember", "charlie note", "--source", "user")
    assert c["edges_created"]["temporal"] == 4  # backbone pair to a + proximity pair to b
    edges = edge_rows(data_dir)
    assert edges[(b["id"], a["id"], "temporal")] == (pytest.approx(1 / 3), {"sub_type": "proximity", "hours_diff": "2.00"})
    assert edges[(a["id"], c["id"], "temporal")] == (1.0, {"sub_type": "backbone", "direction": "precedes"})
    assert edges[(c["id"], a["id"], "temporal")] == (1.0, {"sub_type": "backbone", "direction": "succeeds"})
    assert edges[(c["id"], b["id"], "temporal")] == (0.5, {"sub_type": "proximity", "hours_diff": "1.00"})
    assert edges[(b["id"], c["id"], "temporal")][1]["hours_diff"] == "1.00"
    # The backbone neighbour gets no proximity edge on top (same key would be overwritten).
    assert edges[(c["id"], a["id"], "temporal")][1]["sub_type"] == "backbone"


def test_proximity_ignores_insights_older_than_a_day(data_dir, capsys) -> None:
    ok_at(data_dir, capsys, T0, "remember", "old thing", "--source", "x")
    late = ok_at(data_dir, capsys, T0 + timedelta(hours=25), "remember", "new thing", "--source", "y")
    assert late["edges_created"]["temporal"] == 0


def test_qdrant_rust_causal_edge_prev_to_new(data_dir, capsys) -> None:
    prev = ok_at(data_dir, capsys, T0, "remember", "Rust performance is critical for the vector search engine")
    new = ok_at(data_dir, capsys, T0 + timedelta(minutes=5), "remember", "Chose Qdrant because Rust performance is critical")
    assert new["edges_created"]["causal"] == 1
    edges = edge_rows(data_dir)
    # The keyword is in the new text, so the new insight is the effect: prev → new.
    # Tokens: 6 each, 3 shared (rust, performance, critical) ⇒ overlap 0.5.
    assert edges[(prev["id"], new["id"], "causal")] == (0.5, {"overlap": "0.5000", "sub_type": "causes"})
    assert (new["id"], prev["id"], "causal") not in edges
    cands = new["causal_candidates"]
    assert cands and cands[0]["id"] == prev["id"] and cands[0]["hop"] == 1
    assert list(cands[0]) == ["id", "content", "category", "hop", "via_edge", "causal_signal", "suggested_sub_type"]
    assert cands[0]["causal_signal"] == "because" and cands[0]["suggested_sub_type"] == "causes"


def test_causal_edge_new_to_prev_and_subtypes(data_dir, capsys) -> None:
    prev = ok_at(data_dir, capsys, T0, "remember", "We added a cache layer so that checkout latency drops")
    new = ok_at(data_dir, capsys, T0 + timedelta(minutes=1), "remember", "Checkout latency dropped after the cache layer")
    edges = edge_rows(data_dir)
    weight, meta = edges[(new["id"], prev["id"], "causal")]  # only prev has the keyword ⇒ new → prev
    assert meta["sub_type"] == "enables" and meta["overlap"] == f"{weight:.4f}"
    blocker = ok_at(data_dir, capsys, T0 + timedelta(minutes=2), "remember", "The cache layer was blocked because checkout latency")
    meta = edge_rows(data_dir)[(new["id"], blocker["id"], "causal")][1]
    assert meta["sub_type"] == "prevents"


def test_semantic_candidates_fallback_without_embeddings(cli) -> None:
    first = cli.ok("remember", "Kafka consumers lag during peak traffic")
    second = cli.ok("remember", "Peak traffic makes Kafka consumers lag badly")
    cands = second["semantic_candidates"]
    assert cands[0]["id"] == first["id"]
    assert list(cands[0]) == ["id", "content", "category", "cosine", "auto_linked"]
    assert cands[0]["auto_linked"] is False and 0.1 <= cands[0]["cosine"] <= 1
    assert second["edges_created"]["semantic"] == 0 and second["embedded"] is False


# --- auto-prune (§4.8, Decision 6) --------------------------------------------------------------


def test_auto_prune_without_grace(data_dir, capsys, monkeypatch) -> None:
    monkeypatch.setenv("MNEMON_MAX_INSIGHTS", "3")
    monkeypatch.setenv("MNEMON_AUTO_PRUNE_MIN_AGE", "0")
    low = ok_at(data_dir, capsys, T0, "remember", "temporary scratch value", "--imp", "1")
    ok_at(data_dir, capsys, T0, "remember", "critical production secret location", "--imp", "5")
    ok_at(data_dir, capsys, T0, "remember", "standard fact about lunch", "--imp", "3")
    trigger = ok_at(data_dir, capsys, T0 + timedelta(seconds=1), "remember", "a fourth memory", "--imp", "2")
    assert trigger["auto_pruned"] == 1 and trigger["auto_pruned_ids"] == [low["id"]]
    assert run_at(data_dir, capsys, None, "show", low["id"]).code == 1
    assert query(data_dir, "SELECT COUNT(*) FROM edges WHERE source_id = ? OR target_id = ?", (low["id"],) * 2) == [(0,)]
    prune = query(data_dir, "SELECT insight_id, detail FROM oplog WHERE operation = 'prune'")
    assert prune == [(
        low["id"], f"auto-prune: over capacity (active=4, max=3, min_age=0s) trigger={trigger['id']}"
    )]
    assert ok_at(data_dir, capsys, None, "status")["total_insights"] == 3


def test_auto_prune_respects_grace_then_prunes_aged_rows(data_dir, capsys, monkeypatch) -> None:
    monkeypatch.setenv("MNEMON_MAX_INSIGHTS", "3")
    ids = {}
    for imp in (1, 2, 3, 4):
        ids[imp] = ok_at(data_dir, capsys, T0, "remember", f"memory with importance {imp}", "--imp", str(imp))
    assert ids[4]["auto_pruned"] == 0 and ids[4]["auto_pruned_ids"] == []  # all inside the 24 h grace
    assert ok_at(data_dir, capsys, T0, "status")["total_insights"] == 4
    # Simulate age: the grace is measured on stored_at (physical insert time), not created_at.
    query(data_dir, "UPDATE insights SET stored_at = '2026-02-16T09:00:00Z'")
    new = ok_at(data_dir, capsys, T0 + timedelta(minutes=1), "remember", "fifth memory arrives", "--imp", "3")
    assert new["auto_pruned"] == 2
    assert new["auto_pruned_ids"] == [ids[1]["id"], ids[2]["id"]]  # lowest stored EI first; imp 4 immune
    details = query(data_dir, "SELECT insight_id, detail FROM oplog WHERE operation = 'prune' ORDER BY id")
    expected = f"auto-prune: over capacity (active=5, max=3, min_age=24h0m0s) trigger={new['id']}"
    assert details == [(ids[1]["id"], expected), (ids[2]["id"], expected)]


def test_auto_prune_when_every_row_past_the_grace_is_immune(data_dir, capsys, monkeypatch) -> None:
    """Over the ceiling with every row past the grace immune (important, or kept by gc --keep) and the others
    inside it, a remember prunes nothing (its candidates read by their index ranges, not a walk of every row);
    once the others age past the grace they are pruned, lowest stored EI first, the immune ones never."""
    monkeypatch.setenv("MNEMON_MAX_INSIGHTS", "3")
    important = [ok_at(data_dir, capsys, T0, "remember", f"important memory {k}", "--imp", "4")["id"] for k in range(2)]
    kept = ok_at(data_dir, capsys, T0, "remember", "kept memory", "--imp", "1")["id"]
    assert ok_at(data_dir, capsys, T0, "gc", "--keep", kept)["immune"] is True
    query(data_dir, "UPDATE insights SET stored_at = '2026-02-10T09:00:00Z'")
    later = T0 + timedelta(minutes=1)
    fresh = []
    for k, imp in enumerate(("3", "1", "2")):
        out = ok_at(data_dir, capsys, later + timedelta(seconds=k), "remember", f"fresh memory {k}", "--imp", imp)
        assert out["auto_pruned"] == 0 and out["auto_pruned_ids"] == [], out
        fresh.append(out["id"])
    assert ok_at(data_dir, capsys, later, "status")["total_insights"] == 6
    query(data_dir, "UPDATE insights SET stored_at = '2026-02-10T09:00:00Z'")
    last = ok_at(data_dir, capsys, later + timedelta(minutes=1), "remember", "the last memory", "--imp", "3")
    assert last["auto_pruned_ids"] == [fresh[1], fresh[2], fresh[0]]  # importance 1, 2, 3: lowest stored EI first
    left = {row[0] for row in query(data_dir, "SELECT id FROM insights WHERE deleted_at IS NULL")}
    assert left == {*important, kept, last["id"]}


def test_max_insights_zero_disables_auto_prune(data_dir, capsys, monkeypatch) -> None:
    monkeypatch.setenv("MNEMON_MAX_INSIGHTS", "0")
    monkeypatch.setenv("MNEMON_AUTO_PRUNE_MIN_AGE", "0")
    for i in range(3):
        out = ok_at(data_dir, capsys, T0, "remember", f"unbounded memory {i}", "--imp", "1")
        assert out["auto_pruned"] == 0


def test_invalid_prune_env_warns_and_uses_default(data_dir, capsys, monkeypatch) -> None:
    monkeypatch.setenv("MNEMON_MAX_INSIGHTS", "lots")
    monkeypatch.setenv("MNEMON_AUTO_PRUNE_MIN_AGE", "-5h")
    res = run_at(data_dir, capsys, T0, "remember", "warned memory")
    assert res.code == 0
    assert 'MNEMON_MAX_INSIGHTS "lots"' in res.err and 'MNEMON_AUTO_PRUNE_MIN_AGE "-5h"' in res.err


# past int64, and what Python's int() reads but Go's Atoi does not: another script's digits, underscores, hex
@pytest.mark.parametrize("value", ["99999999999999999999", "-99999999999999999999", "٣", "1_000", "0x2", "1e3"])
def test_an_integer_setting_go_cannot_read_warns_and_uses_default(data_dir, capsys, monkeypatch, value) -> None:
    """Go's Atoi cannot read such a value: the warning and the default, as for "lots". It was used as given:
    max_insights 99999999999999999999 in gc's output (a negative one turned auto-prune off), and a dimensions
    field of 20 digits in every embedding request; "٣" and "1_000" were read as 3 and 1000."""
    monkeypatch.setenv("MNEMON_MAX_INSIGHTS", value)
    monkeypatch.setenv("MNEMON_EMBED_DIMENSIONS", value)
    res = run_at(data_dir, capsys, T0, "gc")
    assert res.code == 0, res.err
    assert res.err == (f'mnemon: ignoring invalid MNEMON_EMBED_DIMENSIONS "{value}"\n'
                       f'mnemon: ignoring invalid MNEMON_MAX_INSIGHTS "{value}"; using default 1000\n')
    assert json.loads(res.out)["max_insights"] == 1000


@pytest.mark.parametrize("age", ["2562048h", "106752d", "99999999999999999999h", "٣h", "٣d", "1٣m"])
def test_a_grace_longer_than_go_allows_warns_and_uses_default(data_dir, capsys, monkeypatch, age) -> None:
    # past Go's longest duration (~292 years): the prune cutoff overflowed and the pruning remember crashed;
    # and digits of another script, which Go's ParseDuration does not read ("٣h" was read as 3 hours)
    monkeypatch.setenv("MNEMON_MAX_INSIGHTS", "1")
    monkeypatch.setenv("MNEMON_AUTO_PRUNE_MIN_AGE", age)
    ok_at(data_dir, capsys, T0, "remember", "first memory over a tiny ceiling")
    res = run_at(data_dir, capsys, T0, "remember", "second memory triggers a prune")
    assert res.code == 0, res.err
    assert f'ignoring invalid MNEMON_AUTO_PRUNE_MIN_AGE "{age}"; using default 24h0m0s' in res.err
    assert json.loads(res.out)["auto_pruned"] == 0  # both inside the default 24 h grace
    assert ok_at(data_dir, capsys, T0, "status")["total_insights"] == 2
