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
