"""A spare worker's rehearsal: the everyday commands once, on a private copy of a scratch store.

A forked worker shares the parent's pages copy-on-write, and the first write to each page (a
reference count, an allocator pool, SQLite's caches) copies it: a command's first run in a fresh
fork took 900-1600 page faults, 3-12 ms of a served call (1k store: ``status`` 8 -> 1.4 ms, ``show``
6 -> 2.6, ``remember --no-diff`` 22 -> 9, ``recall`` 13 -> 10, measured in forked children). The spare
is forked between requests and then waits; it now spends that wait running ``status``,
``remember --no-diff``, ``show``, ``recall``, ``search`` and ``--help`` on its own copy of a small
store, so the client's command finds those pages already copied.

Rules, so that a rehearsal never costs a client anything or changes what it sees:
- The commands are the ones the parent's warm-up (``preload``) already ran in the parent itself,
  with the same throwaway settings: an explicit environment (a closed embedding port, ``HOME`` in
  the scratch directory), output into a sink. They leave no state a warm-up did not already leave.
- Each spare works on its own copy of the template store (``paths.scratch_path``: in ``/dev/shm``
  when there is one, 0700, made once by the parent, removed when it exits or by the next server),
  deleted after the rehearsal: nothing grows, no two processes share a scratch database.
- Two phases. At once after its fork the spare primes: it runs ``status`` alone (5 ms on a memory
  scratch: that first command takes most of the faults every command shares, 900 of them), then
  says ``PRIMED``; back-to-back calls arrive about 12 ms apart, so even a burst finds a primed
  spare. The rest only when the parent says ``REHEARSE``, once the loop has been quiet for a moment
  (``daemon.REHEARSE_AFTER``); then it says ``READY``. Before each command the spare looks at its
  channel: the parent's hang-up ends the rehearsal at once. The parent hands a request only to a
  spare that is priming (it takes the request once primed: a wait of at most that one short
  command, cheaper than a cold fork), has said ``PRIMED`` and is not in the second phase, or said
  ``READY``; a request that finds the spare in the second phase gets a freshly forked worker
  (which does not prime), and the rehearsing spare is killed (it must not take the CPU from the
  client's command; the parent removes its copy when it reaps it).
- A rehearsal that fails ends the spare with ``FAILED`` (saying ``FAILED_WORD`` first); the parent
  then stops rehearsing. A request handed to it while priming was never taken (the spare reads its
  channel only after the priming): the parent tells that client ``N`` (not run) and the client runs
  the command in-process, once.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from collections.abc import Callable

REHEARSE = b"H"  # parent -> spare: the loop has been quiet, rehearse the rest now
PRIMED = b"P"  # spare -> parent: the first command rehearsed (``PRIME``), hand me a request
READY = b"R"  # spare -> parent: everything rehearsed, hand me a request
FAILED_WORD = b"F"  # spare -> parent: a rehearsal failed (before any request was taken), exiting FAILED
PRIME = 1  # commands of the first phase, run at once: ``status`` alone takes most of the faults
FAILED = 3  # a spare's exit status when its rehearsal raised: the parent stops rehearsing
CLOSED_PORT = "http://127.0.0.1:9"  # no embedding server is asked

_SEED = ["remember", "Chose SQLite because the store must stay one file", "--cat", "decision"]


def _commands(insight_id: str) -> list[list[str]]:
    return [
        ["status"],
        ["remember", "--no-diff", "SQLite WAL mode lets readers run during writes"],
        ["show", insight_id],
        ["recall", "why SQLite"],
        ["search", "SQLite"],
        ["--help"],
    ]


def run_throwaway(data_dir: str, argv: list[str]) -> tuple[int, str, str]:
    """One command in this process on ``data_dir`` with the throwaway settings (no embedding server
    is asked, ``HOME`` inside the store's directory): (exit status, stdout, stderr). The parent's
    warm-up (``preload``) and a spare's rehearsal run their commands through it."""
    from mnemon import cli
    from mnemon.cli.state import GlobalOptions

    env = {"MNEMON_EMBED_ENDPOINT": CLOSED_PORT, "HOME": data_dir}
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv, options=GlobalOptions(data_dir=data_dir, environ=env))
    return code, out.getvalue(), err.getvalue()


def _run(data_dir: str, argv: list[str]) -> str:
    """A rehearsal's command: its stdout; a failure raises (the spare then stops rehearsing)."""
    code, out, err = run_throwaway(data_dir, argv)
    if code:
        raise RuntimeError(f"rehearsal: {argv[0]} exited {code}: {err.strip()}")
    return out


class Rehearsal:
    """The template store (parent side) and one spare's run on a copy of it (worker side)."""

    def __init__(self, root: str, insight_id: str) -> None:
        self.root = root
        self.template = os.path.join(root, "template")
        self.insight_id = insight_id

    @classmethod
    def prepare(cls, root: str) -> Rehearsal | None:
        """Make the template store under ``root`` (replacing a dead server's); None if it cannot."""
        try:
            shutil.rmtree(root, ignore_errors=True)
            os.mkdir(root, 0o700)
            out = _run(os.path.join(root, "template"), _SEED)
            return cls(root, str(json.loads(out)["id"]))
        except Exception:  # noqa: BLE001  no rehearsal then: spares behave as before
            shutil.rmtree(root, ignore_errors=True)
            return None

    def _copy(self, pid: int) -> str:
        return os.path.join(self.root, f"spare-{pid}")

    def run(self, interrupted: Callable[[], bool], phase: int) -> None:
        """Rehearse phase 0 (the first ``PRIME`` commands) or 1 (the others) on a private copy until
        done or ``interrupted()``; the copy is removed."""
        commands = _commands(self.insight_id)
        copy = self._copy(os.getpid())
        try:
            shutil.copytree(self.template, copy)
            for argv in (commands[:PRIME] if phase == 0 else commands[PRIME:]):
                if interrupted():
                    return
                _run(copy, argv)
        finally:
            shutil.rmtree(copy, ignore_errors=True)

    def remove_copy(self, pid: int) -> None:
        """The copy of a spare that was killed (parent side, once it is reaped)."""
        shutil.rmtree(self._copy(pid), ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
