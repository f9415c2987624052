"""The server's warm-up: every step a worker should find already done, in ONE list.

Each warmer runs once in the parent before it listens; workers inherit the result through
``fork`` (imported modules, loaded machine code, built tables). A feature that has its own
start-up cost adds its warmer to ``WARMERS`` (for example an in-process embedding model). A warmer
must leave no open store, file or thread behind: a worker must never inherit a connection. (Stores'
hot indexes are kept by ``warm``, under its freshness rules, not here.)
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable


def _numpy() -> None:
    from mnemon import config

    config.limit_blas_threads()  # as main() does before numpy loads
    import numpy  # noqa: F401


def _kernels() -> None:
    import kernels

    kernels.warmup()  # loads each compiled kernel's cached machine code (or compiles it once)


def _store() -> None:
    import mnemon.store  # noqa: F401  (and apsw with it)


def _command_tree() -> None:
    from mnemon import cli

    cli._command()  # typer builds the click tree from every signature (~15 ms per process otherwise)


def _engine_and_embedder() -> None:
    import mnemon.embed  # noqa: F401
    import mnemon.engine  # noqa: F401


def _local_model() -> None:
    """Load the in-process embedding model when the environment the server starts in asks for it
    (``MNEMON_EMBED_PROTOCOL=local``): workers then embed with the inherited session instead of
    paying about 0.8 s of onnxruntime import and model load per call. One intra-op thread, because
    a forked worker inherits no thread pool. A model that cannot load is left to the first command,
    which reports it exactly as in-process."""
    from mnemon import config
    from mnemon.errors import MnemonError

    try:
        settings = config.resolve()
    except MnemonError:  # a bad store name in this environment: the first command reports it
        return
    if settings.embed_protocol != "local":
        return
    from mnemon.embed import local

    model, model_dir = local.resolve_model(settings.embed_model, settings.embed_model_path, settings.data_dir)
    local.warm(model_dir, threads=1, model=model)


def _exercise() -> None:
    """Run the everyday commands once on a throwaway store: this imports what the commands import
    lazily and fills the dispatch caches of every code path they take. No embedding server is
    asked (a closed port), and the store is deleted afterwards."""
    from mnemon.server.rehearsal import run_throwaway

    scratch = tempfile.mkdtemp(prefix="mnemon-warm-")
    commands = [
        ["remember", "Chose SQLite because the store must stay one file", "--cat", "decision"],
        ["remember", "SQLite WAL mode lets readers run during writes", "--no-diff"],
        ["recall", "why SQLite"], ["search", "SQLite"], ["status"], ["--help"], ["remember", "--help"],
    ]
    try:
        for argv in commands:
            run_throwaway(scratch, argv)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


WARMERS: list[Callable[[], None]] = [
    _numpy, _kernels, _store, _command_tree, _engine_and_embedder, _local_model, _exercise,
]


def warm() -> None:
    for warmer in WARMERS:
        warmer()
