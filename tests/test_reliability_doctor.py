"""``mnemon doctor``: a clean store passes, each kind of damage is named, ``--repair`` fixes what is derived.

Damage is made with a raw apsw connection (foreign keys off, as a buggy writer or a Go binary
without ``PRAGMA foreign_keys`` would), then the real CLI is asked about it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import apsw
import pytest


def _db(data_dir: Path) -> Path:
    return data_dir / "data" / "default" / "mnemon.db"


def _raw(data_dir: Path) -> apsw.Connection:
    conn = apsw.Connection(str(_db(data_dir)))
    conn.execute("PRAGMA foreign_keys=OFF")
    return conn


def _failed(report: dict) -> set[str]:
    return {c["name"] for c in report["checks"] if not c["ok"]}


@pytest.fixture
def populated(cli) -> list[str]:
    ids = [cli.ok("remember", f"fact number {i} about Python because of Go")["id"] for i in range(4)]
    cli.ok("link", ids[0], ids[3], "--type", "causal", "--weight", "0.9")
    cli.ok("forget", ids[1])
    return ids


def test_clean_store_reports_every_check_ok(cli, populated) -> None:
    res = cli("doctor")
    assert res.code == 0, res.err
    report = res.json()
    assert report["ok"] is True and report["store"] == "default"
    names = [c["name"] for c in report["checks"]]
    for name in ("integrity", "foreign_keys", "dangling_edges", "insights", "embeddings", "oplog", "permissions",
                 "derived_index"):
        assert name in names
    assert all(set(c) == {"name", "ok", "detail"} for c in report["checks"])


def test_doctor_on_missing_store_is_an_error_and_creates_nothing(cli, data_dir) -> None:
    res = cli("doctor")
    assert res.code == 1 and res.err.startswith("Error: database not found")
    assert not _db(data_dir).exists()


def test_dangling_edge_is_reported_and_repaired_in_one_transaction(cli, data_dir, populated) -> None:
    conn = _raw(data_dir)
    conn.execute(
        "INSERT INTO edges (source_id, target_id, edge_type, weight, metadata, created_at) "
        "VALUES (?, 'no-such-insight', 'semantic', 0.5, '{}', '2026-01-01T00:00:00Z')", (populated[0],)
    )
    # An edge to a soft-deleted insight is dangling too (forget drops them; a crash-free store has none).
    conn.execute(
        "INSERT INTO edges (source_id, target_id, edge_type, weight, metadata, created_at) "
        "VALUES (?, ?, 'entity', 0.5, '{}', '2026-01-01T00:00:00Z')", (populated[0], populated[1])
    )
    conn.close()
    res = cli("doctor")
    assert res.code == 1
    assert res.err.strip() == "Error: doctor found problems: foreign_keys, dangling_edges"
    report = res.json()
    assert report["ok"] is False and _failed(report) == {"foreign_keys", "dangling_edges"}
    fixed = cli("doctor", "--repair")
    assert fixed.code == 0, fixed.err
    assert fixed.json()["repaired"][0] == "removed 2 dangling edge(s)"
    assert cli("doctor").code == 0
    # The user's real edge survived the repair.
    assert any(r["id"] == populated[3] for r in cli.ok("related", populated[0]))


def test_half_written_insight_and_bad_embedding_are_named(cli, data_dir, populated) -> None:
    conn = _raw(data_dir)
    conn.execute("UPDATE insights SET content = '' WHERE id = ?", (populated[2],))
    conn.execute("UPDATE insights SET embedding = x'00112233' WHERE id = ?", (populated[0],))
    conn.close()
    res = cli("doctor")
    assert res.code == 1
    report = res.json()
    assert _failed(report) == {"insights", "embeddings"}
    detail = {c["name"]: c["detail"] for c in report["checks"]}
    assert populated[2] in detail["insights"] and populated[0] in detail["embeddings"]


def test_non_finite_embedding_is_named(cli, data_dir, populated) -> None:
    import numpy as np

    conn = _raw(data_dir)
    conn.execute("UPDATE insights SET embedding = ? WHERE id = ?", (np.array([1.0, np.nan]).tobytes(), populated[0]))
    conn.close()
    assert _failed(cli("doctor").json()) == {"embeddings"}


def test_oplog_and_meta_problems(cli, data_dir, populated) -> None:
    conn = _raw(data_dir)
    conn.execute("INSERT INTO oplog (operation, insight_id, detail, created_at) VALUES ('', '', '', '')")
    conn.execute("UPDATE mnemon_meta SET value = 'x' WHERE key = 'generation'")
    conn.close()
    assert _failed(cli("doctor").json()) == {"oplog", "meta"}


def test_loose_permissions_are_reported_and_repaired(cli, data_dir, populated) -> None:
    db = _db(data_dir)
    os.chmod(db, 0o644)
    os.chmod(db.parent, 0o755)
    res = cli("doctor")
    assert res.code == 1 and _failed(res.json()) == {"permissions"}
    assert cli("doctor", "--repair").code == 0
    assert stat.S_IMODE(db.stat().st_mode) == 0o600 and stat.S_IMODE(db.parent.stat().st_mode) == 0o700


def test_repair_deletes_derived_files(cli, data_dir, populated) -> None:
    db = _db(data_dir)
    junk = db.with_name("mnemon.db.index") / "hot"
    junk.parent.mkdir(mode=0o700, exist_ok=True)
    junk.write_bytes(b"not an index at all")
    leftover = db.parent / ".mnemon.db.hot.1234.tmp"
    leftover.write_bytes(b"half")
    for path in (junk, leftover):
        os.chmod(path, 0o600)
    before = cli("doctor").json()
    fixed = cli("doctor", "--repair")
    assert fixed.code == 0, fixed.err
    assert not junk.exists() and not leftover.exists()
    assert any("deleted derived file" in r for r in fixed.json()["repaired"])
    assert _failed(before) == {"derived_index"}
    # The next read rebuilds the index, and doctor calls it current.
    assert cli("recall", "Python").code == 0 and cli("search", "Python").code == 0
    detail = {c["name"]: c["detail"] for c in cli("doctor").json()["checks"]}
    assert "current" in detail["derived_index"] and junk.exists()


@pytest.mark.parametrize("damage", ["folder is a file", "index file is a directory", "dangling link"])
def test_what_stands_where_derived_files_belong_is_named_and_deleted(cli, data_dir, populated, damage) -> None:
    """A file where the derived folder belongs makes every writable command fail ("not a directory"); a
    directory or a dangling link where an index file belongs is no file to unlink. doctor names each and
    --repair deletes it, after which the store answers and doctor is clean."""
    assert cli("recall", "Python").code == 0  # the index files exist
    folder = _db(data_dir).with_name("mnemon.db.index")
    if damage == "folder is a file":
        for path in folder.iterdir():
            path.unlink()
        folder.rmdir()
        folder.write_bytes(b"junk")
        assert cli("remember", "one more fact").err.startswith("Error: not a directory")
    elif damage == "index file is a directory":
        (folder / "hot").unlink()
        (folder / "hot" / "nested").mkdir(parents=True)
    else:
        (folder / "hot.delta").unlink(missing_ok=True)
        (folder / "hot.delta").symlink_to(folder / "nowhere")
    before = cli("doctor")
    assert before.code == 1 and _failed(before.json()) == {"derived_index"}
    assert "; --repair deletes it" in {c["name"]: c["detail"] for c in before.json()["checks"]}["derived_index"]
    fixed = cli("doctor", "--repair")
    assert fixed.code == 0, fixed.err
    assert any("stood where derived files belong" in r for r in fixed.json()["repaired"])
    assert cli("remember", "a fact after the repair").code == 0
    assert [r["content"] for r in cli.ok("recall", "fact after the repair")["results"]][0] == "a fact after the repair"
    assert folder.is_dir() and all(p.is_file() for p in folder.iterdir())
    assert cli("doctor").code == 0


def _flip_inside_largest_array(path: Path) -> str:
    """Flip one bit in the middle of the index file's largest array; return the array's name."""
    import json

    import numpy as np

    raw = bytearray(path.read_bytes())
    base = int.from_bytes(raw[8:16], "little")
    layout = json.loads(bytes(raw[16:base]).rstrip(b"\0"))["arrays"]
    nbytes = {name: int(np.prod(spec["shape"])) * np.dtype(spec["dtype"]).itemsize for name, spec in layout.items()}
    name = max(nbytes, key=lambda n: (nbytes[n], n))
    raw[base + layout[name]["offset"] + nbytes[name] // 2] ^= 0x10
    path.write_bytes(bytes(raw))
    return name


@pytest.mark.parametrize("file", ["hot", "hot.delta"])
def test_a_flipped_byte_in_the_recall_index_is_named_and_repaired(cli, data_dir, populated, file) -> None:
    """The index is mapped and trusted by its fingerprint: a flipped byte in an array was a wrong ranking
    or a crash while doctor called it current. Each array carries the CRC-32 it was written with."""
    assert cli("recall", "Python").code == 0
    if file == "hot.delta":
        assert cli("remember", "a memory written after the base, into the delta segment").code == 0
    path = _db(data_dir).with_name("mnemon.db.index") / file
    assert path.exists() and cli("doctor").code == 0
    name = _flip_inside_largest_array(path)
    report = cli("doctor")
    assert report.code == 1 and _failed(report.json()) == {"derived_index"}
    detail = {c["name"]: c["detail"] for c in report.json()["checks"]}["derived_index"]
    assert f"{file}: {name} differ from their checksums; --repair deletes it" in detail
    assert cli("doctor", "--repair").code == 0 and not path.exists()
    assert cli.ok("recall", "Python")["results"] and cli("doctor").code == 0


def test_vector_index_damage_is_named_and_rebuilt(cli, data_dir, monkeypatch) -> None:
    from embed_server import EmbedServer

    with EmbedServer(dim=8) as server:
        monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
        for i in range(3):
            cli.ok("remember", f"vector memory {i} about kernels")
        first = [h["id"] for h in cli.ok("recall", "vector memory kernels")["results"]]
        header = _db(data_dir).with_name("mnemon.db.index") / "vec.json"
        assert header.exists()
        report = cli("doctor").json()
        assert report["ok"] and "current" in {c["name"]: c["detail"] for c in report["checks"]}["vector_index"]
        header.write_text("{ torn")
        assert _failed(cli("doctor").json()) == {"vector_index"}
        fixed = cli("doctor", "--repair")
        assert fixed.code == 0, fixed.out
        assert not header.exists()
        assert [h["id"] for h in cli.ok("recall", "vector memory kernels")["results"]] == first
        assert cli("doctor").code == 0


@pytest.mark.parametrize(("suffix", "kind"), [
    ("", "differs from its insight's vector"), (".norms", "has a wrong norm"), (".ids", "holds no active insight"),
    (".q8", "has wrong int8 codes"), (".active", "active rows for"),
])
def test_a_flipped_byte_in_the_vector_index_is_named_and_repaired(cli, data_dir, monkeypatch, suffix, kind) -> None:
    """The vector files are mapped and trusted by vec.json's fingerprint: a flipped byte was a NaN crash or a
    silently wrong cosine while doctor called the index current. doctor compares every active row with the
    database."""
    import json

    import numpy as np
    from embed_server import EmbedServer

    with EmbedServer(dim=8) as server:
        monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", server.url)
        for i in range(5):
            cli.ok("remember", f"vector memory {i} about kernels")
        first = [h["id"] for h in cli.ok("recall", "vector memory kernels")["results"]]
        assert cli("doctor").code == 0
        path = _db(data_dir).with_name("mnemon.db.index") / f"vec{suffix}"
        raw = bytearray(path.read_bytes())
        width = json.loads(path.with_name("vec.json").read_text())["id_width"]
        at = {"": 2 * 8 * 8 + 3, ".norms": 2 * 8 + 5, ".ids": 2 * width + 1, ".q8": 2 * 8 + 1, ".active": 4}
        raw[at[suffix]] = raw[at[suffix]] ^ (0x01 if suffix == ".active" else 0x20)
        path.write_bytes(bytes(raw))
        report = cli("doctor")
        assert report.code == 1 and _failed(report.json()) == {"vector_index"}
        assert kind in {c["name"]: c["detail"] for c in report.json()["checks"]}["vector_index"]
        assert cli("doctor", "--repair").code == 0
        assert [h["id"] for h in cli.ok("recall", "vector memory kernels")["results"]] == first
        assert cli("doctor").code == 0
        assert np.isfinite(np.fromfile(_db(data_dir).with_name("mnemon.db.index") / "vec")).all()


def test_corrupt_database_fails_integrity_and_exits_1(cli, data_dir, populated) -> None:
    db = _db(data_dir)
    # Overwrite a page in the middle of the file with garbage: the b-tree no longer parses.
    size = db.stat().st_size
    with open(db, "r+b") as fh:
        fh.seek(size // 2)
        fh.write(os.urandom(4096) if size > 8192 else b"\xff" * 512)
    res = cli("doctor", "--readonly")
    assert res.code == 1
    assert res.err.startswith("Error: ") and len(res.err.strip().splitlines()) == 1
    assert "Traceback" not in res.err
    if res.out:  # the store opened: the report names the integrity failure
        assert _failed(res.json()) == {"integrity"}
    else:
        assert res.err.startswith("Error: database error:")


def test_repair_is_refused_under_readonly(cli, populated) -> None:
    res = cli("doctor", "--repair", "--readonly")
    assert res.code == 1
    assert res.err.strip() == "Error: doctor --repair is unavailable with --readonly: database writes are disabled"


def test_readonly_doctor_leaves_no_side_files(cli, data_dir, populated) -> None:
    db = _db(data_dir)
    before = db.read_bytes()
    listing = sorted(p.name for p in db.parent.iterdir())
    assert cli("doctor", "--readonly").code == 0
    assert db.read_bytes() == before
    assert sorted(p.name for p in db.parent.iterdir()) == listing
