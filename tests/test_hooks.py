"""The installed hook scripts: the output format each host reads, fail-open behaviour, wall time."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import run_process

HOOK_DIRS = {"claude-code": ".claude", "codex": ".codex", "cursor": ".cursor"}
STOP_PAYLOAD = {"session_id": "s1", "hook_event_name": "Stop", "stop_hook_active": False}
HEADER = "[mnemon] Memory active ({n} insights, {m} edges)."


def install(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, *extra: str) -> Path:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir(exist_ok=True)
    project.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(project)
    res = cli("setup", "--target", target, "--compact", *extra)
    assert res.code == 0, res.err
    return project / HOOK_DIRS[target] / "hooks" / "mnemon"


def run_hook(script: Path, payload: object = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run a hook the way a host does: from another directory, JSON on stdin, a minimal environment."""
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ["HOME"]}
    # the session's warm-server settings (conftest): a hook must never start a server elsewhere
    base.update({k: os.environ[k] for k in ("XDG_RUNTIME_DIR", "MNEMON_SERVER") if k in os.environ})
    stdin = json.dumps(payload if payload is not None else {"session_id": "s1"})
    return subprocess.run(
        [str(script)], input=stdin, capture_output=True, text=True, env={**base, **(env or {})}, cwd="/",
        timeout=30,
    )


def seed(cli) -> tuple[int, int]:
    cli.ok("remember", "Chose Qdrant because Rust performance is critical", "--cat", "decision")
    cli.ok("remember", "Qdrant runs in Docker on port 6333", "--cat", "fact")
    status = cli.ok("status")
    return status["total_insights"], status["edge_count"]


def test_claude_code_hooks_print_plain_context(cli, tmp_path, monkeypatch):
    hooks = install(cli, tmp_path, monkeypatch, "claude-code")
    n, m = seed(cli)
    prime = run_hook(hooks / "prime.sh", {"hook_event_name": "SessionStart", "source": "startup"})
    assert prime.returncode == 0 and prime.stderr == ""
    first, _, rest = prime.stdout.partition("\n")
    assert first == HEADER.format(n=n, m=m) and m > 0
    assert "## How to use mnemon memory" in rest and "Never store secrets" in rest
    remind = run_hook(hooks / "user_prompt.sh", {"hook_event_name": "UserPromptSubmit", "prompt": "hi"})
    assert remind.returncode == 0 and remind.stdout.startswith("[mnemon] ") and "mnemon recall" in remind.stdout
    nudge = run_hook(hooks / "stop.sh", STOP_PAYLOAD)
    assert nudge.returncode == 0
    decision = json.loads(nudge.stdout)
    assert decision["decision"] == "block" and "mnemon remember" in decision["reason"]
    again = run_hook(hooks / "stop.sh", {**STOP_PAYLOAD, "stop_hook_active": True})
    assert again.returncode == 0 and again.stdout == ""  # never loops
    compact = run_hook(hooks / "compact.sh", {"hook_event_name": "PreCompact", "trigger": "auto"})
    assert compact.returncode == 0 and compact.stdout.startswith("[mnemon] Context is about to be compacted")


def test_codex_hooks_answer_json(cli, tmp_path, monkeypatch):
    hooks = install(cli, tmp_path, monkeypatch, "codex")
    n, m = seed(cli)
    assert not (hooks / "compact.sh").exists()  # Codex has no compaction event
    prime = json.loads(run_hook(hooks / "prime.sh").stdout)
    context = prime["hookSpecificOutput"]
    assert context["hookEventName"] == "SessionStart"
    assert context["additionalContext"].startswith(HEADER.format(n=n, m=m) + "\n\n## How to use mnemon memory")
    assert context["additionalContext"].rstrip("\n").endswith((Path(cli.data_dir) / "prompt/guide.md").read_text()
                                                              .rstrip("\n"))  # the guide survives JSON escaping
    remind = json.loads(run_hook(hooks / "user_prompt.sh").stdout)["hookSpecificOutput"]
    assert remind["hookEventName"] == "UserPromptSubmit" and "`mnemon recall \"<topic>\"`" in remind["additionalContext"]
    # Stop (setup-targets §13): a system message, the turn allowed to end; never a "decision": "block"
    stop = json.loads(run_hook(hooks / "stop.sh", STOP_PAYLOAD).stdout)
    assert stop["continue"] is True and set(stop) == {"continue", "systemMessage"}
    assert stop["systemMessage"].startswith("[mnemon] Consider") and "mnemon remember" in stop["systemMessage"]
    assert run_hook(hooks / "stop.sh", {**STOP_PAYLOAD, "stop_hook_active": True}).stdout == ""
    evaluated = {**STOP_PAYLOAD, "last_assistant_message": "Stored the decision with mnemon remember."}
    assert run_hook(hooks / "stop.sh", evaluated).stdout == ""  # the answer already evaluated memory


def test_cursor_hooks_answer_json(cli, tmp_path, monkeypatch):
    hooks = install(cli, tmp_path, monkeypatch, "cursor")
    n, m = seed(cli)
    assert not (hooks / "user_prompt.sh").exists()  # beforeSubmitPrompt cannot add context
    prime = json.loads(run_hook(hooks / "prime.sh", {"hook_event_name": "sessionStart"}).stdout)
    assert prime["additional_context"].startswith(HEADER.format(n=n, m=m))
    stop = json.loads(run_hook(hooks / "stop.sh", {"status": "completed", "loop_count": 0}).stdout)
    assert "mnemon remember" in stop["followup_message"]
    assert run_hook(hooks / "stop.sh", {"status": "completed", "loop_count": 1}).stdout == ""
    assert run_hook(hooks / "stop.sh", {"status": "aborted", "loop_count": 0}).stdout == ""
    compact = json.loads(run_hook(hooks / "compact.sh", {"trigger": "auto"}).stdout)
    assert compact["user_message"].startswith("[mnemon] Context is about to be compacted")


@pytest.mark.parametrize("target", ["claude-code", "codex", "cursor"])
def test_hooks_fail_open(cli, tmp_path, monkeypatch, target):
    hooks = install(cli, tmp_path, monkeypatch, target)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    # mnemon itself fails (data dir is a file): prime says nothing rather than a broken header.
    broken = run_hook(hooks / "prime.sh", env={"MNEMON_DATA_DIR": str(blocker)})
    assert (broken.returncode, broken.stdout) == (0, "")
    # mnemon (its interpreter) is gone entirely.
    text = (hooks / "prime.sh").read_text()
    (hooks / "prime.sh").write_text(text.replace("MNEMON_PYTHON=", "MNEMON_PYTHON=/nonexistent/python #", 1))
    gone = run_hook(hooks / "prime.sh")
    assert (gone.returncode, gone.stdout, gone.stderr) == (0, "", "")
    # Garbage on stdin, or none at all, does not break the fixed-text hooks.
    for script in hooks.glob("*.sh"):
        if script.name != "prime.sh":
            res = subprocess.run([str(script)], input="\x00not json", capture_output=True, text=True, timeout=30)
            assert res.returncode == 0


def _import_draft(path: Path, n: int) -> None:
    topics = ["Qdrant", "Postgres", "Redis", "Kafka", "Rust", "Python", "Docker", "Nginx", "Grafana", "Vault"]
    insights = [
        {"content": f"Insight {i}: chose {topics[i % 10]} for service {i // 10} because latency budget {i} ms matters",
         "category": ["decision", "fact", "insight", "preference", "context", "general"][i % 6]}
        for i in range(n)
    ]
    path.write_text(json.dumps({"schema_version": "1", "insights": insights}))


def test_hook_wall_time_on_a_1k_store(cli, tmp_path, monkeypatch, capsys):
    hooks = install(cli, tmp_path, monkeypatch, "claude-code")
    draft = tmp_path / "draft.json"
    _import_draft(draft, 1000)
    imported = run_process(["import", str(draft)], data_dir=cli.data_dir, env={"MNEMON_MAX_INSIGHTS": "0"})
    assert imported.code == 0, imported.err
    timings: dict[str, float] = {}
    for name in ("prime.sh", "user_prompt.sh", "stop.sh", "compact.sh"):
        run_hook(hooks / name, STOP_PAYLOAD)  # warm the page cache and numba cache
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            res = run_hook(hooks / name, STOP_PAYLOAD)
            samples.append(time.perf_counter() - start)
            assert res.returncode == 0 and res.stdout
        timings[name] = statistics.median(samples)
    assert run_hook(hooks / "prime.sh").stdout.startswith("[mnemon] Memory active (1000 insights, ")
    with capsys.disabled():
        print("\nhook wall time, 1k store, median of 5: "
              + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in timings.items()))
    # Generous bounds for a shared 2-core machine; the point is that no hook makes the agent wait.
    assert timings["prime.sh"] < 3.0
    assert all(timings[k] < 1.0 for k in ("user_prompt.sh", "stop.sh", "compact.sh"))



def test_hooks_start_the_console_script_and_fall_back_to_python_m(cli, tmp_path, monkeypatch):
    """The hooks run this interpreter's ``mnemon`` script (no runpy per call) and, when it is gone,
    ``python -m mnemon``: the same output either way."""
    import shlex
    import sys

    from mnemon.setup.hooks import console_script

    script = Path(sys.executable).absolute().with_name("mnemon")
    if not (script.is_file() and os.access(script, os.X_OK)):
        pytest.skip("no console script beside this interpreter (not a pip install)")
    assert console_script() == str(script)
    hooks = install(cli, tmp_path, monkeypatch, "claude-code")
    n, m = seed(cli)
    text = (hooks / "prime.sh").read_text()
    assert f"MNEMON_SCRIPT={shlex.quote(str(script))}\n" in text
    by_script = run_hook(hooks / "prime.sh", {"hook_event_name": "SessionStart", "source": "startup"})
    (hooks / "prime.sh").write_text(text.replace("MNEMON_SCRIPT=", "MNEMON_SCRIPT=/nonexistent/mnemon #", 1))
    by_module = run_hook(hooks / "prime.sh", {"hook_event_name": "SessionStart", "source": "startup"})
    assert by_script.returncode == by_module.returncode == 0
    assert by_script.stdout == by_module.stdout and by_script.stdout.startswith(HEADER.format(n=n, m=m))


def test_a_script_of_another_interpreter_is_not_taken_for_ours(tmp_path, monkeypatch):
    import sys

    from mnemon.setup import hooks

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python"
    python.symlink_to(sys.executable)
    monkeypatch.setattr(sys, "executable", str(python))
    assert hooks.console_script() == ""  # none installed
    script = bin_dir / "mnemon"
    script.write_text("#!/elsewhere/bin/python3\nimport sys\nfrom mnemon.client import main\nsys.exit(main())\n")
    script.chmod(0o755)
    assert hooks.console_script() == ""  # another venv's interpreter
    script.write_text(f"#!{bin_dir}/python3\nimport sys\nfrom other.cli import main\nsys.exit(main())\n")
    assert hooks.console_script() == ""  # another program called mnemon
    script.write_text(f"#!{bin_dir}/python3\nimport sys\nfrom mnemon.client import main\nsys.exit(main())\n")
    assert hooks.console_script() == str(script)
    script.chmod(0o644)
    assert hooks.console_script() == ""  # not executable
