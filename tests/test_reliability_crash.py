"""Crashes: SIGKILL at seeded random moments of writing commands, then prove nothing was lost or torn.

A forked child (mnemon already imported, so a kill cycle costs milliseconds, not a 300 ms
interpreter start) loops ``mnemon.cli.main`` over a seeded mix of ``remember``, ``link``,
``forget``, ``gc``, ``gc --keep``, ``import`` and ``recall`` (which writes access counts and the
derived hot index) and reports, after each command returned, what it committed. The parent kills it
with SIGKILL after a seeded delay. After every kill:

- ``PRAGMA integrity_check`` is ok and ``PRAGMA foreign_key_check`` is empty;
- every id reported before the kill is present (forgotten ones soft-deleted, links present);
- no half-written insight row and no edge to a missing or deleted insight;
- every few kills, and at the end, the real ``doctor`` (whose derived-index check reads the
  hot index) is clean after the next ``recall`` caught the index up.

A smaller test kills whole ``python -m mnemon`` processes (interpreter start included), and one
kills ``embed --all`` against the local embedding server. ``MNEMON_RELIABILITY_SCALE=N``
multiplies the counts.
"""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import apsw
import pytest

from mnemon.store import check, ranges
from tests.conftest import REPO

SCALE = max(1, int(os.environ.get("MNEMON_RELIABILITY_SCALE", "1")))
FORK_KILLS = 150 * SCALE
PROCESS_KILLS = 8 * SCALE
EMBED_KILLS = 10 * SCALE
DOCTOR_EVERY = 25


def _db(data_dir: Path) -> Path:
    return data_dir / "data" / "default" / "mnemon.db"


def _run(data_dir: Path, *args: str) -> tuple[int, str]:
    from mnemon.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["--data-dir", str(data_dir), *args])
    return code, out.getvalue()


def _report(fd: int, kind: str, *values: str) -> None:
    os.write(fd, (" ".join((kind, *values)) + "\n").encode())


def _child(data_dir: Path, draft: Path, seed: int, fd: int) -> None:
    """Loop writing commands forever; report each committed effect on ``fd`` (one atomic write)."""
    rng = random.Random(seed)
    mine: list[str] = []
    n = 0
    while True:
        n += 1
        op = rng.choices(["remember", "link", "forget", "gc", "keep", "import", "recall"], [8, 3, 1, 1, 1, 1, 2])[0]
        if op == "remember" or len(mine) < 2:
            text = f"seed {seed} memory {n} about {rng.choice(['Python', 'Go', 'SQLite', 'numba'])} because of {n % 5}"
            code, out = _run(data_dir, "remember", text, "--imp", str(rng.randint(1, 5)))
            if code == 0:
                new_id = json.loads(out)["id"]
                mine.append(new_id)
                _report(fd, "INSIGHT", new_id)
        elif op == "link":
            a, b = rng.sample(mine, 2)
            if _run(data_dir, "link", a, b, "--type", "causal", "--weight", "0.7")[0] == 0:
                _report(fd, "LINK", a, b)
        elif op == "forget":
            victim = mine.pop(rng.randrange(len(mine)))
            if _run(data_dir, "forget", victim)[0] == 0:
                _report(fd, "FORGOT", victim)
        elif op == "gc":
            _run(data_dir, "gc")
        elif op == "keep":
            _run(data_dir, "gc", "--keep", rng.choice(mine))
        elif op == "import":
            code, out = _run(data_dir, "import", str(draft))
            if code == 0:
                for item in json.loads(out)["results"]:
                    if item.get("id"):
                        _report(fd, "INSIGHT", item["id"])
        else:
            _run(data_dir, "recall", rng.choice(["Python", "why Go", "SQLite memory"]))


class Ledger:
    """What the killed children said they committed."""

    def __init__(self) -> None:
        self.insights: set[str] = set()
        self.forgotten: set[str] = set()
        self.links: set[tuple[str, str]] = set()

    def feed(self, text: str) -> None:
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 2:
                continue  # a line torn by the kill carries nothing acknowledged
            if parts[0] == "INSIGHT":
                self.insights.add(parts[1])
            elif parts[0] == "FORGOT":
                self.forgotten.add(parts[1])
            elif parts[0] == "LINK" and len(parts) == 3:
                self.links.add((parts[1], parts[2]))


def verify(db: Path, ledger: Ledger) -> None:
    """Open like the next command would (WAL recovery included) and check everything."""
    conn = apsw.Connection(str(db))
    try:
        assert check.integrity(conn) == []
        assert check.foreign_keys(conn) == []
        assert ranges.insight_findings(conn) == []
        assert check.dangling_edges(conn) == []
        rows = dict(conn.execute("SELECT id, deleted_at FROM insights"))
        missing = ledger.insights - set(rows)
        assert not missing, f"acknowledged insights lost: {sorted(missing)[:5]}"
        for gone in ledger.forgotten:
            assert rows.get(gone) is not None, f"forgotten insight {gone} came back"
        edges = set(conn.execute("SELECT source_id, target_id FROM edges WHERE edge_type = 'causal'"))
        for a, b in ledger.links:
            if a not in ledger.forgotten and b not in ledger.forgotten and rows.get(a) is None and rows.get(b) is None:
                assert (a, b) in edges and (b, a) in edges, f"acknowledged link {a}->{b} lost"
    finally:
        conn.close()


def doctor_clean(data_dir: Path) -> None:
    code, _ = _run(data_dir, "recall", "memory")  # the next call catches the derived index up
    assert code == 0
    code, out = _run(data_dir, "doctor")
    report = json.loads(out)
    assert code == 0 and report["ok"], [c for c in report["checks"] if not c["ok"]]


def _write_draft(path: Path) -> None:
    draft = {
        "schema_version": "1",
        "insights": [{"content": f"imported fact {i} about Go because of SQLite"} for i in range(6)],
        "edges": [{"source_index": 0, "target_index": 1, "edge_type": "causal"}],
    }
    path.write_text(json.dumps(draft))


def test_sigkill_at_random_moments_loses_and_tears_nothing(data_dir: Path, tmp_path: Path) -> None:
    rng = random.Random(20260101)
    draft = tmp_path / "draft.json"
    _write_draft(draft)
    assert _run(data_dir, "remember", "seed memory so the store exists")[0] == 0
    ledger = Ledger()
    started = time.monotonic()
    for kill in range(FORK_KILLS):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: never returns into pytest
            os.close(read_fd)
            try:
                _child(data_dir, draft, seed=kill, fd=write_fd)
            finally:
                os._exit(0)
        os.close(write_fd)
        # Delays cover the open, the first transaction and later ones; some kill almost at once.
        time.sleep(rng.choice([rng.uniform(0.0, 0.01), rng.uniform(0.01, 0.08), rng.uniform(0.08, 0.25)]))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        chunks = []
        while chunk := os.read(read_fd, 65536):
            chunks.append(chunk)
        os.close(read_fd)
        ledger.feed(b"".join(chunks).decode("utf-8", "replace"))
        verify(_db(data_dir), ledger)
        if kill % DOCTOR_EVERY == DOCTOR_EVERY - 1:
            doctor_clean(data_dir)
    doctor_clean(data_dir)
    assert len(ledger.insights) > FORK_KILLS // 2, "children committed too little to prove anything"
    print(f"{FORK_KILLS} kills, {len(ledger.insights)} acknowledged insights, {time.monotonic() - started:.1f} s")


def _spawn(data_dir: Path, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    full_env = dict(os.environ, PYTHONPATH=str(REPO), **(env or {}))
    return subprocess.Popen(
        [sys.executable, "-m", "mnemon", "--data-dir", str(data_dir), *args],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=full_env,
    )


def test_sigkill_of_whole_processes_including_startup(data_dir: Path, tmp_path: Path) -> None:
    """Real CLI processes, killed anywhere from interpreter start to the final checkpoint on close."""
    rng = random.Random(7)
    draft = tmp_path / "draft.json"
    _write_draft(draft)
    assert _run(data_dir, "remember", "first memory")[0] == 0
    ledger = Ledger()
    for kill in range(PROCESS_KILLS):
        args = rng.choice([["remember", f"process memory {kill} about Go"], ["import", str(draft)], ["gc"]])
        procs = [_spawn(data_dir, args), _spawn(data_dir, ["remember", f"parallel memory {kill}"])]
        time.sleep(rng.uniform(0.2, 1.2))
        for proc in procs:
            proc.send_signal(signal.SIGKILL)
        for proc in procs:
            out, _ = proc.communicate()
            if proc.returncode == 0:  # finished before the kill: its output is acknowledged
                data = json.loads(out)
                ids = [data["id"]] if "id" in data else [r["id"] for r in data.get("results", []) if r.get("id")]
                ledger.insights.update(ids)
        verify(_db(data_dir), ledger)
    doctor_clean(data_dir)


def _children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (Linux /proc)."""
    try:
        listed = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [int(c) for c in listed]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's")
def test_a_killed_import_leaves_no_preparing_worker_behind(data_dir: Path, tmp_path: Path) -> None:
    """A large draft is prepared by a pool of forked workers; a parent killed with SIGKILL left them waiting on
    the pool's queues for ever, holding the store's files open. They now end with their parent."""
    from mnemon.engine import prepare

    draft = tmp_path / "large.json"  # under 1 MiB: no index-building child, every child is a pool worker
    count = prepare.PARALLEL_THRESHOLD + 3_000
    draft.write_text(json.dumps({"schema_version": "1", "insights": [
        {"content": f"memory {i} about billing and cache node {i % 97}"} for i in range(count)]}))
    assert draft.stat().st_size < 1 << 20
    proc = subprocess.Popen(
        [sys.executable, "-m", "mnemon", "--data-dir", str(data_dir), "import", str(draft), "--no-diff"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    expected = max(1, min(prepare.PARALLEL_WORKERS, os.cpu_count() or 1))
    workers: list[int] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(workers) < expected and proc.poll() is None:
        workers = _children(proc.pid)
        time.sleep(0.01)
    try:
        assert proc.poll() is None and len(workers) == expected, "the import ended before its pool started"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(c) for c in workers):
            time.sleep(0.05)
        assert not [c for c in workers if _alive(c)]
    finally:
        for c in workers:
            if _alive(c):
                os.kill(c, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for a reaper (init reaps an orphan's child at once)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_sigkill_during_embed_all(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from embed_server import EmbedServerProcess

    for i in range(40):
        assert _run(data_dir, "remember", f"unembedded memory {i} about vectors")[0] == 0
    rng = random.Random(11)
    server = EmbedServerProcess(dim=32, extra_args=["--delay", "0.005"])
    try:
        for _ in range(EMBED_KILLS):
            proc = _spawn(data_dir, ["embed", "--all"], env={"MNEMON_EMBED_ENDPOINT": server.url})
            time.sleep(rng.uniform(0.3, 1.5))
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            verify(_db(data_dir), Ledger())
            conn = apsw.Connection(str(_db(data_dir)))
            try:
                assert check.bad_embeddings(conn, "float64") == []
            finally:
                conn.close()
        monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
        assert _run(data_dir, "embed", "--all")[0] == 0
        doctor_clean(data_dir)
    finally:
        server.close()
