"""The hot index of a large import built in a child beside the finalize (``mnemon.engine.hotaside``).

Each import runs as a whole process (the child is forked before the store is opened, which a test
process holding connections could not promise), with the threshold lowered so a small draft
uses the child. The driver logs which process built or caught up an index, so the tests see who
did the work; the index left behind must equal a fresh build of the store in every case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest
from test_hotindex import db_file, fresh_build, same_content

from mnemon.engine import hot
from mnemon.store import hotindex

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.generate import generate_draft  # noqa: E402

_DRIVER = r"""
import os, sys
from mnemon.engine import hotaside as aside
from mnemon.engine.hot import catchup

data_dir, draft, threshold, log_path, mode = sys.argv[1:6]
aside.ASIDE_THRESHOLD = int(threshold)
aside.ASIDE_MIN_BYTES = 0
parent = os.getpid()
log = open(log_path, "a")

def who():
    return "parent" if os.getpid() == parent else "child"

build = catchup.Currency.build.__func__
def logged_build(cls, *a, **k):
    log.write(f"build {who()}\n"); log.flush()
    return build(cls, *a, **k)
catchup.Currency.build = classmethod(logged_build)

catch_up = catchup.Currency.catch_up
def logged_catch_up(self, conn, fp, sequences=None, replaced=()):
    log.write(f"catch_up {who()} {len(replaced)}\n"); log.flush()
    return catch_up(self, conn, fp, sequences, replaced)
catchup.Currency.catch_up = logged_catch_up

from mnemon.engine.hot import edges
reload = edges.EdgeList._reload_edges
def logged_reload(self, conn):
    log.write(f"reload {who()}\n"); log.flush()
    return reload(self, conn)
edges.EdgeList._reload_edges = logged_reload

if mode == "kill-child":  # the child dies after the first batch: the import builds the index
    send = aside.AsideBuild.send
    def send_then_kill(self, sequences):
        sent = send(self, sequences)
        os.kill(self.process.pid, 9)
        return sent
    aside.AsideBuild.send = send_then_kill

from mnemon.cli import main
sys.exit(main(["--data-dir", data_dir, "import", draft]))
"""


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(MNEMON_SERVER="off", MNEMON_EMBED_ENDPOINT="http://127.0.0.1:9", MNEMON_MAX_INSIGHTS="0")
    env.update(extra)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _run(tmp_path: Path, data_dir: Path, text: str, *, mode: str = "", threshold: int = 1, stdin: bool = False,
         **env: str) -> tuple[subprocess.CompletedProcess[bytes], list[str]]:
    """Import the draft ``text`` in a process of its own (from a file, or on stdin); return the
    process and the driver's log lines."""
    path = tmp_path / f"draft-{len(list(tmp_path.glob('draft-*')))}.json"
    path.write_text(text)
    log = tmp_path / "log.txt"
    log.write_text("")
    args = [sys.executable, "-c", _DRIVER, str(data_dir), "-" if stdin else str(path), str(threshold), str(log), mode]
    proc = subprocess.run(args, input=text.encode() if stdin else None, capture_output=True, timeout=120,
                          env=_env(**env))
    assert b"Traceback" not in proc.stderr
    return proc, log.read_text().split("\n")[:-1]


def _import(tmp_path: Path, data_dir: Path, draft: dict, **options):
    """Import ``draft``; return its report and the driver's log lines."""
    proc, log = _run(tmp_path, data_dir, json.dumps(draft), **options)
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout), log


def _with_backbone_edges(draft: dict) -> dict:
    """The draft with explicit temporal edges between items the backbone also links (same source,
    next in time): the finalize replaces those rows, so the child's index must drop them."""
    order = sorted(range(len(draft["insights"])), key=lambda k: (draft["insights"][k]["source"],
                                                                 draft["insights"][k]["created_at"], k))
    extra = [
        {"source_index": a, "target_index": b, "edge_type": "temporal", "weight": 0.3, "reason": "explicit"}
        for a, b in zip(order, order[1:])
        if draft["insights"][a]["source"] == draft["insights"][b]["source"]
        and draft["insights"][a]["created_at"] < draft["insights"][b]["created_at"]
    ][:40]
    return {**draft, "edges": draft["edges"] + extra}


def _left_index(data_dir: Path):
    """The index the import left, as the next process loads it, and the store's fingerprint."""
    conn = apsw.Connection(str(db_file(data_dir)), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        live = hotindex.fingerprint(conn)
    finally:
        conn.close()
    return hot._load(db_file(data_dir)), live


def test_the_child_builds_the_index_and_drops_the_rows_the_finalize_replaced(tmp_path):
    data_dir = tmp_path / "store"
    report, log = _import(tmp_path, data_dir, _with_backbone_edges(generate_draft(400, seed=3)))
    assert report["imported"] == 400
    assert log[0] == "build child"
    assert [line for line in log if "parent" in line] == []
    replaced = [int(line.split()[2]) for line in log if line.startswith("catch_up child")]
    assert replaced and replaced[-1] > 0  # the finalize's backbone replaced explicit temporal rows
    assert log.count("reload child") == 1  # the build's own load: the rows replaced were dropped, not reloaded
    left, live = _left_index(data_dir)
    assert left is not None and left.fp == live and left.delta_id == ""  # one base, current
    same_content(left, fresh_build(data_dir))


def test_into_a_store_with_an_index_and_rows_pruned_by_the_import(tmp_path):
    data_dir = tmp_path / "store"
    draft = generate_draft(600, seed=4)
    first = {**draft, "insights": draft["insights"][:300], "edges": []}
    second = {**draft, "insights": draft["insights"][300:], "edges": []}
    _import(tmp_path, data_dir, first)
    report, log = _import(tmp_path, data_dir, second, MNEMON_MAX_INSIGHTS="450", MNEMON_AUTO_PRUNE_MIN_AGE="0")
    assert report["imported"] == 300 and report["auto_pruned"] > 0
    assert log[0].startswith("catch_up child")  # the first import's index, caught up by the batches
    assert [line for line in log if "parent" in line and "build" in line] == []
    left, live = _left_index(data_dir)
    assert left is not None and left.fp == live
    same_content(left, fresh_build(data_dir))


def test_a_child_that_dies_leaves_the_build_to_the_import(tmp_path):
    data_dir = tmp_path / "store"
    report, log = _import(tmp_path, data_dir, generate_draft(300, seed=5), mode="kill-child")
    assert report["imported"] == 300
    assert "build parent" in log
    left, live = _left_index(data_dir)
    assert left is not None and left.fp == live
    same_content(left, fresh_build(data_dir))


def test_a_draft_on_stdin_is_built_beside_too(tmp_path):
    data_dir = tmp_path / "store"
    report, log = _import(tmp_path, data_dir, generate_draft(200, seed=8), stdin=True)
    assert report["imported"] == 200
    assert log[0] == "build child"
    left, _live = _left_index(data_dir)
    same_content(left, fresh_build(data_dir))


def test_an_invalid_draft_ends_the_child_and_writes_nothing(tmp_path):
    data_dir = tmp_path / "store"
    draft = generate_draft(100, seed=9)
    draft["insights"][60]["importance"] = 9
    proc, log = _run(tmp_path, data_dir, json.dumps(draft))
    assert proc.returncode == 1
    assert proc.stderr.decode().startswith("Error: ")
    assert log == [] and not data_dir.exists()


def test_a_small_draft_forks_no_child(tmp_path):
    data_dir = tmp_path / "store"
    _report, log = _import(tmp_path, data_dir, generate_draft(50, seed=6), threshold=51)
    assert log[0] == "build parent"
    assert [line for line in log if "child" in line] == []


_LIFETIME = r"""
import os, sys, apsw
from mnemon.engine.hotaside import AsideBuild
case = sys.argv[1]
if case == "connection-open":
    conn = apsw.Connection(":memory:")
    print(AsideBuild.fork())
elif case == "cancel":
    aside = AsideBuild.fork()
    aside.send({"x": ["a"]})
    aside.cancel()
    print(aside.process.exitcode, aside.join())
elif case == "orphan":
    aside = AsideBuild.fork()
    print(aside.process.pid, flush=True)
    os._exit(0)  # no cancel, no close: the child must notice by itself
"""


def _lifetime(case: str) -> str:
    proc = subprocess.run([sys.executable, "-c", _LIFETIME, case], capture_output=True, timeout=60, env=_env())
    assert proc.returncode == 0, proc.stderr.decode()
    assert b"Traceback" not in proc.stderr
    return proc.stdout.decode().strip()


def test_no_child_is_forked_while_this_process_holds_a_connection():
    assert _lifetime("connection-open") == "None"


def test_a_cancelled_child_exits_without_an_index():
    assert _lifetime("cancel") == "1 False"


def _exited(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "State:\tZ" in status


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_the_child_ends_when_its_parent_dies():
    pid = int(_lifetime("orphan"))
    deadline = time.monotonic() + 10
    while not _exited(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _exited(pid)
