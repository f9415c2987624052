"""The hook scripts of the hosts in setup-targets.md §3-11, run the way each host runs them (its JSON event on
stdin, its command line), asserting the exact output the host reads; and recall on prompt on a 1k store."""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, run_process

JSON_HOSTS = ["zcode", "trae", "qoder", "qoderwork", "codebuddy", "workbuddy"]
DIRS = {"zcode": ".zcode", "trae": ".trae", "qoder": ".qoder", "qoderwork": ".qoderwork", "codebuddy": ".codebuddy",
        "workbuddy": ".workbuddy", "kimi": ".kimi-code", "hermes": ".hermes", "claude-code": ".claude"}
HEADER = "[mnemon] Memory active ({n} insights, {m} edges)."
REMINDER = ("[mnemon] If this request may depend on earlier decisions, preferences or project facts, run "
            "`mnemon recall \"<topic>\"` first. Remember durable insights with `mnemon remember` (never secrets).")
RECALL_TITLE = "[mnemon] Relevant memories for this prompt (from mnemon recall):"
QDRANT_FACT = "Qdrant runs in Docker on port 6333 for the search service"
RELEVANT = "Which port does our Qdrant instance listen on?"
UNRELATED = "Please summarise the plot of Moby Dick in three sentences"


def install(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, *extra: str) -> Path:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir(exist_ok=True)
    project.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("KIMI_CODE_HOME", raising=False)
    monkeypatch.chdir(project)
    res = cli("setup", "--target", target, "--global", *extra)
    assert res.code == 0, res.err
    return home / DIRS[target] / ("agent-hooks/mnemon" if target == "hermes" else "hooks/mnemon")


def host_argv(target: str, script: Path) -> list[str]:
    """The command line the host builds from its registration (setup-targets.md)."""
    if target == "zcode":
        return ["bash", str(script)]  # {type: "process", command: "bash", args: [script]}
    if target == "kimi":
        return ["sh", "-c", shlex.quote(str(script))]  # Kimi runs `command` with sh -c
    if target == "hermes":
        return shlex.split(str(script))  # Hermes: shlex.split, no shell
    return [str(script)]


def run_hook(target: str, script: Path, payload: object = None, env: dict[str, str] | None = None,
             raw: str | None = None) -> subprocess.CompletedProcess:
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ["HOME"],
            "MNEMON_EMBED_ENDPOINT": "http://127.0.0.1:9"}
    stdin = raw if raw is not None else json.dumps(payload if payload is not None else {"session_id": "s1"})
    return subprocess.run(host_argv(target, script), input=stdin, capture_output=True, text=True,
                          env={**base, **(env or {})}, cwd="/", timeout=30)


def seed(cli) -> tuple[int, int]:
    cli.ok("remember", "Chose Qdrant because Rust performance is critical", "--cat", "decision")
    cli.ok("remember", QDRANT_FACT, "--cat", "fact")
    status = cli.ok("status")
    return status["total_insights"], status["edge_count"]


def context(stdout: str, event: str) -> str:
    """The additionalContext of exactly one hookSpecificOutput object for ``event``."""
    data = json.loads(stdout)
    assert list(data) == ["hookSpecificOutput"] and stdout.count("\n") == 1
    assert data["hookSpecificOutput"]["hookEventName"] == event
    assert list(data["hookSpecificOutput"]) == ["hookEventName", "additionalContext"]
    return data["hookSpecificOutput"]["additionalContext"]


@pytest.mark.parametrize("target", JSON_HOSTS)
def test_claude_compatible_hosts_answer_hook_specific_output(cli, tmp_path, monkeypatch, target):
    hooks = install(cli, tmp_path, monkeypatch, target)
    n, m = seed(cli)
    prime = run_hook(target, hooks / "prime.sh", {"hook_event_name": "SessionStart", "source": "startup"})
    assert prime.returncode == 0 and prime.stderr == ""
    text = context(prime.stdout, "SessionStart")
    assert text.startswith(HEADER.format(n=n, m=m) + "\n\n## How to use mnemon memory")
    prompt = run_hook(target, hooks / "user_prompt.sh", {"hook_event_name": "UserPromptSubmit", "prompt": RELEVANT})
    assert prompt.returncode == 0 and context(prompt.stdout, "UserPromptSubmit") == REMINDER  # recall: off here
    stop = run_hook(target, hooks / "stop.sh", {"hook_event_name": "Stop", "stop_hook_active": False,
                                                "last_assistant_message": "Done: the port is 6333."})
    decision = json.loads(stop.stdout)
    assert stop.returncode == 0 and list(decision) == ["decision", "reason"] and decision["decision"] == "block"
    assert decision["reason"].startswith("[mnemon] ") and "mnemon remember" in decision["reason"]
    for quiet in ({"stop_hook_active": True}, {"last_assistant_message": "[mnemon] Nothing durable here."},
                  {"last_assistant_message": "已评估，无需写入记忆"}):
        res = run_hook(target, hooks / "stop.sh", {"hook_event_name": "Stop", **quiet})
        assert (res.returncode, res.stdout, res.stderr) == (0, "", ""), quiet
    garbage = run_hook(target, hooks / "stop.sh", raw="\x00not json")  # malformed input still asks (ZCode's rule)
    assert garbage.returncode == 0 and json.loads(garbage.stdout)["decision"] == "block"


def test_kimi_hooks(cli, tmp_path, monkeypatch):
    hooks = install(cli, tmp_path, monkeypatch, "kimi")
    n, m = seed(cli)
    prime = run_hook("kimi", hooks / "prime.sh", {"hook_event_name": "SessionStart", "source": "startup"})
    assert context(prime.stdout, "SessionStart").startswith(HEADER.format(n=n, m=m))
    prompt = run_hook("kimi", hooks / "user_prompt.sh", {"hook_event_name": "UserPromptSubmit", "prompt": "hi"})
    assert context(prompt.stdout, "UserPromptSubmit") == REMINDER
    stop = run_hook("kimi", hooks / "stop.sh", {"hook_event_name": "Stop", "stop_hook_active": False})
    # Kimi: exit 2 blocks the stop and feeds stderr to the model; stdout stays empty.
    assert stop.returncode == 2 and stop.stdout == "" and stop.stderr.startswith("[mnemon] Before finishing")
    again = run_hook("kimi", hooks / "stop.sh", {"hook_event_name": "Stop", "stop_hook_active": True})
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")


def test_hermes_hooks_hand_context_to_pre_llm_call(cli, tmp_path, monkeypatch):
    hooks = install(cli, tmp_path, monkeypatch, "hermes", "--no-recall-on-prompt")
    n, m = seed(cli)
    state = Path(os.environ["HOME"]) / ".hermes/mnemon"
    prime = run_hook("hermes", hooks / "prime.sh", {"hook_event_name": "on_session_start", "session_id": "s"})
    assert (prime.returncode, prime.stdout) == (0, "{}\n")
    assert (state / "prime-context.txt").read_text().startswith(HEADER.format(n=n, m=m))
    nudge = run_hook("hermes", hooks / "nudge.sh", {"hook_event_name": "post_llm_call",
                                                     "extra": {"response_text": "The port is 6333."}})
    assert (nudge.returncode, nudge.stdout) == (0, "{}\n") and (state / "pending-nudge.txt").is_file()
    remind = run_hook("hermes", hooks / "remind.sh", {"hook_event_name": "pre_llm_call",
                                                       "extra": {"user_message": "hi"}})
    assert remind.returncode == 0 and list(json.loads(remind.stdout)) == ["context"]
    text = json.loads(remind.stdout)["context"]
    assert text.startswith(HEADER.format(n=n, m=m)) and "[mnemon] Consider: did the last exchange" in text
    assert text.endswith("(never secrets).") and "Evaluate: recall needed?" in text
    assert not (state / "prime-context.txt").exists() and not (state / "pending-nudge.txt").exists()  # consumed
    quiet = run_hook("hermes", hooks / "nudge.sh", {"extra": {"response": "Stored it with mnemon remember."}})
    assert quiet.stdout == "{}\n" and not (state / "pending-nudge.txt").exists()
    later = json.loads(run_hook("hermes", hooks / "remind.sh", {"extra": {"user_message": "x"}}).stdout)["context"]
    assert later.startswith("[mnemon] Evaluate: recall needed?")
    custom = tmp_path / "hermes-home"  # the scripts honour HERMES_HOME, as Hermes' own do
    run_hook("hermes", hooks / "prime.sh", env={"HERMES_HOME": str(custom)})
    assert (custom / "mnemon/prime-context.txt").is_file()


@pytest.mark.parametrize("target", ["zcode", "kimi", "hermes"])
def test_hooks_fail_open_when_mnemon_fails(cli, tmp_path, monkeypatch, target):
    hooks = install(cli, tmp_path, monkeypatch, target, "--recall-on-prompt")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    for script in sorted(hooks.glob("*.sh")):
        res = run_hook(target, script, {"prompt": RELEVANT, "extra": {"user_message": RELEVANT}},
                       env={"MNEMON_DATA_DIR": str(blocker)})
        assert res.returncode in ((0, 2) if script.name == "stop.sh" else (0,)), (script, res.stderr)
        assert "Traceback" not in res.stderr and "Error" not in res.stdout
        assert RECALL_TITLE not in res.stdout and "Memory active" not in res.stdout


# -- recall on prompt ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def store_1k(tmp_path_factory) -> Path:
    """A 1,000-insight store from bench/generate.py plus two memories about Qdrant's port."""
    root = tmp_path_factory.mktemp("store1k")
    draft = root / "draft.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "MNEMON_EMBED_ENDPOINT": "http://127.0.0.1:9"}
    subprocess.run([sys.executable, str(REPO / "bench/generate.py"), "--n", "1000", "--out", str(draft),
                    "--edges-per-insight", "5"], check=True, capture_output=True, env=env, timeout=120)
    data = root / "data"
    extra = {"MNEMON_MAX_INSIGHTS": "0", "MNEMON_EMBED_ENDPOINT": "http://127.0.0.1:9"}
    assert run_process(["import", str(draft)], data_dir=data, env=extra).code == 0
    for text, cat in ((QDRANT_FACT, "fact"), ("We chose Qdrant over Milvus because Rust performance is critical",
                                              "decision")):
        assert run_process(["remember", text, "--cat", cat], data_dir=data, env=extra).code == 0
    return data


def recall_lines(text: str) -> list[str]:
    if RECALL_TITLE not in text:
        return []
    block = text.split(RECALL_TITLE + "\n", 1)[1].split("\n\n", 1)[0]
    return block.splitlines()


@pytest.mark.parametrize("target", ["claude-code", "codebuddy", "kimi"])
def test_recall_on_prompt_injects_relevant_hits_only(cli, tmp_path, monkeypatch, store_1k, target):
    hooks = install(cli, tmp_path, monkeypatch, target, "--recall-on-prompt")
    env = {"MNEMON_DATA_DIR": str(store_1k)}
    event = {"hook_event_name": "UserPromptSubmit", "prompt": RELEVANT}
    res = run_hook(target, hooks / "user_prompt.sh", event, env=env)
    assert res.returncode == 0 and res.stderr == ""
    text = res.stdout.rstrip("\n") if target == "claude-code" else context(res.stdout, "UserPromptSubmit")
    lines = recall_lines(text)
    assert text.startswith(RECALL_TITLE + "\n") and text.endswith("\n\n" + REMINDER)
    assert lines[0] == f"- [fact relevance={lines[0].split('relevance=')[1].split(']')[0]}] {QDRANT_FACT}"
    assert 1 <= len(lines) <= 3 and all(float(ln.split("relevance=")[1].split("]")[0]) >= shell_hooks_floor() for ln in lines)
    quiet = run_hook(target, hooks / "user_prompt.sh", {**event, "prompt": UNRELATED}, env=env)
    plain = quiet.stdout.rstrip("\n") if target == "claude-code" else context(quiet.stdout, "UserPromptSubmit")
    assert quiet.returncode == 0 and plain == REMINDER  # nothing injected for an unrelated prompt


def test_recall_on_prompt_stays_silent_when_mnemon_fails_or_the_budget_runs_out(cli, tmp_path, monkeypatch,
                                                                                 store_1k):
    hooks = install(cli, tmp_path, monkeypatch, "codebuddy", "--recall-on-prompt")
    event = {"hook_event_name": "UserPromptSubmit", "prompt": RELEVANT}
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    broken = run_hook("codebuddy", hooks / "user_prompt.sh", event, env={"MNEMON_DATA_DIR": str(blocker)})
    assert broken.returncode == 0 and broken.stderr == "" and context(broken.stdout, "UserPromptSubmit") == REMINDER
    start = time.perf_counter()
    late = run_hook("codebuddy", hooks / "user_prompt.sh", event,
                    env={"MNEMON_DATA_DIR": str(store_1k), "MNEMON_RECALL_BUDGET": "0.05"})
    elapsed = time.perf_counter() - start
    assert late.returncode == 0 and context(late.stdout, "UserPromptSubmit") == REMINDER
    assert elapsed < 1.0
    script = (hooks / "user_prompt.sh").read_text()  # the interpreter is gone entirely
    (hooks / "user_prompt.sh").write_text(script.replace("MNEMON_PYTHON=", "MNEMON_PYTHON=/nonexistent/python #", 1))
    gone = run_hook("codebuddy", hooks / "user_prompt.sh", event, env={"MNEMON_DATA_DIR": str(store_1k)})
    assert gone.returncode == 0 and gone.stderr == "" and context(gone.stdout, "UserPromptSubmit") == REMINDER


def test_hermes_recalls_the_user_message_by_default(cli, tmp_path, monkeypatch, store_1k):
    hooks = install(cli, tmp_path, monkeypatch, "hermes")
    env = {"MNEMON_DATA_DIR": str(store_1k)}
    by_history = {"hook_event_name": "pre_llm_call", "extra": {"conversation_history": [
        {"role": "user", "content": "old question"}, {"role": "assistant", "content": "answer"},
        {"role": "user", "content": [{"type": "text", "text": RELEVANT}]}]}}
    for event in ({"hook_event_name": "pre_llm_call", "extra": {"user_message": RELEVANT}}, by_history):
        text = json.loads(run_hook("hermes", hooks / "remind.sh", event, env=env).stdout)["context"]
        assert recall_lines(text)[0].endswith(QDRANT_FACT)


def feed(target: str, script: Path, event: bytes, env: dict[str, str]) -> tuple[int, str, str, list[Exception]]:
    """Run a hook as a host does, writing its event in a thread while reading its output: (exit status, stdout,
    stderr, what the writer met: a BrokenPipeError when the hook stopped reading before the end)."""
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ["HOME"],
            "MNEMON_EMBED_ENDPOINT": "http://127.0.0.1:9"}
    proc = subprocess.Popen(host_argv(target, script), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**base, **env}, cwd="/")
    met: list[Exception] = []

    def write() -> None:
        try:
            assert proc.stdin is not None
            proc.stdin.write(event)
            proc.stdin.close()
        except OSError as exc:  # BrokenPipeError: EPIPE
            met.append(exc)

    errors: list[bytes] = []
    threads = [threading.Thread(target=write),
               threading.Thread(target=lambda: errors.append(proc.stderr.read()))]  # type: ignore[union-attr]
    for thread in threads:
        thread.start()
    assert proc.stdout is not None
    out = proc.stdout.read()  # not communicate(): it closes stdin under the writer
    proc.wait(timeout=60)
    for thread in threads:
        thread.join(timeout=60)
    return proc.returncode, out.decode(), b"".join(errors).decode(), met


@pytest.mark.parametrize("size", [6 << 20, 20 << 20], ids=["6MB", "20MB"])
def test_an_event_past_4mb_is_read_to_its_end_and_still_recalled(cli, tmp_path, monkeypatch, store_1k, size):
    """Hooks read at most 4 MB of an event: recall was skipped and the rest of stdin left unread, so the host
    writing it met EPIPE. Now the whole event is read (16 MB kept, the rest dropped), and a prompt whose event
    is too big to keep is recalled from its head."""
    hooks = install(cli, tmp_path, monkeypatch, "codebuddy", "--recall-on-prompt")
    env = {"MNEMON_DATA_DIR": str(store_1k)}
    padded = json.dumps({"hook_event_name": "UserPromptSubmit", "transcript": "y" * size, "prompt": RELEVANT})
    # A question with a pasted blob after it: the query is the head of the prompt, as in the plugins.
    huge = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": RELEVANT + "\n\n" + "A" * size})
    for event in (padded, huge):
        code, out, err, met = feed("codebuddy", hooks / "user_prompt.sh", event.encode(), env)
        assert met == [] and code == 0 and err == ""
        text = context(out, "UserPromptSubmit")
        if event is padded and size > 16 << 20:  # too big to keep, and no prompt at its head: no recall
            assert text == REMINDER
        else:
            assert recall_lines(text)[0].endswith(QDRANT_FACT)
    # Stop: the payload read by sh, then handed to the helper (does the answer mention memory?)
    code, out, err, met = feed("codebuddy", hooks / "stop.sh", json.dumps({"last_assistant_message": "y" * size}).encode(),
                               env)
    assert met == [] and code == 0 and json.loads(out)["decision"] == "block"
    nudge = install(cli, tmp_path, monkeypatch, "hermes") / "nudge.sh"  # cat piped into the helper
    code, out, err, met = feed("hermes", nudge, json.dumps({"extra": {"response_text": "y" * size}}).encode(), env)
    assert met == [] and code == 0 and out == "{}\n"


def test_recall_hook_wall_time_on_a_1k_store(cli, tmp_path, monkeypatch, store_1k, capsys):
    hooks = install(cli, tmp_path, monkeypatch, "codebuddy", "--recall-on-prompt")
    event = {"hook_event_name": "UserPromptSubmit", "prompt": RELEVANT}
    env = {"MNEMON_DATA_DIR": str(store_1k)}
    run_hook("codebuddy", hooks / "user_prompt.sh", event, env=env)  # warm the page cache
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        res = run_hook("codebuddy", hooks / "user_prompt.sh", event, env=env)
        samples.append(time.perf_counter() - start)
        assert recall_lines(context(res.stdout, "UserPromptSubmit"))
    with capsys.disabled():
        print(f"\nrecall-on-prompt hook, 1k store, median of 5: {statistics.median(samples) * 1000:.0f} ms")
    assert statistics.median(samples) < 1.5  # within the budget, or it would have injected nothing


def shell_hooks_floor() -> float:
    from mnemon.setup.hooks import RECALL_FLOOR

    return RECALL_FLOOR


def test_recall_floor_is_the_relevance_floor() -> None:
    """The hooks filter on recall's absolute relevance (mnemon.relevance), not on the relative score."""
    from mnemon.relevance import PROMPT_FLOOR

    assert 0 < shell_hooks_floor() == PROMPT_FLOOR < 1

