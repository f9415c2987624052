"""Command workers: several gateway calls at once, each command in a process of its own.

Why processes and not threads: ``cli.run`` binds the process's ``sys.std*`` for a command, the
interpreter lock would keep CPU-bound recalls one at a time anyway, and the parallel kernels run on
numba's ``workqueue`` layer, which aborts the whole process when two threads launch kernels at once.
A worker is a whole CLI process, so concurrency is exactly that of several ``mnemon`` processes on
one store, which the store already makes safe: readers run side by side, writers are serialised by
the store's own lock (SQLite ``BEGIN IMMEDIATE`` with its busy timeout, PostgreSQL's advisory lock),
one transaction per command.

Workers are forked by multiprocessing's *forkserver* (started before the gateway has any thread, its
children never inherit the listening socket or a lock held by another thread) and warmed as the gateway
was. The gateway shuts them down when it stops (its lifespan's end, before uvicorn re-raises SIGTERM).
A worker also watches the gateway's pid and exits the moment it is gone: a kill -9 of the gateway leaves
no worker behind (they hold each other's pipes, and the forkserver lives until its last child is gone,
so nothing else would end them; a command cut off this way rolls back, as under kill -9 of a CLI run).
A worker that dies breaks the executor: its calls get an error saying the command may or may not have
run, and the next call starts a new pool.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import os
import select
import signal
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

import anyio

from mnemon.gateway import commands

if TYPE_CHECKING:
    from mnemon import mcp as tools
    from mnemon.cli.state import GlobalOptions

PRELOAD = ["mnemon.cli", "mnemon.gateway.commands", "mnemon.engine", "numpy"]


def _prepare(gateway_pid: int, options: GlobalOptions, run: tools.Runner) -> None:
    """A new worker: exit with the gateway, leave Ctrl-C to the gateway, warm up."""
    threading.Thread(target=_exit_with, args=(gateway_pid,), name="mnemon-gateway-watch", daemon=True).start()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    commands.warm(options, run)


def _exit_with(pid: int) -> None:
    """Block until process ``pid`` has exited (a pidfd where the kernel has them, else a 1 s poll), then exit."""
    try:
        with open(os.pidfd_open(pid), "rb", buffering=0) as handle:  # readable once the process has exited
            select.select([handle], [], [])
    except (OSError, AttributeError):
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            except PermissionError:
                pass
            time.sleep(1.0)
    os._exit(1)


def _ready(_: int) -> bool:
    return True


class Pool:
    """``size`` warm command workers behind :meth:`call`."""

    def __init__(self, size: int, options: GlobalOptions, run: tools.Runner) -> None:
        self.size, self.options, self.run = size, options, run
        self._lock = threading.Lock()
        self._executor = self._start()

    def _start(self) -> concurrent.futures.ProcessPoolExecutor:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        executor = concurrent.futures.ProcessPoolExecutor(
            self.size, mp_context=context, initializer=_prepare, initargs=(os.getpid(), self.options, self.run))
        # Every worker now (a submit with none idle starts one), each warmed before the gateway listens.
        for ready in [executor.submit(_ready, i) for i in range(self.size)]:
            ready.result()
        return executor

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    async def call(self, timeout: float, data_dir: str, caller: commands.Caller, tool: str,
                   args: dict[str, Any], test_clock: bool = False) -> commands.Outcome:
        """Run one call in a worker; a call over ``timeout`` is an error saying whether its command ran."""
        with self._lock:
            executor = self._executor
        call = (self.run, self.options, data_dir, caller, tool, args, test_clock)
        try:
            future = executor.submit(commands.execute, *call)
        except BrokenProcessPool:
            fresh = await anyio.to_thread.run_sync(self._restart, executor)
            future = fresh.submit(commands.execute, *call)
        done = anyio.Event()
        loop = asyncio.get_running_loop()
        future.add_done_callback(lambda _: loop.call_soon_threadsafe(done.set))
        with anyio.move_on_after(timeout):
            await done.wait()
        if not future.done():
            return commands.overran(future.cancel(), tool, timeout)
        try:
            return future.result()
        except BrokenProcessPool:
            await anyio.to_thread.run_sync(self._restart, executor)
            return commands.failed(f"Error: the gateway's command worker died during the {tool} call; it may or may "
                                   "not have run (check before repeating a write)", tool)

    def _restart(self, broken: concurrent.futures.ProcessPoolExecutor) -> concurrent.futures.ProcessPoolExecutor:
        with self._lock:
            if self._executor is broken:
                broken.shutdown(wait=False, cancel_futures=True)
                self._executor = self._start()
            return self._executor
