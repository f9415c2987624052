"""Security properties: private file modes, hostile store names, symlinks, keyed receipts, inert viz.

Memories are private: every directory mnemon creates is 0700 and every file 0600 (database,
``-wal`` and ``-shm`` while a connection is open, derived index files), even under umask 0.
Store names are a closed grammar; anything else is refused before a path is built, and a
symlinked store directory or database is refused rather than followed. Receipts hash ids and
details with an HMAC keyed per store, so a short value cannot be recovered by guessing.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from pathlib import Path

import apsw
import pytest
from embed_server import EmbedServer


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _db(data_dir: Path, store: str = "default") -> Path:
    return data_dir / "data" / store / "mnemon.db"


@pytest.fixture
def open_umask():
    """Run with umask 0: private modes must come from mnemon, not from the user's umask."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_directories_0700_and_files_0600_under_umask_0(cli, data_dir, open_umask, monkeypatch) -> None:
    with EmbedServer(dim=16) as server:
        monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
        ids = [cli.ok("remember", f"private memory number {i} about Python")["id"] for i in range(3)]
        assert cli.ok("recall", "Python memory")
        assert cli("embed", "--all").code == 0
    cli.ok("link", ids[0], ids[1])
    index = data_dir / "data" / "default" / "mnemon.db.index"  # the derived-file folder
    for folder in (data_dir, data_dir / "data", data_dir / "data" / "default", index):
        assert _mode(folder) == 0o700, folder
    files = [p for p in (data_dir / "data" / "default").rglob("*") if p.is_file()]
    assert _db(data_dir) in files
    assert len(files) > 1, "expected derived index files in mnemon.db.index/"
    for path in files:
        assert _mode(path) == 0o600, path


def test_wal_and_shm_are_0600_while_a_connection_is_open(cli, data_dir, open_umask) -> None:
    from mnemon.store import Store

    cli.ok("remember", "first")
    store = Store.open(_db(data_dir), readonly=False, now="2026-01-01T00:00:00Z")
    try:
        with store.transaction() as conn:
            conn.execute("UPDATE insights SET access_count = access_count + 1")
        wal, shm = Path(str(_db(data_dir)) + "-wal"), Path(str(_db(data_dir)) + "-shm")
        assert wal.exists() and shm.exists()
        assert _mode(wal) == 0o600 and _mode(shm) == 0o600
    finally:
        store.close()


def test_store_create_and_active_file_are_private(cli, data_dir, open_umask) -> None:
    res = cli("store", "create", "work")
    assert res.code == 0, res.err
    assert cli("store", "set", "work").code == 0
    assert _mode(data_dir / "data" / "work") == 0o700 and _mode(_db(data_dir, "work")) == 0o600
    assert _mode(data_dir / "active") == 0o600


HOSTILE_STORE_NAMES = [
    "..", ".", "../x", "../../etc", "x/..", "a/b", "/abs", "/", "\\", "a\\b", "..\\x", " ", "  ", " x", "x ",
    "-x", "--x", "_x", "x\x00y", "\x00", "x\n", "\nx", "x\r", "x\ty", "x y", "x.y", ".hidden", "x.db", "~",
    "~root", "$HOME", "${HOME}", "$(id)", "`id`", "x;rm", "x|y", "x&y", "x>y", "x<y", "*", "?", "[a]", "x'",
    'x"', "é", "ü", "\u202ex", "x\u200b", "Ａ", "a" * 256, "%2e%2e", "x%00", "con:", "C:", "x:y", "x@y",
    "x#y", "x!y", "x=y", "x+y", "x,y",
]


def test_at_least_40_hostile_store_names() -> None:
    assert len(set(HOSTILE_STORE_NAMES)) >= 40


@pytest.mark.parametrize("name", HOSTILE_STORE_NAMES, ids=lambda n: repr(n)[:20])
def test_hostile_store_name_rejected_everywhere(name: str, cli, data_dir, tmp_path: Path) -> None:
    outside = sorted(p.name for p in tmp_path.iterdir())
    for argv in (("--store", name, "status"), ("store", "create", name), ("store", "set", name),
                 ("store", "remove", name), ("--store", name, "remember", "x")):
        res = cli(*argv)
        assert res.code == 1, (argv, res.out)
        lines = res.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), (argv, res.err)
    # Nothing was created for the name, inside or outside the data dir.
    assert not (data_dir / "data").exists() or list((data_dir / "data").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == outside


@pytest.mark.parametrize("name", ["../escape", "a/b", "x y", "..", "../escape\nx"])
def test_hostile_name_in_active_file_or_env_is_not_followed(name: str, cli, data_dir, tmp_path, monkeypatch) -> None:
    data_dir.mkdir(mode=0o700)
    (data_dir / "active").write_text(name + "\n")
    res = cli("status")
    if res.code == 0:  # the contract allows falling back to the default store with a warning
        assert res.json()["db_path"] == str(_db(data_dir))
    assert not (tmp_path / "escape").exists()
    monkeypatch.setenv("MNEMON_STORE", name)
    res = cli("status")
    if res.code == 0:
        assert res.json()["db_path"] == str(_db(data_dir))
    assert not (tmp_path / "escape").exists()


@pytest.mark.parametrize("readonly", [False, True])
def test_symlinked_store_directory_is_refused(readonly: bool, cli, data_dir, tmp_path: Path) -> None:
    cli.ok("remember", "real store content")
    elsewhere = tmp_path / "elsewhere"
    os.rename(data_dir / "data" / "default", elsewhere)
    os.symlink(elsewhere, data_dir / "data" / "default")
    def snapshot() -> dict[str, bytes]:  # the database and the derived folder's files
        return {str(p.relative_to(elsewhere)): p.read_bytes() for p in elsewhere.rglob("*") if p.is_file()}

    before = snapshot()
    argv = ["status"] + (["--readonly"] if readonly else [])
    res = cli(*argv)
    assert res.code == 1 and res.err.startswith("Error: ") and "symlink" in res.err, res.err
    assert snapshot() == before


@pytest.mark.parametrize("readonly", [False, True])
def test_symlinked_database_file_is_refused(readonly: bool, cli, data_dir, tmp_path: Path) -> None:
    cli.ok("remember", "real store content")
    target = tmp_path / "other.db"
    os.rename(_db(data_dir), target)
    os.symlink(target, _db(data_dir))
    res = cli(*(["status"] + (["--readonly"] if readonly else [])))
    assert res.code == 1 and "symlink" in res.err, res.err


def _receipt_key(db: Path) -> bytes:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return bytes.fromhex(conn.execute("SELECT value FROM mnemon_meta WHERE key = 'receipt_key'").fetchone()[0])
    finally:
        conn.close()


def test_receipt_is_hmac_keyed_per_store_and_carries_no_content(cli, data_dir) -> None:
    secret = "pin 4711"
    made = cli.ok("remember", secret)
    out = cli.ok("receipt")
    assert out["privacy"]["hash_algorithm"] == "hmac-sha256" and out["privacy"]["raw_detail_included"] is False
    text = cli("receipt").out
    assert secret not in text and made["id"] not in text and made["id"][:8] not in text
    (event,) = out["events"]
    key = _receipt_key(_db(data_dir))
    assert len(key) == 32
    assert event["insight_id_hash"] == hmac.new(key, made["id"].encode(), hashlib.sha256).hexdigest()
    # The guessable bare digest is not what is published.
    assert event["insight_id_hash"] != hashlib.sha256(made["id"].encode()).hexdigest()
    # Stable across calls (same key), different in another store (another key).
    assert cli.ok("receipt")["events"][0]["insight_id_hash"] == event["insight_id_hash"]
    cli.ok("--store", "other", "remember", secret)
    other_detail = cli.ok("--store", "other", "receipt")["events"][0]["detail_hash"]
    assert _receipt_key(_db(data_dir, "other")) != key
    assert other_detail != event["detail_hash"]


def test_readonly_receipt_without_key_uses_an_ephemeral_key_and_says_so(cli, data_dir) -> None:
    cli.ok("remember", "something private")
    conn = apsw.Connection(str(_db(data_dir)))
    conn.execute("DELETE FROM mnemon_meta WHERE key = 'receipt_key'")
    conn.close()
    before = _db(data_dir).read_bytes()
    first = cli.ok("--readonly", "receipt")
    second = cli.ok("--readonly", "receipt")
    assert "ephemeral" in first["privacy"]["note"]
    assert first["events"][0]["detail_hash"] != second["events"][0]["detail_hash"]
    assert _db(data_dir).read_bytes() == before
    assert sorted(p.name for p in _db(data_dir).parent.iterdir()) == ["mnemon.db"] or all(
        not p.name.endswith(("-wal", "-shm", "-journal")) for p in _db(data_dir).parent.iterdir()
    )


def test_viz_html_with_script_close_in_content_executes_nothing(cli, data_dir) -> None:
    payloads = [
        "</script><script>alert(1)</script>",
        "<img src=x onerror=alert(2)>",
        "</SCRIPT ><svg onload=alert(3)>",
        "<!--<script>",
        "\u2028\u2029 line separators",
    ]
    baseline_dir = data_dir.parent / "baseline"
    from mnemon.cli import main

    for text in payloads:
        cli.ok("remember", f"note {text}")
    res = cli("viz", "--format", "html")
    assert res.code == 0, res.err
    html = res.out
    # The page's own scripts only: as many script tags as for a harmless store.
    cli.capsys.readouterr()
    assert main(["--data-dir", str(baseline_dir), "remember", "harmless"]) == 0
    cli.capsys.readouterr()
    assert main(["--data-dir", str(baseline_dir), "viz", "--format", "html"]) == 0
    plain = cli.capsys.readouterr().out
    lower, plain_lower = html.lower(), plain.lower()
    # Attribute-like text may survive inside the escaped JSON island; markup that opens an element may not.
    for tag in ("<script", "</script", "<img", "<svg", "<!--"):
        assert lower.count(tag) == plain_lower.count(tag), tag
    assert "\u2028" not in html and "\u2029" not in html
