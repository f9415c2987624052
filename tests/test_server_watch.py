"""The warm server's watch on its package files (mnemon.server.fingerprint.FileWatch): a client
sends only the version and package directory it imported, so the server must itself notice every
change to its files that the fingerprint counts, and only those. Real directory trees, real
inotify (and the walk the watch falls back to without it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mnemon.server.fingerprint import FileWatch, fingerprint


def _tree(root: Path) -> Path:
    for rel, text in [("mnemon/__init__.py", "v = 1\n"), ("mnemon/cli/run.py", "x = 1\n"),
                      ("mnemon/prompts/guide.md", "guide\n"), ("kernels/beam.py", "k = 1\n")]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture(params=["inotify", "walk"])
def watched(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    root = _tree(tmp_path)
    watch = FileWatch(str(root), inotify=request.param == "inotify")
    if request.param == "inotify":
        assert watch.fd is not None, "inotify is available on the Linux hosts the tests run on"
    yield root, watch, fingerprint(str(root))
    watch.close()


def test_unchanged_files_stay_current(watched) -> None:  # type: ignore[no-untyped-def]
    root, watch, own = watched
    assert watch.current(own) and watch.current(own)


def test_a_file_edited_in_place_is_seen(watched) -> None:  # type: ignore[no-untyped-def]
    root, watch, own = watched
    init = root / "mnemon" / "__init__.py"
    with open(init, "r+") as f:  # same inode, the directory's mtime unchanged
        f.write("v = 2\n")
    assert not watch.current(own)


def test_bytecode_and_a_touch_that_restores_the_mtime_do_not_count(watched) -> None:  # type: ignore[no-untyped-def]
    root, watch, own = watched
    cache = root / "mnemon" / "cli" / "__pycache__"
    cache.mkdir()
    (cache / "run.cpython-311.pyc").write_bytes(b"\0" * 16)
    source = root / "kernels" / "beam.py"
    st = source.stat()
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))  # an event, but the same size and mtime
    assert watch.current(own)


def test_a_file_in_a_directory_made_after_the_start_is_seen(watched) -> None:  # type: ignore[no-untyped-def]
    root, watch, own = watched
    (root / "mnemon" / "newpkg").mkdir()
    assert watch.current(own)  # an empty directory changes nothing the fingerprint counts...
    (root / "mnemon" / "newpkg" / "mod.py").write_text("y = 1\n")
    assert not watch.current(own)  # ...but the watch covers it from then on


def test_a_removed_file_or_package_is_seen(watched) -> None:  # type: ignore[no-untyped-def]
    root, watch, own = watched
    (root / "mnemon" / "prompts" / "guide.md").unlink()
    assert not watch.current(own)


def test_a_package_directory_that_went_away_is_not_current(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    watch = FileWatch(str(root))
    own = fingerprint(str(root))
    for path in sorted((root / "kernels").rglob("*"), reverse=True):
        path.unlink()
    (root / "kernels").rmdir()
    assert not watch.current(own)
    watch.close()
