"""The benchmark suites run once, untimed, in CI so that they cannot rot (architecture §9).

``bench/`` has its own conftest (seeded generators, the environment header), so it runs as its
own pytest session rather than beside ``tests/``.
"""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def test_benchmarks_run_once_untimed() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "bench", "--benchmark-disable", "-q", "-p", "no:cacheprovider"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert " passed" in proc.stdout
