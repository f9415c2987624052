"""A private, throwaway PostgreSQL cluster for the tests (issue 11), or the server named by
``MNEMON_TEST_POSTGRES_URL``.

The cluster lives in a fresh temporary directory: ``initdb`` (trust authentication, no fsync: the
data is thrown away), then ``pg_ctl start`` listening on a Unix socket in that directory only
(``listen_addresses=''``: no TCP at all). PostgreSQL refuses to run as root, so when the tests
run as root the cluster runs as the unprivileged ``nobody`` user. Without the server binaries
(and without the URL) the PostgreSQL tests skip with a one-line reason, unless
``MNEMON_REQUIRE_POSTGRES=1`` (set by ``.ci/run``), where the missing server fails the run.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

URL_ENV = "MNEMON_TEST_POSTGRES_URL"
REQUIRE_ENV = "MNEMON_REQUIRE_POSTGRES"
# Read at import: the tests' autouse fixture clears every MNEMON_* variable.
EXTERNAL_URL = os.environ.get(URL_ENV, "")
REQUIRED = os.environ.get(REQUIRE_ENV) == "1"
UNPRIVILEGED = "nobody"
ACTIVE: Cluster | None = None  # the session's cluster (set by the pg_url fixture)


def find_binaries() -> Path | None:
    """The directory holding initdb, pg_ctl and postgres (PATH first, then Debian's layout)."""
    found = shutil.which("initdb")
    candidates = [Path(found).resolve().parent] if found else []
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for folder in candidates:
        if all((folder / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


class Cluster:
    """One started cluster; ``url`` is a libpq URL to its ``postgres`` database over the socket."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.base = Path(tempfile.mkdtemp(prefix="mnemon-pg-"))
        self.data = self.base / "data"
        self.user: str | None = UNPRIVILEGED if os.geteuid() == 0 else None
        self.url = f"postgresql:///postgres?host={self.base}&user=postgres"

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, object] = {}
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            kwargs = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
        return subprocess.run(
            [str(self.bindir / args[0]), *args[1:]], capture_output=True, text=True, timeout=timeout,
            cwd=self.base, **kwargs,  # type: ignore[arg-type]
        )

    def _options(self) -> str:
        # No TCP at all; no fsync: the data is thrown away with the directory.
        return f"-c listen_addresses='' -k {self.base} -c fsync=off -c synchronous_commit=off -c max_connections=200"

    def start(self) -> None:
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.base, entry.pw_uid, entry.pw_gid)
        self.base.chmod(0o755)  # the socket must be reachable by the test process
        done = self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr.strip()[-500:]}")
        done = self._run("pg_ctl", "-D", str(self.data), "-o", self._options(), "-l", str(self.base / "log"), "-w", "start")
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {done.stderr.strip()[-500:]}")

    def restart(self, mode: str = "fast") -> None:
        """Restart the server (fault tests): every open connection is dropped."""
        # With -l the server never holds our pipes (communicate would wait for it otherwise).
        done = self._run(
            "pg_ctl", "-D", str(self.data), "-m", mode, "-o", self._options(), "-l", str(self.base / "log"), "-w", "restart"
        )
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl restart failed: {done.stderr.strip()[-500:]}")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=60)
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


def register(data_dir: Path, store: str, url: str) -> str:
    """Register ``store`` in ``data_dir`` as a PostgreSQL store on a schema of its own; return the schema.

    Each test gets a fresh schema (created by the first writer) so tests never see each other's
    rows; the registration file is the one ``store create --postgres`` writes.
    """
    from mnemon.store import registration
    from mnemon.store.connection import ensure_private_dir

    schema = f"t{uuid.uuid4().hex[:12]}_{store}"
    store_dir = data_dir / "data" / store
    ensure_private_dir(store_dir)
    registration.write(store_dir, registration.Registration(store, url, schema))
    return schema


def drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
