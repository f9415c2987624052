"""Several machines writing one PostgreSQL store at once: no write lost, no cache diverging.

- An import in several transactions notices a write another machine committed between two of
  them, however close to its own commit (it used to read its "own" write mark after the commit).
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
