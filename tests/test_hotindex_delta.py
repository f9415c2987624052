"""The hot index as a base plus a small delta segment: writes never rewrite the base, answers
over base + delta equal a fresh build's, the delta is folded into a new base past a threshold,
``--readonly`` writes nothing, and a crash between a commit and the delta write (or a delta for
another base, or garbage) never gives a wrong answer."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import apsw
import pytest
from conftest import REPO
from test_hotindex import _cached_index, db_file, fresh_build, hot_file, same_content

from mnemon.engine import hot
from mnemon.store import hotindex


def delta_file(data_dir: Path) -> Path:
    return hotindex.delta_path(db_file(data_dir))


def files(data_dir: Path) -> dict[str, bytes]:
    """The store folder's files and the derived folder's (``mnemon.db.index/...``), by relative name."""
    folder = db_file(data_dir).parent
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def base_identity(data_dir: Path) -> str:
    return hashlib.sha256(hot_file(data_dir).read_bytes()).hexdigest()


def fresh_base(cli, data_dir: Path, query: str) -> None:
    """Drop the index files; the next recall builds and persists a base with no delta."""
    for p in (hot_file(data_dir), delta_file(data_dir), hotindex.stamp_path(db_file(data_dir))):
        p.unlink(missing_ok=True)
    cli.ok("recall", query)


def carried_entities(data_dir: Path) -> set[str]:
    conn = apsw.Connection(str(db_file(data_dir)))
    try:
        rows = conn.execute("SELECT entities FROM insights WHERE deleted_at IS NULL").fetchall()
    finally:
        conn.close()
    return {e for (raw,) in rows for e in json.loads(raw or "[]")}


QUERIES = ("otter", "otters river", "quokka smiles", "kelp forest otter", "Rust harbour", "zzz nothing",
           "why does the otter float near quokka smiles")  # WHY: causal order over delta edges


def answers(cli, data_dir: Path) -> dict[str, object]:
    """Readonly recall and search for every query (no access bumps, so runs are comparable)."""
    out: dict[str, object] = {}
    for q in QUERIES:
        out[f"recall:{q}"] = cli.ok("--readonly", "recall", q, "--verbose", "--limit", "8")
        out[f"search:{q}"] = cli.ok("--readonly", "search", q)
    return out


def answers_of_a_fresh_build(cli, data_dir: Path) -> dict[str, object]:
    saved = {p: p.read_bytes() for p in (hot_file(data_dir), delta_file(data_dir),
                                         hotindex.stamp_path(db_file(data_dir))) if p.exists()}  # fmt: skip
    for p in saved:
        p.unlink()
    try:
        return answers(cli, data_dir)  # readonly: built in memory from SQLite
    finally:
        for p, raw in saved.items():
            p.write_bytes(raw)


def test_writes_leave_the_base_alone_and_base_plus_delta_equals_a_fresh_build(cli, data_dir: Path) -> None:
    ids = [cli.ok("remember", f"Otter number {i} floats near Rust harbour", "--source", f"s{i % 2}")["id"]
           for i in range(6)]  # fmt: skip
    fresh_base(cli, data_dir, "otter")
    base = base_identity(data_dir)
    new = [
        cli.ok("remember", "Quokka smiles for photos in the kelp forest", "--tags", "quokka,smiles")["id"],
        cli.ok("remember", "Otters hold hands in the river, Rust harbour again", "--cat", "fact")["id"],
        cli.ok("remember", "A brand-new word: zyzzyva otter", "--imp", "5")["id"],
    ]
    cli.ok("forget", ids[1])
    cli.ok("link", ids[0], new[0], "--type", "causal", "--weight", "0.6")
    cli.ok("remember", "Kelp forest otter census", "--entities", "Kelp")
    assert base_identity(data_dir) == base  # no write rewrote the big file
    assert delta_file(data_dir).exists() and delta_file(data_dir).stat().st_size < 200_000
    cached = _cached_index(data_dir)
    assert cached.delta_id and cached.base_n < cached.n  # a real delta segment was read back
    big, delta = cached.edge_arrays()
    assert delta is not None and delta[0].shape[0] == cached.n + 1  # the new edge rows, read beside...
    assert big[0].shape[0] == cached.base_n + 1
    assert all(not a.flags.owndata and not a.flags.writeable for a in big)  # ...the mapped base CSR, not a copy
    same_content(cached, fresh_build(data_dir))
    # the base's per-entity live counts, adjusted by the delta and the forgotten row, give the same
    # known entities as reading every active row's entities
    assert "entity_live" in cached._derived
    assert cached.known_entities() == fresh_build(data_dir).known_entities() == carried_entities(data_dir)
    assert answers(cli, data_dir) == answers_of_a_fresh_build(cli, data_dir)
    cli.ok("recall", "otter")  # a reader verifies the edges; still no merge below the threshold
    assert base_identity(data_dir) == base
    same_content(_cached_index(data_dir), fresh_build(data_dir))
    assert answers(cli, data_dir) == answers_of_a_fresh_build(cli, data_dir)


@pytest.mark.in_process  # patches this process
def test_delta_is_merged_into_a_new_base_past_the_threshold(cli, data_dir: Path, monkeypatch) -> None:
    monkeypatch.setattr(hot, "MERGE_MIN_ROWS", 4)
    monkeypatch.setattr(hot, "MERGE_FRACTION", 0.0)
    for i in range(3):
        cli.ok("remember", f"Heron {i} waits by the pond")
    fresh_base(cli, data_dir, "heron")
    base = base_identity(data_dir)
    for i in range(3):
        cli.ok("remember", f"Heron {i} caught a fish")
    assert base_identity(data_dir) == base and delta_file(data_dir).exists()
    assert _cached_index(data_dir).delta_rows() == 3
    cli.ok("remember", "Heron flew off")  # the fourth delta row: folded into a new base
    assert base_identity(data_dir) != base and not delta_file(data_dir).exists()
    merged = _cached_index(data_dir)
    assert not merged.delta_id and merged.base_n == merged.n == 7
    conn = apsw.Connection(str(db_file(data_dir)))
    live = hotindex.fingerprint(conn)
    conn.close()
    assert merged.fp == live
    assert merged.vocab == sorted(merged.vocab)
    same_content(merged, fresh_build(data_dir))
    assert answers(cli, data_dir) == answers_of_a_fresh_build(cli, data_dir)


def test_readonly_catches_up_base_plus_delta_in_memory_and_writes_nothing(cli, data_dir: Path) -> None:
    cli.ok("remember", "Otter dens are called holts")
    cli.ok("recall", "otter")
    cli.ok("remember", "Otter cubs stay a year")  # delta written
    late = cli.ok("remember", "Otter whiskers sense prey", "--no-diff")["id"]  # no index in process: delta stale
    before = files(data_dir)
    found = cli.ok("--readonly", "recall", "otter whiskers", "--verbose")
    assert late in {r["insight"]["id"] for r in found["results"]}
    assert late in {h["id"] for h in cli.ok("--readonly", "search", "whiskers")}
    assert files(data_dir) == before


def test_crash_between_commit_and_delta_write_never_gives_a_wrong_answer(cli, data_dir: Path) -> None:
    cli.ok("remember", "Otters use stones as tools")
    cli.ok("recall", "otter")
    cli.ok("remember", "Otters groom their fur")
    old_delta = delta_file(data_dir).read_bytes()
    gone = cli.ok("remember", "Otters eat sea urchins")["id"]
    kept = cli.ok("remember", "Otters sleep floating")["id"]
    cli.ok("forget", gone)
    delta_file(data_dir).write_bytes(old_delta)  # as if killed before each later delta write
    out = cli.ok("recall", "otters", "--verbose")
    got = {r["insight"]["id"] for r in out["results"]}
    assert kept in got and gone not in got
    same_content(_cached_index(data_dir), fresh_build(data_dir))
    assert answers(cli, data_dir) == answers_of_a_fresh_build(cli, data_dir)


@pytest.mark.parametrize("damage", ["foreign-base", "garbage", "truncated"])
def test_a_delta_that_does_not_belong_to_the_base_is_ignored(cli, data_dir: Path, damage: str) -> None:
    cli.ok("remember", "Otters live on every continent but two")
    cli.ok("recall", "otter")
    new = cli.ok("remember", "Otters whistle to each other")["id"]
    path = delta_file(data_dir)
    if damage == "foreign-base":
        loaded = hotindex.read_index(db_file(data_dir))
        header = loaded[0]["delta"]
        arrays = {k[2:]: v for k, v in loaded[1].items() if k.startswith("x_")}
        hotindex.write_delta(db_file(data_dir), {**header, "base_id": "someone-else"}, arrays)
    elif damage == "garbage":
        path.write_bytes(b"MNEMHOT1" + b"\x07" * 64)
    else:
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert new in {r["insight"]["id"] for r in cli.ok("recall", "whistle", "--verbose")["results"]}
    same_content(_cached_index(data_dir), fresh_build(data_dir))


def test_edge_deleted_out_of_sight_is_caught_by_the_edge_reader(cli, data_dir: Path) -> None:
    """An edge row deleted between two live insights is invisible by rowid: recall's count check
    reloads the edges (and folds everything into a new base)."""
    a = cli.ok("remember", "Otter alpha")["id"]
    b = cli.ok("remember", "Otter beta")["id"]
    cli.ok("link", a, b, "--type", "causal", "--weight", "0.9")
    cli.ok("recall", "otter")
    cli.ok("remember", "Otter gamma")  # a delta with verified=False
    conn = apsw.Connection(str(db_file(data_dir)))
    conn.execute("DELETE FROM edges WHERE source_id = ? AND target_id = ? AND edge_type = 'causal'", (a, b))
    conn.execute(
        "INSERT INTO insights (id, content, category, importance, tags, entities, source, created_at, updated_at) "
        "VALUES ('11111111-2222-4333-8444-555555555555', 'Otter delta', 'fact', 3, '[]', '[]', 'go', "
        "'2030-01-01T00:00:00Z', '2030-01-01T00:00:00Z')"
    )
    conn.close()
    cli.ok("recall", "otter")
    cached = _cached_index(data_dir)
    same_content(cached, fresh_build(data_dir))
    assert answers(cli, data_dir) == answers_of_a_fresh_build(cli, data_dir)


def test_show_does_not_touch_the_index_or_import_numpy(cli, data_dir: Path) -> None:
    a = cli.ok("remember", "Otters have the densest fur")["id"]
    cli.ok("recall", "otter")
    before = {k: v for k, v in files(data_dir).items() if "/hot" in k}
    code = (
        "import sys; from mnemon.cli import main; "
        f"rc = main(['--data-dir', {str(data_dir)!r}, 'show', {a!r}]); "
        "sys.stdout.flush(); sys.exit(3 if 'numpy' in sys.modules else rc)"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    assert {k: v for k, v in files(data_dir).items() if "/hot" in k} == before
