"""The in-process plugins (OpenClaw hook + plugin, OpenCode plugin, Pi extension) run under Node the
way their hosts run them, against a real store: the exact structures they inject, recall on prompt
(relevant, unrelated), fail-open when mnemon fails, and the time budget when mnemon hangs."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from mnemon import setup as installer
from mnemon.setup import Options, Placement, hooks as shell_hooks, plugin_files, write_prompts
from tests import node_host
from tests.conftest import run_process
from tests.test_hooks_hosts import QDRANT_FACT, RELEVANT, UNRELATED, store_1k  # noqa: F401 (a fixture)

BUDGET_S = shell_hooks.RECALL_BUDGET_SECONDS


def install(target: str, tmp_path: Path, data_dir: Path, *, is_global: bool = False, recall: bool | None = None,
            hooks: tuple[str, ...] = ("prime", "remind", "nudge")) -> Placement:
    placement = installer.place(installer.TARGETS[target], is_global=is_global, home=tmp_path / "home",
                                project=tmp_path / "project", env={})
    installer.install(placement, Options(data_dir, hooks, recall_on_prompt=recall, version="0.3.0"))
    return placement


@pytest.fixture(scope="module")
def store(store_1k: Path) -> Path:  # noqa: F811
    """The shell hooks' 1k store (two memories about Qdrant's port among 1,000 generated ones), with prompts."""
    node_host.require_node()
    write_prompts(store_1k)
    return store_1k


def mnemon_json(data_dir: Path, *args: str) -> dict:
    res = run_process(list(args), data_dir=data_dir, env={"MNEMON_EMBED_ENDPOINT": "http://127.0.0.1:9"})
    assert res.code == 0, res.err
    return json.loads(res.out)


def recalled(data_dir: Path, prompt: str) -> str:
    """What recall on prompt should inject, from the CLI's own `recall --brief` answer (the oracle)."""
    query = " ".join(prompt.split())[: plugin_files.RECALL_PROMPT_CHARS]
    reply = mnemon_json(data_dir, "recall", "--brief", "--limit", str(shell_hooks.RECALL_LIMIT), "--", query)
    hits = [h for h in reply["results"] if h["relevance"] >= shell_hooks.RECALL_FLOOR and not h.get("superseded")]
    if not hits:
        return ""
    lines = ["- [%s relevance=%.2f] %s" % (h.get("category") or "general", h["relevance"], h["excerpt"]) for h in hits]
    return "\n".join(["[mnemon] Relevant memories for this prompt (from mnemon recall):", *lines])


def status_line(data_dir: Path) -> str:
    status = mnemon_json(data_dir, "status")
    return f"[mnemon] Memory active ({status['total_insights']} insights, {status['edge_count']} edges)."


def break_command(path: Path, command: list[str]) -> None:
    """Point an installed plugin at another interpreter command (a missing or a hanging one)."""
    text = path.read_text(encoding="utf-8")
    start = text.index("const CONFIG = ") + len("const CONFIG = ")
    end = text.index("\n};", start) + 2
    config = json.loads(text[start:end])
    config["command"] = command
    path.write_text(text[:start] + json.dumps(config) + text[end:], encoding="utf-8")


def hanging_interpreter(tmp_path: Path) -> tuple[list[str], Path]:
    """A fake interpreter whose helper process sleeps; the budget must kill the whole group."""
    pid_file = tmp_path / "helper.pid"
    script = tmp_path / "hang.sh"
    script.write_text(f"#!/bin/sh\nsleep 30 &\necho $! > {pid_file}\nwait\n", encoding="utf-8")
    script.chmod(0o755)
    return [str(script)], pid_file


def alive(pid: int) -> bool:
    """Running (a killed orphan may stay a zombie until some reaper collects it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def assert_killed(pid_file: Path) -> None:
    pid = int(pid_file.read_text())
    for _ in range(50):
        if not alive(pid):
            return
        time.sleep(0.02)
    os.kill(pid, 9)
    pytest.fail("the hung mnemon's helper outlived the budget")


# --- OpenClaw -----------------------------------------------------------------------------------


def openclaw(tmp_path: Path, data_dir: Path, recall: bool | None = None) -> Path:
    return install("openclaw", tmp_path, data_dir, is_global=True, recall=recall).config_dir


def split_context(result: dict) -> list[str]:
    return result["prependContext"].split("\n\n")


def test_openclaw_prime_hook_and_prompt_plugin(store, tmp_path):
    config_dir = openclaw(tmp_path, store)
    out = node_host.drive("openclaw", str(config_dir), RELEVANT)
    guide = (store / "prompt" / "guide.md").read_text(encoding="utf-8").strip()
    foreign = {"name": "AGENTS.md", "path": "AGENTS.md", "content": "project rules", "missing": False}
    assert out["bootstrapFiles"] == [
        foreign,
        {"name": "MNEMON-GUIDE.md", "path": "mnemon/guide.md", "content": f"{status_line(store)}\n\n{guide}\n",
         "missing": False},
    ]
    assert out["otherEventFiles"] == []  # only agent:bootstrap is handled
    assert out["hooks"] == ["agent_end", "before_prompt_build"]  # compact off by default
    memories = recalled(store, RELEVANT)
    assert QDRANT_FACT in memories
    parts = split_context(out["beforePromptBuild"])
    assert parts[0] == memories
    assert parts[1].startswith("[mnemon] Evaluate: recall needed?")
    assert parts[2].startswith("[mnemon] Consider: does this exchange warrant a remember sub-agent?")
    assert len(parts) == 3 + memories.count("\n\n")
    assert out["agentEnd"] is None


def test_openclaw_unrelated_prompt_and_switches(store, tmp_path):
    config_dir = openclaw(tmp_path, store)
    assert recalled(store, UNRELATED) == ""
    out = node_host.drive("openclaw", str(config_dir), UNRELATED)
    parts = split_context(out["beforePromptBuild"])
    assert [p.split(":")[0] for p in parts] == ["[mnemon] Evaluate", "[mnemon] Consider"]  # no memories
    # MNEMON_RECALL_FLOOR / _LIMIT at run time, as for the shell hooks: no floor, two hits at most.
    out = node_host.drive("openclaw", str(config_dir), RELEVANT,
                          env={"MNEMON_RECALL_FLOOR": "0", "MNEMON_RECALL_LIMIT": "2"})
    memories = split_context(out["beforePromptBuild"])[0].splitlines()
    assert memories[0] == "[mnemon] Relevant memories for this prompt (from mnemon recall):" and len(memories) == 3
    # openclaw.json's plugin config drives the switches: compact on, remind off.
    out = node_host.drive("openclaw", str(config_dir), RELEVANT, json.dumps({"remind": False, "compact": True}))
    assert out["hooks"] == ["agent_end", "before_compaction", "before_prompt_build"]
    assert split_context(out["beforePromptBuild"])[0].startswith("[mnemon] Consider")
    compacted = split_context(out["afterCompaction"])
    assert compacted[0].startswith("[mnemon] Context compaction") and compacted[1].startswith("[mnemon] Consider")
    assert not (store / ".compact-pending").exists()  # consumed by the prompt


def test_openclaw_recall_off_and_failing_mnemon(store, tmp_path):
    config_dir = openclaw(tmp_path, store, recall=False)
    out = node_host.drive("openclaw", str(config_dir), RELEVANT)
    assert [p.split(":")[0] for p in split_context(out["beforePromptBuild"])] == ["[mnemon] Evaluate",
                                                                                  "[mnemon] Consider"]
    config_dir = openclaw(tmp_path, store)
    for rel in ("hooks/mnemon-prime/handler.js", "extensions/mnemon/index.js"):
        break_command(config_dir / rel, [str(tmp_path / "no-such-python")])
    out = node_host.drive("openclaw", str(config_dir), RELEVANT)
    assert len(out["bootstrapFiles"]) == 1  # the foreign file only: no guide to a dead store
    assert [p.split(":")[0] for p in split_context(out["beforePromptBuild"])] == ["[mnemon] Evaluate",
                                                                                  "[mnemon] Consider"]


def test_openclaw_hung_mnemon_is_cut_at_the_budget(store, tmp_path):
    config_dir = openclaw(tmp_path, store)
    command, pid_file = hanging_interpreter(tmp_path)
    break_command(config_dir / "extensions/mnemon/index.js", command)
    out = node_host.drive("openclaw", str(config_dir), RELEVANT)
    assert BUDGET_S * 1000 - 50 <= out["promptMs"] < BUDGET_S * 1000 + 700
    assert "Relevant memories" not in out["beforePromptBuild"]["prependContext"]
    assert_killed(pid_file)


def test_openclaw_a_budget_past_nodes_timer_range_is_capped(store, tmp_path):
    """MNEMON_RECALL_BUDGET=3000000 (s) asked setTimeout for more than 2^31-1 ms: Node wrote a
    TimeoutOverflowWarning to stderr (which drive refuses) and fired at 1 ms, so recall never answered."""
    config_dir = openclaw(tmp_path, store)
    out = node_host.drive("openclaw", str(config_dir), RELEVANT, env={"MNEMON_RECALL_BUDGET": "3000000"})
    assert split_context(out["beforePromptBuild"])[0] == recalled(store, RELEVANT)


BOUNDED_QUERY_CHECK = """
const WORDS = ["a", "b", " ", "\\n", "\\t", "\\u00a0", "\\u2028", "\\ud83d\\ude00", "\\u4e2d", "\\ufeff", "\\ud800", "\\u3000"];
const plain = (text, max) => Array.from(text.replace(/\\s+/g, " ").trim()).slice(0, max).join("").trim();
let seed = 7;
const random = (n) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
let same = 0;
for (let k = 0; k < 20000; k++) {
  let text = "";
  for (let i = random(30); i > 0; i--) text += WORDS[random(WORDS.length)];
  const max = random(12);
  if (boundedQuery(text, max) === plain(text, max)) same++;
}
const huge = "deploy the rsync script ".repeat(3000000);
const started = performance.now();
const query = boundedQuery(huge, 500);
process.stdout.write(JSON.stringify({ same, query, ms: performance.now() - started }) + "\\n");
"""


def test_the_plugins_recall_query_reads_only_the_head_of_a_huge_prompt(tmp_path):
    """boundedQuery collapsed and split a whole prompt before cutting it to 500 characters: 1.5 s and 600 MB
    of the host's own process for a 26 MB prompt, outside any budget. It now scans only the head, with
    the same result as before."""
    node = node_host.require_node()
    runtime = plugin_files.asset("runtime.js")
    check = tmp_path / "check.mjs"
    check.write_text(runtime + "\n" + BOUNDED_QUERY_CHECK, encoding="utf-8")
    proc = subprocess.run([node, str(check)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    out = json.loads(proc.stdout)
    assert out["same"] == 20000
    assert out["query"] == " ".join(("deploy the rsync script " * 30).split())[:500]
    assert out["ms"] < 1000  # the whole-prompt version takes seconds on 72 MB


# --- OpenCode -----------------------------------------------------------------------------------


def opencode(tmp_path: Path, data_dir: Path, recall: bool | None = None) -> Path:
    return install("opencode", tmp_path, data_dir, recall=recall).config_dir / "plugins" / "mnemon.js"


def test_opencode_plugin_hooks(store, tmp_path):
    plugin = opencode(tmp_path, store)
    out = node_host.drive("opencode", str(plugin), RELEVANT)
    assert out["id"] == "mnemon" and out["exports"] == ["id", "server", "setup"]
    assert out["hooks"] == ["dispose", "event", "experimental.chat.messages.transform",
                            "experimental.session.compacting", "shell.env"]
    assert out["env"] == {"PATH": "/usr/bin", "MNEMON_OPENCODE": "1"}
    memories = recalled(store, RELEVANT)
    block, original = out["latestUser"]
    assert original == {"id": "prt_3", "sessionID": "ses_1", "messageID": "msg_3", "type": "text", "text": RELEVANT}
    assert {k: v for k, v in block.items() if k != "text"} == {
        "id": "prt_mnemon_msg_3", "sessionID": "ses_1", "messageID": "msg_3", "type": "text", "synthetic": True}
    body = block["text"].removeprefix("<mnemon_context>\n").removesuffix("\n</mnemon_context>")
    pieces = body.split("\n\n")
    assert pieces[0] == status_line(store)
    assert "\n\n".join(pieces[1:-1]) == memories and QDRANT_FACT in memories
    assert pieces[-1].startswith("[mnemon] When this exchange produces a durable")
    assert [len(p) for p in out["others"]] == [1, 1]  # earlier messages untouched
    assert out["cachedSame"] and out["cachedMs"] < 50  # the tool loop's next call reruns nothing
    assert out["markedUnchanged"]
    assert len(out["compacting"]) == 1 and out["compacting"][0].startswith("## Mnemon Memory\n")
    assert out["logs"] == [{"body": {"service": "mnemon", "level": "info",
                                     "message": out["logs"][0]["body"]["message"]}}]
    assert out["logs"][0]["body"]["message"].startswith("[mnemon] Consider")
    assert out["registered"] == [["shell", "create.before", "function"], ["session", "context", "function"],
                                 ["session", "compaction", "function"]]


def test_opencode_unrelated_failing_and_hung(store, tmp_path):
    plugin = opencode(tmp_path, store)
    assert recalled(store, UNRELATED) == ""
    out = node_host.drive("opencode", str(plugin), UNRELATED)
    pieces = out["latestUser"][0]["text"].split("\n\n")
    assert len(pieces) == 2 and pieces[0].endswith(status_line(store))  # status + reminder, no memories
    # A store that errors (the data dir is a file): nothing is injected, nothing thrown.
    bad = tmp_path / "not-a-dir"
    bad.write_text("x")
    out = node_host.drive("opencode", str(plugin), RELEVANT, env={"MNEMON_DATA_DIR": str(bad)})
    assert out["latestUser"][0]["text"] == "<mnemon_context>\n[mnemon] When this exchange produces a durable " \
        "decision, preference, fact or lesson, store it with `mnemon remember` (never secrets).\n</mnemon_context>"
    # The run-time override of the budget, as for the shell hooks.
    command, pid_file = hanging_interpreter(tmp_path)
    break_command(plugin, command)
    out = node_host.drive("opencode", str(plugin), RELEVANT, env={"MNEMON_RECALL_BUDGET": "0.4"})
    assert 400 - 50 <= out["transformMs"] < 400 + 700
    assert "Relevant memories" not in out["latestUser"][0]["text"]
    assert_killed(pid_file)


def tsc(modules: Path, work: Path, sources: dict[str, str], files: list[str], **options: object) -> None:
    """Type-check ``files`` in ``work`` (with the cache's node_modules) with tsc; fail with its messages."""
    work.mkdir()
    (work / "node_modules").symlink_to(modules)
    for name, text in sources.items():
        (work / name).write_text(text, encoding="utf-8")
    (work / "tsconfig.json").write_text(json.dumps({"compilerOptions": {
        "noEmit": True, "module": "nodenext", "moduleResolution": "nodenext", "target": "es2022",
        "skipLibCheck": True, "types": ["node"], **options}, "files": files}))
    proc = subprocess.run([node_host.require_node(), str(modules / "typescript" / "bin" / "tsc"), "-p", str(work)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_opencode_plugin_matches_the_plugin_sdk_types(store, tmp_path):
    """The default export is a PluginModule and server() resolves to Hooks (OpenCode's own types)."""
    modules = node_host.node_modules()
    plugin = opencode(tmp_path, store)
    check = ('import type { Hooks, PluginInput, PluginModule } from "@opencode-ai/plugin";\n'
             'import plugin from "./mnemon.js";\n'
             "export const module: PluginModule = plugin;\n"
             "export const hooks = (input: PluginInput): Promise<Hooks> => plugin.server(input);\n")
    tsc(modules, tmp_path / "tsc", {"mnemon.js": plugin.read_text(encoding="utf-8"), "check.ts": check},
        ["check.ts"], allowJs=True, strict=True)


# --- Pi -----------------------------------------------------------------------------------------


def pi(tmp_path: Path, data_dir: Path, recall: bool | None) -> Path:
    return install("pi", tmp_path, data_dir, recall=recall).config_dir


def test_pi_extension_type_checks_against_the_pi_sdk(store, tmp_path):
    modules = node_host.node_modules()
    config_dir = pi(tmp_path, store, recall=True)
    tsc(modules, tmp_path / "tsc", {"mnemon.ts": (config_dir / "extensions" / "mnemon.ts").read_text(encoding="utf-8")},
        ["mnemon.ts"])


def test_pi_extension_events(store, tmp_path):
    jiti = node_host.node_modules() / "jiti" / "lib" / "jiti.mjs"
    config_dir = pi(tmp_path, store, recall=True)
    extension = config_dir / "extensions" / "mnemon.ts"
    out = node_host.drive("pi", str(jiti), str(extension), RELEVANT)
    assert out["events"] == ["agent_end", "before_agent_start", "context", "resources_discover", "session_compact",
                             "session_start"]
    assert out["discovered"] == {"skillPaths": [str(config_dir / "skills")]}
    guide = (store / "prompt" / "pi" / "guide.md").read_text(encoding="utf-8").strip()
    prompt = out["beforeStart"]["systemPrompt"]
    assert list(out["beforeStart"]) == ["systemPrompt"]  # nothing persisted as a message
    head = f"BASE PROMPT\n\n{status_line(store)}\n\n{guide}\n\n{recalled(store, RELEVANT)}\n\n[mnemon] Recall before"
    assert prompt.startswith(head) and QDRANT_FACT in prompt
    user = {"role": "user", "content": [{"type": "text", "text": RELEVANT}], "timestamp": 2}
    assert out["context"] == {"messages": [user]}  # an old mnemon message is filtered out
    notice = out["afterCompact"]["messages"][1]
    assert out["afterCompact"]["messages"][0] == user
    assert {k: v for k, v in notice.items() if k not in ("content", "timestamp")} == {
        "role": "custom", "customType": "mnemon-compaction", "display": False}
    assert notice["content"].startswith("[mnemon] Context was compacted")
    assert out["nextContext"] == {"messages": [user]}  # the notice is added once
    assert out["ui"] == [["setStatus", "mnemon", "mnemon"],
                         ["notify", "[mnemon] Consider whether this exchange warrants durable memory.", "info"]]


def test_pi_extension_leaves_a_system_prompt_it_is_not_given_alone(store, tmp_path):
    """A before_agent_start without systemPrompt got {systemPrompt: "undefined\\n\\n<our block>"} back, which
    replaces Pi's whole system prompt."""
    jiti = str(node_host.node_modules() / "jiti" / "lib" / "jiti.mjs")
    extension = pi(tmp_path, store, recall=True) / "extensions" / "mnemon.ts"
    assert node_host.drive("pi", jiti, str(extension), RELEVANT, "no-system-prompt")["beforeStart"] is None


def test_pi_extension_recall_off_unrelated_and_failing(store, tmp_path):
    jiti = str(node_host.node_modules() / "jiti" / "lib" / "jiti.mjs")
    config_dir = pi(tmp_path, store, recall=None)  # Pi's default: off (the Go extension does not recall)
    extension = config_dir / "extensions" / "mnemon.ts"
    prompt = node_host.drive("pi", jiti, str(extension), RELEVANT)["beforeStart"]["systemPrompt"]
    assert "Relevant memories" not in prompt and prompt.startswith(f"BASE PROMPT\n\n{status_line(store)}\n\n")
    config_dir = pi(tmp_path, store, recall=True)
    prompt = node_host.drive("pi", jiti, str(extension), UNRELATED)["beforeStart"]["systemPrompt"]
    assert "Relevant memories" not in prompt and "[mnemon] Recall before" in prompt
    break_command(extension, [str(tmp_path / "no-such-python")])
    out = node_host.drive("pi", jiti, str(extension), RELEVANT)
    assert out["beforeStart"] is None  # the system prompt stays as it is
    assert out["context"] == {"messages": [out["context"]["messages"][0]]}
