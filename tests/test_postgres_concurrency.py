"""Several machines writing one PostgreSQL store at once: no write lost, no cache diverging.

- Every statement that writes the store runs inside a write transaction holding the store's advisory
  lock (``PgConnection.begin_write``, its first statement after BEGIN; released by COMMIT or
  ROLLBACK): ``install_lock_guard`` puts a trigger on every table of the schema that fails any
  write without it, whichever process makes it (CLI subprocesses, the warm server's workers).
  So rowids, the generation and the edge change log's sequence are drawn in commit order, which
  the caches' catch-up relies on (hot index by rowid and ``deleted_at``, vectors and the word
  table by rowid): no reader can move its cursor past a row that commits later.
- An import in several transactions notices a write another machine committed between two of
  them, however close to its own commit (it used to read its "own" write mark after the commit).
- The stress test: 3 data dirs ("machines") on one store, each with concurrent processes running
  real ``mnemon`` commands (machine 0 through the warm server), an embedding server on loopback
  (vectors and the word table of neighbour terms in play): remember (distinct and shared
  contents), link, forget, recall, search, show, gc --keep, import. Then every acknowledged write
  is stored, nothing else is, every failure was one ``Error:`` line, ``status`` equals SQL,
  ``doctor`` is clean on every machine, every machine's recall and search answer as a machine
  that never ran before (every cache built fresh), and every word table holds the same words.
  Always on: 3 x 2 processes x 10 commands (about 50 s); ``MNEMON_STRESS=1``: 3 x 3 processes x
  ``MNEMON_STRESS_OPS`` (40) commands.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, Cli

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'mnemon[postgres]')")
from psycopg import sql  # noqa: E402



def rows(conninfo: str, query: str, params: tuple = ()) -> list[tuple]:
    with psycopg.connect(conninfo) as conn:
        return [tuple(r) for r in conn.execute(query, params)]


def _subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
    env.update(MNEMON_EMBED_ENDPOINT="http://127.0.0.1:9", MNEMON_SERVER="off", PYTHONPATH=str(REPO))
    env.update(extra)
    return env


def _mnemon(data_dir: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mnemon", "--data-dir", str(data_dir), *argv], capture_output=True,
                          text=True, env=env or _subprocess_env(), cwd=REPO, timeout=300)


# --- an import in several transactions beside another machine's write ------------------------------


@pytest.mark.in_process
@pytest.mark.parametrize("kind", ["postgres", "sqlite"])
def test_an_import_sees_a_write_committed_right_after_one_of_its_batches(tmp_path, capsys, monkeypatch, request,
                                                                         kind) -> None:
    """Another machine's ``remember`` commits just after the import's first batch (here: while the
    import's caches catch up). The import must count it as a foreign write: its later batches reload
    their state and no edge key is taken as one that cannot exist yet. It read its write mark after
    its commit, so the other machine's commit was taken for its own; the backbone repair then
    COPYed a key the remember had written, a unique violation that failed the import after its
    batches had committed (on SQLite the same key was counted as a new edge: doctor's counters)."""
    from mnemon.engine import bulk, core
    from mnemon.store.postgres import connection

    monkeypatch.setattr(bulk, "IMPORT_BATCH", 2)
    monkeypatch.setattr(bulk, "IMPORT_BATCH_GROWTH", 0)
    monkeypatch.setattr(connection, "COPY_MIN_ROWS", 1)  # every fresh key goes by COPY
    here = Cli(tmp_path / "m1", capsys, served=False)
    # PostgreSQL: a second machine on the same store; SQLite: another process on the same file.
    other = Cli(tmp_path / "m2", capsys, served=False) if kind == "postgres" else here
    for cli in {here.data_dir: here, other.data_dir: other}.values():
        create = ("--postgres", request.getfixturevalue("pg_db")) if kind == "postgres" else ()
        assert cli("store", "create", "team", *create).code == 0
    # Batch 1 holds the source's two latest items, batch 2 two older ones: after both, the
    # source's newest imported item is batch 1's last, which the remember links to (backbone).
    draft = {"schema_version": "1", "source": "notes", "insights": [
        {"content": "Kafka consumer lag alert tuned", "created_at": "2026-02-03T10:00:00Z"},
        {"content": "Kafka retention raised to seven days", "created_at": "2026-02-04T10:00:00Z"},
        {"content": "Kafka cluster created for billing", "created_at": "2026-01-01T10:00:00Z"},
        {"content": "Kafka topics named per team", "created_at": "2026-01-02T10:00:00Z"},
    ]}  # fmt: skip
    path = tmp_path / "draft.json"
    path.write_text(json.dumps(draft), encoding="utf-8")
    real = core.EngineBase.after_write
    foreign: list[subprocess.CompletedProcess[str]] = []

    def after_write(self: core.EngineBase) -> None:
        real(self)
        if not foreign:  # after the first batch's commit: the other machine writes
            foreign.append(_mnemon(other.data_dir, "--store", "team", "remember", "Kafka broker disk replaced",
                                   "--source", "notes"))

    monkeypatch.setattr(core.EngineBase, "after_write", after_write)
    res = here("--store", "team", "import", str(path))
    assert foreign and foreign[0].returncode == 0, foreign[0].stderr
    assert res.code == 0, res.err
    assert json.loads(res.out)["imported"] == 4
    remembered = json.loads(foreign[0].stdout)["id"]
    # The remember's row joined the source's backbone after the import's newest item.
    newest = here.ok("--store", "team", "related", remembered, "--edge", "temporal", "--depth", "1")
    assert [r["id"] for r in newest] == [here.ok("--store", "team", "search", "retention")[0]["id"]]
    for cli in {here.data_dir: here, other.data_dir: other}.values():
        report = cli.ok("--store", "team", "doctor")
        assert report["ok"] is True, [c for c in report["checks"] if not c["ok"]]


# --- every write holds the store's lock ---------------------------------------------------------------

_GUARD = """CREATE OR REPLACE FUNCTION {schema}.test_lock_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
                   AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = {key}) THEN
        RAISE EXCEPTION 'test guard: % on % without the store lock', TG_OP, TG_TABLE_NAME;
    END IF;
    RETURN NULL;
END $$"""


def install_lock_guard(conninfo: str, schema: str) -> list[str]:
    """A statement trigger on every table of the store's schema that fails any INSERT, UPDATE,
    DELETE, TRUNCATE or COPY made without the store's advisory lock; return the tables."""
    from mnemon.store.postgres.connection import lock_key

    with psycopg.connect(conninfo, autocommit=True) as conn:
        name = sql.Identifier(schema)
        conn.execute(sql.SQL(_GUARD.format(schema="{}", key=lock_key(schema))).format(name))
        tables = [r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                                             "AND table_type = 'BASE TABLE' ORDER BY 1", (schema,))]
        for table in tables:
            conn.execute(sql.SQL("CREATE TRIGGER test_lock_guard BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON {}.{} "
                                 "FOR EACH STATEMENT EXECUTE FUNCTION {}.test_lock_guard()").format(
                name, sql.Identifier(table), name))
    return tables


def test_the_lock_guard_refuses_a_write_without_the_store_lock(tmp_path, capsys, pg_db) -> None:
    """The guard the stress test relies on: a write without the lock fails, one with it passes."""
    from mnemon.store.postgres.connection import lock_key

    cli = Cli(tmp_path / "m", capsys, served=False)
    assert cli("store", "create", "team", "--postgres", pg_db).code == 0
    tables = install_lock_guard(pg_db, "mnemon_team")
    assert {"insights", "edges", "oplog", "mnemon_meta", "edge_changes", "mnemon_counts"} <= set(tables)
    with psycopg.connect(pg_db, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.RaiseException, match="without the store lock"):
            conn.execute("UPDATE mnemon_team.mnemon_meta SET value = value WHERE key = 'generation'")
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key("mnemon_team"),))
            conn.execute("UPDATE mnemon_team.mnemon_meta SET value = value WHERE key = 'generation'")
    assert cli.ok("--store", "team", "remember", "the guard lets a locked write through")["action"] == "added"


# --- the stress test ---------------------------------------------------------------------------------

STRESS = os.environ.get("MNEMON_STRESS") == "1"  # read at import: the autouse fixture clears MNEMON_*
STRESS_OPS = int(os.environ.get("MNEMON_STRESS_OPS", "40"))
MACHINES = 3
QUERIES = ["kafka billing latency replica", "schema backup cache deploy", "quota index ledger router vacuum",
           "rotate the credentials before the audit"]  # fmt: skip
_RESULT_KEYS = ("id", "score", "matched_via", "confidence", "relevance", "intent")


def _answer(out: str) -> object:
    """A recall's or search's answer without what the access bumps move (counts, timestamps)."""
    raw = json.loads(out)
    results = raw["results"] if isinstance(raw, dict) else raw
    kept = [{k: r[k] for k in _RESULT_KEYS if k in r} for r in results]
    return {"results": kept, "hint": raw.get("hint")} if isinstance(raw, dict) else kept


def _error_line(record: dict) -> str:
    """A failed command's one ``Error:`` line (asserting there is exactly one, and no traceback)."""
    err = str(record["err"])
    lines = [line for line in err.splitlines() if line.startswith("Error: ")]
    assert record["code"] == 1 and len(lines) == 1 and "Traceback" not in err, record
    return lines[0]


@pytest.mark.parametrize("size", [
    pytest.param((2, 10), id="short"),
    pytest.param((3, STRESS_OPS), id="long", marks=pytest.mark.skipif(not STRESS, reason="MNEMON_STRESS=1 runs it")),
])  # fmt: skip
def test_three_machines_write_one_store_at_once_and_no_cache_diverges(tmp_path, capsys, pg_db, size,
                                                                     monkeypatch) -> None:
    from tests.embed_server import EmbedServer
    from tests.pg_stress_worker import SHARED

    procs, ops = size
    with EmbedServer(dim=64) as embed:
        env = _subprocess_env(MNEMON_EMBED_ENDPOINT=embed.url, MNEMON_EMBED_MODEL="all-minilm-l6-v2")
        machines = [tmp_path / f"machine{k}" for k in range(MACHINES)]
        for data_dir in machines:
            made = _mnemon(data_dir, "store", "create", "team", "--postgres", pg_db, env=env)
            assert made.returncode == 0, made.stderr
        install_lock_guard(pg_db, "mnemon_team")
        served = dict(env, MNEMON_SERVER="require")  # machine 0's commands go through the warm server
        started = subprocess.run([sys.executable, "-m", "mnemon", "server", "start"], env=served, capture_output=True,
                                 text=True, timeout=300)
        assert started.returncode == 0, started.stderr
        try:
            workers = []
            for m, data_dir in enumerate(machines):
                for p in range(procs):
                    log = tmp_path / f"log-{m}-{p}.jsonl"
                    workers.append((log, subprocess.Popen(
                        [sys.executable, "-m", "tests.pg_stress_worker", str(data_dir), f"m{m}p{p}", str(ops),
                         str(1000 * m + p), str(log)],
                        cwd=REPO, env=served if m == 0 else env, stderr=subprocess.PIPE)))  # fmt: skip
            for _log, worker in workers:
                _, err = worker.communicate(timeout=1800)
                assert worker.returncode == 0, err.decode()[-2000:]
            records = [json.loads(line) for log, _ in workers for line in log.read_text().splitlines()]
            _check_outcomes(pg_db, records, SHARED, machines, env, tmp_path, capsys, monkeypatch)
        finally:
            subprocess.run([sys.executable, "-m", "mnemon", "server", "stop"], env=served, capture_output=True, timeout=120)


def _check_outcomes(pg_db: str, records: list[dict], shared: list[str], machines: list[Path], env: dict[str, str],
                    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    failed = [r for r in records if r["code"] != 0]
    errors = [_error_line(r) for r in failed]
    ok = [r for r in records if r["code"] == 0]
    every = dict(rows(pg_db, "SELECT id, content FROM mnemon_team.insights"))
    active = dict(rows(pg_db, "SELECT id, content FROM mnemon_team.insights WHERE deleted_at IS NULL"))
    edges = set(rows(pg_db, "SELECT source_id, target_id, edge_type FROM mnemon_team.edges"))
    forgotten = {r["id"] for r in ok if r["op"] == "forget"}
    remembered: dict[str, str] = {}
    for r in ok:
        if r["op"] in ("remember", "shared"):
            out = json.loads(r["out"])  # a skipped exact duplicate names the stored memory (§ duplicates)
            remembered[out["replaced_id"] if out["action"] == "skipped" else out["id"]] = r["content"]
        elif r["op"] == "import":
            for item in json.loads(r["out"])["results"]:
                remembered[item["id"]] = item["content"]
    # Every acknowledged memory is stored with its content, and active unless a forget of it succeeded.
    for insight_id, content in remembered.items():
        assert every.get(insight_id) == content, "\n".join(r["out"] for r in records if insight_id in r["out"])
        assert (insight_id in active) == (insight_id not in forgotten), insight_id
    # Nothing stored that no command reported (a failed command wrote nothing): every row is acknowledged.
    assert set(every) == set(remembered), set(every) ^ set(remembered)
    # Each content is stored once among the active memories (the exact-duplicate rule across machines).
    contents = list(active.values())
    assert all(contents.count(c) == 1 for c in contents), [c for c in set(contents) if contents.count(c) > 1]
    # Every acknowledged link (and import edge) between two memories still active is there.
    for r in ok:
        if r["op"] == "link" and r["source"] in active and r["target"] in active:
            assert (r["source"], r["target"], "causal") in edges, r
        elif r["op"] == "import":
            first, second = (item["id"] for item in json.loads(r["out"])["results"][:2])
            if first in active and second in active:
                assert (first, second, "causal") in edges, r
    # The machines' view: status equals SQL, doctor is clean, and every answer equals a fresh machine's
    # (one that never ran: every cache built now). Machine 0 answers through the warm server; the others
    # in this process (the CLI's own code path over their files).
    fresh = tmp_path / "fresh"
    made = _mnemon(fresh, "store", "create", "team", "--postgres", pg_db, env=env)
    assert made.returncode == 0, made.stderr
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", env["MNEMON_EMBED_ENDPOINT"])
    monkeypatch.setenv("MNEMON_EMBED_MODEL", env["MNEMON_EMBED_MODEL"])
    answers: dict[str, list[object]] = {}
    for data_dir in [fresh, *machines]:
        cli = Cli(data_dir, capsys, served=data_dir == machines[0])
        if cli.served:
            monkeypatch.setenv("MNEMON_SERVER", "require")
        status = cli.ok("--store", "team", "status")
        (deleted,) = rows(pg_db, "SELECT COUNT(*) FROM mnemon_team.insights WHERE deleted_at IS NOT NULL")[0]
        (oplog,) = rows(pg_db, "SELECT COUNT(*) FROM mnemon_team.oplog")[0]
        (n_edges,) = rows(pg_db, "SELECT COUNT(*) FROM mnemon_team.edges")[0]
        got = (status["total_insights"], status["deleted_insights"], status["edge_count"], status["oplog_count"])
        assert got == (len(active), deleted, n_edges, oplog), data_dir.name
        report = cli.ok("--store", "team", "doctor")
        assert report["ok"] is True, (data_dir.name, [c for c in report["checks"] if not c["ok"]])
        for _ in range(2 if data_dir == fresh else 1):  # the fresh machine's word table: whole after the first pass
            answers[data_dir.name] = [
                _answer(cli(*(["--readonly"] if readonly else []), "--store", "team", command, query).out)
                for query in QUERIES for command, readonly in (("recall", False), ("search", False), ("recall", True))
            ]  # fmt: skip
        monkeypatch.setenv("MNEMON_SERVER", "off")
    for data_dir in machines:
        assert answers[data_dir.name] == answers["fresh"], data_dir.name
    # The word tables (neighbour terms) hold every word of the store, on every machine.
    from mnemon.store import wordvectors

    words = {name: set(table.words) if (table := wordvectors.read(
        data_dir / "data" / "team" / f"postgres-{_store_id(pg_db)}", "all-minilm-l6-v2", 64)) else None
        for name, data_dir in [("fresh", fresh), *[(m.name, m) for m in machines]]}  # fmt: skip
    assert words["fresh"], words
    assert all(w == words["fresh"] for w in words.values()), {k: len(v or ()) for k, v in words.items()}
    with capsys.disabled():  # shown with -s: what ran
        ops = sorted({r["op"] for r in records})
        print(f"\n{len(records)} commands on {len(machines)} machines ({len(ok)} ok, {len(failed)} failed: "
              f"{sorted(set(errors))}); by op: {[(op, sum(r['op'] == op for r in records)) for op in ops]}; "
              f"store: {len(active)} active, {len(every) - len(active)} forgotten, {len(edges)} edges")


def _store_id(conninfo: str) -> str:
    return rows(conninfo, "SELECT value FROM mnemon_team.mnemon_meta WHERE key = 'store_id'")[0][0]
