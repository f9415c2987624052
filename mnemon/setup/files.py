"""File-system steps of setup: atomic writes that keep a file's mode, and tidy directory removal.

A host reads its config while setup may be writing it, and a crash must never leave half a file:
every write goes to a temporary file in the same directory, is fsynced, then renamed over the
target (``os.replace`` is atomic on one file system), and the directory entry is fsynced too.
An existing file keeps its permission bits (a user's 0600 config stays private); a new file gets
the ``mode`` the caller names: 0644 by default, as the Go installer writes JSON configs, 0600
where the host's config may hold secrets (Hermes' ``config.yaml``, OpenClaw's ``openclaw.json``),
0755 for hook scripts. ``removal`` notes what a write created, so eject can take exactly that
away again. stdlib only.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from mnemon.errors import InputError

__all__ = ["CONFIG_MODE", "PRIVATE_MODE", "SCRIPT_MODE", "check_dirs", "check_writable", "make_dirs", "remove_if_empty", "read_config",
           "remove_file", "remove_tree", "write_bytes", "write_text"]

CONFIG_MODE = 0o644  # a new host config file (Go's WriteJSONFile)
PRIVATE_MODE = 0o600  # a new config that may hold the user's credentials
SCRIPT_MODE = 0o755  # hook scripts the host executes directly


def check_writable(path: Path) -> None:
    """Refuse (InputError) to replace an existing file nobody may write (mode 0444, 0400, ...): its owner made it
    read-only on purpose (a managed or frozen config), and the rename behind an atomic write would replace it
    all the same, even for a user the mode would stop (the Go installer's plain write failed there). Called
    before a command writes anything, and again by every write."""
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return
    if mode & 0o222 == 0:
        raise InputError(f"{path} is read-only (mode {mode & 0o7777:04o}); setup leaves it as it is: make it "
                         "writable (chmod u+w) and run setup again, or edit it by hand")


def check_dirs(*dirs: Path) -> None:
    """Refuse (InputError) to install where a directory setup must use or make is blocked: a file (or a broken
    link) at its place or at one of its parents' (``~/.claude`` a file, say). Called before anything is
    written: mkdir failed there with a traceback, part of the install already written."""
    for directory in dirs:
        probe = directory
        while True:
            try:
                mode = probe.stat().st_mode
            except (FileNotFoundError, NotADirectoryError):
                if probe.is_symlink():
                    raise InputError(f"{probe} is a broken link where setup needs a directory; fix or move it, "
                                     "then run setup again") from None
                if probe.parent == probe:
                    break
                probe = probe.parent
                continue
            except OSError as exc:
                raise InputError(f"cannot use {probe}: {exc.strerror}") from None
            if not stat.S_ISDIR(mode):
                raise InputError(f"{probe} is not a directory, and setup needs one there; move it, then run "
                                 "setup again")
            break


def write_bytes(path: Path, data: bytes, *, mode: int = CONFIG_MODE, keep_mode: bool = True) -> None:
    """Replace ``path`` atomically with ``data``; an existing file keeps its mode unless ``keep_mode`` is off.
    A file nobody may write is refused (``check_writable``).

    A symbolic link (a dotfiles checkout's config) is written through: the file it names is replaced and
    the link stays, as an editor's save keeps it (replacing the link itself lost it for good, eject too)."""
    check_writable(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        current = path.stat().st_mode & 0o7777 if keep_mode else None
    except FileNotFoundError:
        current = None
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode if current is None else current)
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_text(path: Path, text: str, *, mode: int = CONFIG_MODE, keep_mode: bool = True) -> None:
    write_bytes(path, text.encode("utf-8"), mode=mode, keep_mode=keep_mode)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems refuse fsync on a directory; the rename is still atomic
        pass
    finally:
        os.close(fd)


def make_dirs(path: Path, created: list[str] | None = None) -> None:
    """``mkdir -p``, appending to ``created`` each directory that did not exist before (outermost first)."""
    missing = []
    for parent in [path, *path.parents]:
        if parent.exists():
            break
        missing.append(parent)
    path.mkdir(parents=True, exist_ok=True)
    if created is not None:
        created.extend(str(p) for p in reversed(missing))


def remove_if_empty(*dirs: Path) -> None:
    """Remove each directory that exists and is empty (Go's ``removeIfEmpty``), in the order given."""
    for directory in dirs:
        try:
            if directory.is_dir() and not any(directory.iterdir()):
                directory.rmdir()
        except OSError:
            pass


def remove_file(path: Path) -> None:
    """Delete a config file setup created. Through a symbolic link, as ``write_bytes`` wrote it: the file it
    names goes and the user's link stays (eject removed the link and left the file with our entries)."""
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    path.unlink()


def remove_tree(path: Path) -> bool:
    """Remove a file or directory tree we own; False when there was nothing."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
        return True
    if path.exists() or path.is_symlink():
        path.unlink()
        return True
    return False


def read_config(path: Path) -> str | None:
    """A host config file's text; ``None`` when it does not exist. Unreadable or non-UTF-8 ⇒ InputError."""
    try:
        kind = path.stat().st_mode
        if stat.S_ISFIFO(kind) or stat.S_ISCHR(kind) or stat.S_ISSOCK(kind):  # reading one could block setup forever
            raise InputError(f"{path} is not a regular file; move it, then run setup again")
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise InputError(f"{path} is not UTF-8 text; fix or move it, then run setup again") from None
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
