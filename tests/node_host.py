"""Node for the plugin tests: the interpreter, and the npm packages the Pi extension is checked with.

Pi's extension is TypeScript that Pi loads with jiti; the tests load it with the same jiti and
type-check it with tsc against the Pi SDK's own types (the version the Go extension pins), and check
the OpenCode plugin's export against OpenCode's plugin SDK types (``@opencode-ai/plugin``). The
packages are installed once into a cache directory: ``$MNEMON_TEST_NODE_MODULES`` or
``~/.cache/mnemon-test-node`` (``.ci/run`` fills it before the tests: ``python -m tests.node_host``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

NODE = shutil.which("node")
NPM = shutil.which("npm")
PI_SDK = "@earendil-works/pi-coding-agent"
OPENCODE_SDK = "@opencode-ai/plugin"
PACKAGES = (f"{PI_SDK}@0.83.0", f"{OPENCODE_SDK}@1.18.33", "typescript@5.9.3")
# Resolved at import, before any test points HOME at a temporary directory.
CACHE = Path(os.environ.get("MNEMON_TEST_NODE_MODULES") or Path.home() / ".cache" / "mnemon-test-node")
DRIVERS = Path(__file__).resolve().parent / "plugins"


def require_node() -> str:
    if NODE is None:
        pytest.skip("node is not installed (the plugin tests run the plugins under Node)")
    return NODE


def install() -> str:
    """Install the packages into the cache unless they are there; "" on success, else why not."""
    modules = CACHE / "node_modules"
    if all((modules / name / "package.json").is_file() for name in (PI_SDK, OPENCODE_SDK, "typescript")):
        return ""
    if NODE is None or NPM is None:
        return "node/npm is not installed"
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / "package.json").write_text('{"private": true}\n', encoding="utf-8")
    cmd = [NPM, "install", "--no-audit", "--no-fund", "--ignore-scripts", "--prefix", str(CACHE), *PACKAGES]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return f"npm install {' '.join(PACKAGES)} timed out"
    if proc.returncode != 0:
        return f"npm install {' '.join(PACKAGES)} failed: {proc.stderr.strip()[-300:]}"
    return ""


def node_modules() -> Path:
    """The cache's node_modules with the Pi SDK (and its jiti) and typescript, installed on first use."""
    require_node()
    problem = install()
    if problem:
        pytest.skip(f"cannot check the Pi extension: {problem}")
    return CACHE / "node_modules"


def drive(driver: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> dict:
    """Run ``tests/plugins/<driver>.mjs`` under Node; its single JSON line, and its stderr must be empty."""
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/")}
    proc = subprocess.run(
        [require_node(), str(DRIVERS / f"{driver}.mjs"), *args], capture_output=True, text=True, cwd="/",
        env={**base, **(env or {})}, timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr  # the plugins print nothing the host could misread
    lines = proc.stdout.splitlines()
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0])


if __name__ == "__main__":  # .ci/run: fetch the packages before the tests
    reason = install()
    print(f"Pi extension checks will be skipped: {reason}" if reason else f"node packages ready in {CACHE}")
