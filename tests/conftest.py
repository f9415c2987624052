"""Shared fixtures: a private data dir, a clean environment, and helpers to drive the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drop every MNEMON_* variable and point the embedder at a closed port (never a real server)."""
    for name in list(os.environ):
        if name.startswith("MNEMON_"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MNEMON_EMBED_ENDPOINT", "http://127.0.0.1:9")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "mnemon-data"
    return path


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> object:
        return json.loads(self.out)


class Cli:
    """Run ``mnemon`` in-process through ``main(argv)`` with a given data dir (fast path)."""

    def __init__(self, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.data_dir = data_dir
        self.capsys = capsys

    def __call__(self, *args: str, stdin: bytes | None = None) -> Result:
        from mnemon.cli import main

        self.capsys.readouterr()
        code = main(["--data-dir", str(self.data_dir), *args])
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def ok(self, *args: str) -> object:
        res = self(*args)
        assert res.code == 0, res.err
        return res.json()


@pytest.fixture
def cli(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(data_dir, capsys)


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
