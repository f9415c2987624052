"""Shared fixtures: a private data dir, a clean environment, and helpers to drive the real CLI.

Warm server (issue 10): every test session gets a private runtime directory (``XDG_RUNTIME_DIR``),
so no test ever meets or starts a server outside it, and every server started in it is stopped
when the session ends. By default ``MNEMON_SERVER=off``. With ``MNEMON_TEST_SERVER=1`` one real
server is started for the session and the CLI tests go through it: the ``cli`` fixture sends its
commands over the socket (real descriptors, not captured streams) and ``run_process`` runs the
client with ``MNEMON_SERVER=require`` (it fails instead of silently running in-process). A test
that patches this process's code can only run in-process: mark it ``@pytest.mark.in_process``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
SERVED = os.environ.get("MNEMON_TEST_SERVER") == "1"


def stop_servers(runtime: Path, pid_files: set[Path] | None = None) -> None:
    """Stop every server whose pid file lies under ``runtime`` (or the given ones) and wait for it to exit."""
    pids = []
    for pid_file in pid_files if pid_files is not None else runtime.glob("mnemon-*/server-*.pid"):
        try:
            pids.append(int(pid_file.read_text().split("\n")[0]))
        except (OSError, ValueError):
            continue
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    for pid in pids:
        while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
            time.sleep(0.02)


def stop_servers_below(base: Path) -> None:
    """Catch-all: stop every ``mnemon.server`` process whose runtime directory lies under ``base``
    (found through /proc), whatever its pid file says."""
    pids = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if b"mnemon.server" not in (proc / "cmdline").read_bytes():
                continue
            env = dict(e.split(b"=", 1) for e in (proc / "environ").read_bytes().split(b"\0") if b"=" in e)
        except OSError:
            continue
        if env.get(b"XDG_RUNTIME_DIR", b"").startswith(os.fsencode(base)):
            pids.append(int(proc.name))
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


@pytest.fixture(scope="session", autouse=True)
def server_runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A private runtime directory for the session; in served mode, the session's server."""
    runtime = tmp_path_factory.mktemp("runtime")
    runtime.chmod(0o700)
    default = Path(tempfile.gettempdir())  # where a test that dropped XDG_RUNTIME_DIR would start one
    before = set(default.glob(f"mnemon-{os.getuid()}/server-*.pid"))
    saved = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    try:
        if SERVED:
            env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
            env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
            started = subprocess.run([sys.executable, "-m", "mnemon", "server", "start"], env=env,
                                     capture_output=True, text=True, timeout=300)
            assert started.returncode == 0, started.stderr
        yield runtime
    finally:
        stop_servers(runtime)
        stop_servers_below(tmp_path_factory.getbasetemp())
        leaked = set(default.glob(f"mnemon-{os.getuid()}/server-*.pid")) - before
        if leaked:  # a test ran mnemon without the session's environment: stop what it started
            stop_servers(default, leaked)
            print(f"\nwarning: a test started a mnemon server outside the session's runtime dir: {leaked}")
        if saved is None:
            os.environ.pop("XDG_RUNTIME_DIR", None)
        else:
            os.environ["XDG_RUNTIME_DIR"] = saved


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drop every MNEMON_* variable and point the embedder at a closed port (never a real server)."""
    for name in list(os.environ):
        if name.startswith("MNEMON_"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("MNEMON_SERVER", "require" if SERVED else "off")


# The CLI contract suites run against both backends (issue 11): their tests take ``data_dir``,
# whose ``default`` store is, for the ``postgres`` parameter, registered on a fresh schema of the
# session's PostgreSQL server. A test about SQLite's own files is marked ``sqlite_only``.
BOTH_BACKENDS = {
    "test_cli_remember", "test_cli_commands", "test_cli_errors", "test_search", "test_recall", "test_import",
    "test_embed_cli", "test_recall_vectors", "test_inputs_roundtrip",
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sqlite_only: the test inspects SQLite's files; not run on PostgreSQL")
    config.addinivalue_line("markers", "local_only: the test reads the store's files or engine; never remote")


# MNEMON_TEST_REMOTE=sqlite|postgres (scripts/test-remote, issue 25): the same suites with ``default`` a remote
# store behind a live gateway (``mcp serve --http``) whose store is SQLite or PostgreSQL. A test that reads the
# store's own files or this process's engine is marked ``local_only`` (and every ``sqlite_only`` test is).
REMOTE = os.environ.get("MNEMON_TEST_REMOTE", "")


# Tests of those suites that cannot run against a remote store, and why (each still runs locally). A test that
# checks what a command stored reads the gateway's store (tests.gateway_server.store_dir), so only these remain.
_GATEWAY_NAME = "asserts the store's local name or path; a remote command reports the gateway's store, by its name there"
_SETTINGS = ("sets MNEMON_MAX_INSIGHTS / MNEMON_AUTO_PRUNE_MIN_AGE in this process; a gateway's store prunes by "
             "the settings of the gateway's own environment, which a client does not choose")
_NO_REMOTE_FORM = "has no remote form (its 'has no remote form' error is tested in tests/test_gateway_remote.py)"
REMOTE_SKIPS = {
    "test_status_layout_for_hooks": _GATEWAY_NAME,
    "test_receipt_hashes_instead_of_raw": _GATEWAY_NAME,
    "test_store_resolution_precedence": _GATEWAY_NAME + " (and resolves several local stores)",
    "test_readonly_refusals_and_missing_database": "gc --compact " + _NO_REMOTE_FORM + "; a missing database file is "
                                                   "a local notion",
    "test_store_subcommands_and_messages": "store subcommands act on the client's own data directory",
    "test_legacy_database_is_migrated_once": "migrates a legacy database file in the client's data directory",
    "test_auto_prune_without_grace": _SETTINGS,
    "test_auto_prune_respects_grace_then_prunes_aged_rows": _SETTINGS,
    "test_auto_prune_when_every_row_past_the_grace_is_immune": _SETTINGS,
    "test_a_grace_longer_than_go_allows_warns_and_uses_default": _SETTINGS,
    "test_an_integer_setting_go_cannot_read_warns_and_uses_default": _SETTINGS,
    "test_batched_import_equals_one_by_one": "patches this process's import batch size; the gateway's workers keep "
                                             "theirs",
    "test_a_long_query_is_led_by_its_rare_terms": "patches this process's long-query bound "
                                                  "(retrieve.LONG_QUERY_TERMS); the gateway's workers keep theirs",
    "test_missing_stemmer_library_is_one_error_line": "hides PyStemmer from this process; a remote store's recall "
                                                      "and writes run in the gateway, which has it",
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    module = metafunc.module.__name__.rsplit(".", 1)[-1]
    if "backend" in metafunc.fixturenames and module in BOTH_BACKENDS:
        both = metafunc.definition.get_closest_marker("sqlite_only") is None
        if REMOTE:
            local = metafunc.definition.get_closest_marker("local_only") is not None or not both
            why = REMOTE_SKIPS.get(metafunc.function.__name__, "marked local_only" if local else "")
            marks = [pytest.mark.skip(reason=f"not remote: {why}")] if why else []
            metafunc.parametrize("backend", [pytest.param(f"remote-{REMOTE}", marks=marks)], indirect=True)
            return
        metafunc.parametrize("backend", ["sqlite", "postgres"] if both else ["sqlite"], indirect=True)


@pytest.fixture
def pg_db(pg_url: str) -> Iterator[str]:
    """A fresh, empty database on the session's server; its libpq conninfo."""
    import uuid

    import psycopg
    from psycopg import sql

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield psycopg.conninfo.make_conninfo(pg_url, dbname=name)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A PostgreSQL server for the session: ``MNEMON_TEST_POSTGRES_URL`` or a private cluster."""
    from tests import pg_cluster

    if pg_cluster.EXTERNAL_URL:
        yield pg_cluster.EXTERNAL_URL
        return
    reason = ""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        reason = "psycopg is not installed (pip install 'mnemon[postgres]')"
    bindir = pg_cluster.find_binaries()
    if not reason and bindir is None:
        reason = f"no PostgreSQL server binaries (initdb, pg_ctl) and no {pg_cluster.URL_ENV}"
    if reason:
        if pg_cluster.REQUIRED:
            pytest.fail(f"{pg_cluster.REQUIRE_ENV}=1 but {reason}")
        pytest.skip(reason)
    assert bindir is not None
    cluster = pg_cluster.Cluster(bindir)
    try:
        cluster.start()
    except (RuntimeError, OSError, KeyError, subprocess.SubprocessError) as exc:
        cluster.stop()
        if pg_cluster.REQUIRED:
            pytest.fail(f"cannot start a PostgreSQL cluster: {exc}")
        pytest.skip(f"cannot start a PostgreSQL cluster: {exc}")
    pg_cluster.ACTIVE = cluster
    try:
        yield cluster.url
    finally:
        pg_cluster.ACTIVE = None
        cluster.stop()


@pytest.fixture
def pg_cluster_handle(pg_url: str) -> object:
    """The session's cluster object (restart tests); skips when the server is external."""
    from tests import pg_cluster

    if pg_cluster.EXTERNAL_URL:
        pytest.skip("the PostgreSQL server is external: it cannot be restarted by the tests")
    assert pg_cluster.ACTIVE is not None
    return pg_cluster.ACTIVE


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture(scope="session")
def remote_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The session's gateway for MNEMON_TEST_REMOTE: its own data dir, no rate limit."""
    from tests.gateway_server import Gateway

    root = tmp_path_factory.mktemp("gateway")
    # --test-clock: the tests that fix the engine's clock (engine_kwargs) send it with each call
    gateway = Gateway(root / "server", root / "gateway.log", "--rate-limit", "0", "--test-clock")
    try:
        yield gateway
    finally:
        gateway.stop()


def _remote_data_dir(path: Path, backend: str, request: pytest.FixtureRequest) -> Iterator[Path]:
    """``path`` whose ``default`` store is a fresh store of the session's gateway, the token in MNEMON_TOKEN."""
    import uuid

    from mnemon.gateway import tokens
    from mnemon.store import registration
    from mnemon.store.connection import ensure_private_dir

    gateway: Any = request.getfixturevalue("remote_gateway")
    name = "s" + uuid.uuid4().hex[:12]
    server_store = gateway.data_dir / "data" / name
    schema = None
    if backend == "remote-postgres":
        from tests import pg_cluster

        url = request.getfixturevalue("pg_url")
        schema = pg_cluster.register(gateway.data_dir, name, url)
    else:
        ensure_private_dir(server_store)
    _, token = tokens.create(gateway.data_dir, name, name, read_only=False, expires_days=None)
    ensure_private_dir(path / "data" / "default")
    registration.write_remote(path / "data" / "default",
                              registration.RemoteRegistration("default", f"{gateway.url}/{name}", "MNEMON_TOKEN"))
    monkeypatch: pytest.MonkeyPatch = request.getfixturevalue("monkeypatch")
    monkeypatch.setenv("MNEMON_TOKEN", token)
    from tests.gateway_server import SERVER_STORES

    SERVER_STORES[path / "data" / "default"] = server_store
    try:
        yield path
    finally:
        SERVER_STORES.pop(path / "data" / "default", None)
        if schema is not None:
            from tests import pg_cluster

            pg_cluster.drop_schema(request.getfixturevalue("pg_url"), schema)


@pytest.fixture
def data_dir(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> Iterator[Path]:
    path = tmp_path / "mnemon-data"
    if backend.startswith("remote-"):
        yield from _remote_data_dir(path, backend, request)
        return
    if backend != "postgres":
        yield path
        return
    from tests import pg_cluster

    url = request.getfixturevalue("pg_url")
    schema = pg_cluster.register(path, "default", url)
    try:
        yield path
    finally:
        pg_cluster.drop_schema(url, schema)


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> object:
        return json.loads(self.out)


class Cli:
    """Run ``mnemon`` in-process through ``main(argv)`` with a given data dir (fast path); in
    served mode (``MNEMON_TEST_SERVER=1``) through the session's server with real descriptors."""

    def __init__(self, data_dir: Path, capsys: pytest.CaptureFixture[str], served: bool = SERVED) -> None:
        self.data_dir = data_dir
        self.capsys = capsys
        self.served = served

    def __call__(self, *args: str, stdin: bytes | None = None) -> Result:
        argv = ["--data-dir", str(self.data_dir), *args]
        # A NUL cannot be in a real process's argv (execve): such tests stay in-process.
        if self.served and not any("\x00" in a for a in argv):
            return served_call(argv, stdin=stdin)
        from mnemon.cli import main

        self.capsys.readouterr()
        code = main(argv)
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def ok(self, *args: str) -> object:
        res = self(*args)
        assert res.code == 0, res.err
        return res.json()


@pytest.fixture
def cli(data_dir: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest) -> Cli:
    return Cli(data_dir, capsys, served=SERVED and request.node.get_closest_marker("in_process") is None)


def served_call(argv: list[str], *, stdin: bytes | None = None) -> Result:
    """Run one command through the running server with files as its stdio; fails if not served."""
    from mnemon import client

    with tempfile.TemporaryFile() as inp, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        inp.write(stdin or b"")
        inp.seek(0)
        stdio = [("utf-8", "strict"), ("utf-8", "strict"), ("utf-8", "backslashreplace")]
        code = client.serve([os.fsencode(a) for a in argv], (inp.fileno(), out.fileno(), err.fileno()), stdio,
                            dict(os.environb), os.getcwdb())
        assert code is not None, "the session's mnemon server did not take the command"
        out.seek(0)
        err.seek(0)
        return Result(code, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"))


def run_process(
    args: list[str], *, data_dir: Path | None = None, stdin: bytes | None = None, env: dict[str, str] | None = None,
    timeout: float = 60,
) -> Result:
    """Run ``python -m mnemon`` as a whole process (as an agent hook would)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
    argv = [sys.executable, "-m", "mnemon"]
    if data_dir is not None:
        argv += ["--data-dir", str(data_dir)]
    proc = subprocess.run(argv + args, input=stdin, capture_output=True, timeout=timeout, env=full_env)
    return Result(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """For `mnemon setup`: a temporary HOME and project directory, the project being the current directory,
    and no variable that moves a host's config dir."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("KIMI_CODE_HOME", "OPENCODE_CONFIG_DIR", "PI_CODING_AGENT_DIR", "HERMES_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(project)
    return home, project
