"""``scripts/e2e`` (the whole-process acceptance run) passes against this checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.skipif(shutil.which("bash") is None, reason="scripts/e2e is a bash script")
def test_e2e_script_passes() -> None:
    env = dict(os.environ, MNEMON_BIN=f"{sys.executable} -m mnemon", PYTHONPATH=str(REPO))
    proc = subprocess.run(["bash", "scripts/e2e"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "e2e: all checks passed" in proc.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="scripts/e2e is a bash script")
def test_e2e_script_passes_on_a_postgres_store(pg_url: str) -> None:
    """The same acceptance run with the default store in PostgreSQL (a fresh database of its own)."""
    import uuid

    import psycopg
    from psycopg import sql

    name = f"e2e_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        url = psycopg.conninfo.make_conninfo(pg_url, dbname=name)
        env = dict(os.environ, MNEMON_BIN=f"{sys.executable} -m mnemon", PYTHONPATH=str(REPO), MNEMON_E2E_POSTGRES=url)
        proc = subprocess.run(["bash", "scripts/e2e"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "e2e: all checks passed" in proc.stdout
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
