"""`mnemon setup` for the hosts of setup-targets.md §4-11 and Hermes (§3): where the files go, the registration
shape each host reads, idempotence, and an eject that restores the user's config byte for byte."""

from __future__ import annotations

import json
import os
import select
import stat
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import yaml

from mnemon.setup import jsonc
from tests.conftest import REPO

HOOKED = ["zcode", "trae", "qoder", "qoderwork", "codebuddy", "workbuddy", "kimi", "hermes"]
HOME_ONLY = {"qoderwork", "kimi", "hermes"}
DIRS = {"zcode": ".zcode", "trae": ".trae", "qoder": ".qoder", "qoderwork": ".qoderwork", "codebuddy": ".codebuddy",
        "workbuddy": ".workbuddy", "kimi": ".kimi-code", "hermes": ".hermes", "minimax-code": ".minimax"}
CONFIG = {"zcode": "cli/config.json", "trae": "hooks.json", "kimi": "config.toml", "hermes": "config.yaml"}
SCRIPTS = {"prime": "prime.sh", "remind": "user_prompt.sh", "nudge": "stop.sh"}
HERMES_SCRIPTS = {"prime": "prime.sh", "remind": "remind.sh", "nudge": "nudge.sh"}

# A config the user wrote by hand: comments, their own hooks, unrelated keys (per host format).
USER_CONFIG = {
    "zcode": """// ZCode CLI config
{
  "model": "glm-4.6", // default model
  "hooks": {
    "timeoutMs": 20000,
    "events": {
      "Stop": [
        {"hooks": [{"type": "process", "command": "notify-send", "args": ["done"]}]}
      ]
    }
  }
}
""",
    "trae": """{
  "version": 1,
  "hooks": {
    /* format on save */
    "PostToolUse": [
      {"matcher": "Write", "hooks": [{"type": "command", "command": "prettier --write", "timeout": 10}]},
    ],
  },
}
""",
    "claude-shaped": """{
    // team settings
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "Stop": [
            {"hooks": [{"type": "command", "command": "echo user-stop"}]}
        ]
    }
}
""",
    "kimi": """# Kimi Code config
default_model = "kimi-k2"

[[hooks]]
event = "PreToolUse"
matcher = "Shell"
command = "echo guard"   # mine
timeout = 5

[models.kimi-k2]
provider = "moonshot"
""",
    "hermes": """# Hermes config, hand-written
model:
  default: nous/hermes-4  # keep this comment
hooks:
  # my audit hook
  on_session_start:
    - command: /usr/local/bin/audit.sh
      timeout: 5
hooks_auto_accept: false
""",
}


@pytest.fixture(autouse=True)
def no_host_executables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # detection sees the directories we make, not this machine


def config_dir(target: str, home: Path, project: Path, scope: str) -> Path:
    return (home if scope == "global" or target in HOME_ONLY else project) / DIRS[target]


def config_path(target: str, base: Path) -> Path:
    return base / CONFIG.get(target, "settings.json")


def user_config(target: str) -> str:
    return USER_CONFIG.get(target, USER_CONFIG["claude-shaped"])


def registered(target: str, path: Path) -> dict[str, list]:
    """Event → the mnemon hook entries registered for it, in the host's own shape."""
    text = path.read_text()
    if target == "kimi":
        blocks = tomllib.loads(text).get("hooks", [])
        return {b["event"]: [b] for b in blocks if "/hooks/mnemon/" in b["command"]}
    if target == "hermes":
        hooks = yaml.safe_load(text).get("hooks") or {}
        return {e: [i for i in items if "/agent-hooks/mnemon/" in i["command"]]
                for e, items in hooks.items() if any("/agent-hooks/mnemon/" in i["command"] for i in items)}
    data = jsonc.loads(text)
    events = data["hooks"]["events"] if target == "zcode" else data["hooks"]
    return {e: [g for g in groups if "/hooks/mnemon/" in json.dumps(g)] for e, groups in events.items()
            if any("/hooks/mnemon/" in json.dumps(g) for g in groups)}


def expected(target: str, base: Path) -> dict[str, list]:
    hook_dir = base / ("agent-hooks/mnemon" if target == "hermes" else "hooks/mnemon")
    if target == "hermes":
        return {event: [{"command": str(hook_dir / HERMES_SCRIPTS[hook]), "timeout": 10}]
                for hook, event in (("prime", "on_session_start"), ("remind", "pre_llm_call"),
                                    ("nudge", "post_llm_call"))}
    events = {"prime": "SessionStart", "remind": "UserPromptSubmit", "nudge": "Stop"}
    out = {}
    for hook, event in events.items():
        script = str(hook_dir / SCRIPTS[hook])
        if target == "kimi":
            out[event] = [{"event": event, "command": script, "timeout": 10}]
        elif target == "zcode":
            status = {"prime": "Loading Mnemon context", "remind": "Checking Mnemon recall guidance",
                      "nudge": "Checking Mnemon writeback guidance"}[hook]
            group = {"matcher": "startup|clear|compact"} if hook == "prime" else {}
            group["hooks"] = [{"type": "process", "command": "bash", "args": [script], "enabled": True,
                               "timeoutMs": 30000, "statusMessage": status}]
            out[event] = [group]
        elif target == "trae":
            group = {"hooks": [{"type": "command", "command": script, "timeout": 30}]}
            out[event] = [{"loop_limit": 1, **group} if hook == "nudge" else group]
        else:  # Qoder, QoderWork, CodeBuddy, WorkBuddy: no timeout, matcher or loop_limit
            out[event] = [{"hooks": [{"type": "command", "command": script}]}]
    return out


def scopes(target: str) -> list[str]:
    return ["global"] if target in HOME_ONLY else ["local", "global"]


CASES = [(t, s) for t in HOOKED for s in scopes(t) if not (t == "zcode" and s == "local")]


@pytest.mark.parametrize(("target", "scope"), CASES)
def test_install_registers_the_hosts_format_and_eject_removes_what_it_created(cli, host, target, scope):
    home, project = host
    base = config_dir(target, home, project, scope)
    args = ["setup", "--target", target] + (["--global"] if scope == "global" else [])
    res = cli(*args)
    assert res.code == 0, res.err
    assert (base / "skills/mnemon/SKILL.md").is_file()
    path = config_path(target, base)
    assert registered(target, path) == expected(target, base)
    hook_dir = base / ("agent-hooks/mnemon" if target == "hermes" else "hooks/mnemon")
    names = HERMES_SCRIPTS if target == "hermes" else SCRIPTS
    assert sorted(p.name for p in hook_dir.glob("*.sh")) == sorted(names.values())  # the Go program's names
    for script in hook_dir.glob("*.sh"):
        assert stat.S_IMODE(script.stat().st_mode) == 0o755 and script.read_text().startswith("#!/bin/sh\n")
    if target == "trae":
        assert jsonc.loads(path.read_text())["version"] == 1
    if target == "zcode":
        assert jsonc.loads(path.read_text())["hooks"]["enabled"] is True
    if target == "hermes":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds API keys
    first = path.read_bytes()
    assert cli(*args).code == 0  # idempotent: the same bytes, one entry per event
    assert path.read_bytes() == first

    res = cli(*args, "--eject")
    assert res.code == 0, res.err
    assert not path.exists() and not base.exists()  # nothing of ours, and no empty dir we made
    assert (cli.data_dir / "prompt/guide.md").is_file()


@pytest.mark.parametrize(("target", "scope"), [(t, s) for t in HOOKED for s in scopes(t) if (t, s) != ("zcode", "local")])
def test_eject_restores_a_users_config_byte_for_byte(cli, host, target, scope):
    home, project = host
    flag = ["--global"] if scope == "global" else []
    base = config_dir(target, home, project, scope)
    path = config_path(target, base)
    path.parent.mkdir(parents=True)
    original = user_config(target).encode()
    path.write_bytes(original)
    path.chmod(0o640)
    assert cli("setup", "--target", target, *flag).code == 0
    text = path.read_text()
    for line in user_config(target).splitlines():  # every line of the user's survives, comments included
        if line.strip().startswith(("#", "//", "/*")) or "keep" in line or "mine" in line:
            assert line in text
    assert registered(target, path) == expected(target, base)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # the file keeps its mode
    if target == "kimi":
        data = tomllib.loads(text)
        assert data["default_model"] == "kimi-k2" and data["hooks"][0]["command"] == "echo guard"
    elif target == "hermes":
        data = yaml.safe_load(text)
        assert data["hooks"]["on_session_start"][0] == {"command": "/usr/local/bin/audit.sh", "timeout": 5}
        assert data["model"] == {"default": "nous/hermes-4"} and data["hooks_auto_accept"] is False
    else:
        data = jsonc.loads(text)
        events = data["hooks"]["events"] if target == "zcode" else data["hooks"]
        user = jsonc.loads(user_config(target))
        user_events = user["hooks"]["events"] if target == "zcode" else user["hooks"]
        for event, groups in user_events.items():
            assert events[event][: len(groups)] == groups  # foreign entries first, untouched
    assert cli("setup", "--target", target, *flag).code == 0  # re-install keeps the user's too
    assert cli("setup", "--target", target, *flag, "--eject").code == 0
    assert path.read_bytes() == original
    assert not (base / "skills").exists() and not (base / "hooks").exists() and not (base / "agent-hooks").exists()


BROKEN = {"kimi": 'default_model = "x\n[[hooks]\n', "hermes": "hooks:\n  - a: [1, 2\n", "json": '{"hooks": {,}}'}


@pytest.mark.parametrize("target", HOOKED)
def test_an_unparseable_config_is_refused_and_left_unchanged(cli, host, target):
    home, project = host
    base = config_dir(target, home, project, "global")
    path = config_path(target, base)
    path.parent.mkdir(parents=True)
    broken = BROKEN.get(target, BROKEN["json"])
    path.write_text(broken)
    res = cli("setup", "--target", target, "--global")
    assert res.code == 1 and "Traceback" not in res.err
    kind = {"kimi": "TOML", "hermes": "YAML"}.get(target, "JSON")
    assert res.err.startswith(f"Error: {path} is not valid {kind} (") and "run setup again" in res.err
    assert path.read_text() == broken
    assert sorted(p.name for p in base.rglob("*")) == sorted(p.name for p in path.relative_to(base).parents
                                                            if p.name) + [path.name]
    res = cli("setup", "--target", target, "--global", "--eject")  # eject refuses too, and changes nothing
    assert res.code == 1 and path.read_text() == broken


@pytest.mark.parametrize("target", HOOKED)
def test_a_config_nested_too_deeply_for_the_parser_is_refused_unchanged(cli, host, target):
    """JSON (jsonc), TOML (tomllib) and YAML (PyYAML) parsers recurse per level: 5,000 nested brackets
    ended setup and eject with a RecursionError traceback."""
    home, project = host
    path = config_path(target, config_dir(target, home, project, "global"))
    path.parent.mkdir(parents=True)
    nested = "[" * 5000 + "]" * 5000
    text = {"kimi": f"a = {nested}\n", "hermes": f"a: {nested}\n"}.get(target, f'{{"a": {nested}}}\n')
    path.write_text(text)
    for args in ((), ("--eject",)):
        res = cli("setup", "--target", target, "--global", *args)
        assert res.code == 1 and res.err == f"Error: {path} is nested too deeply to edit; fix or move it, then run " \
            "setup again\n"
        assert path.read_text() == text


@pytest.mark.parametrize("target", HOOKED)
def test_eject_without_our_manifest_follows_the_go_program(cli, host, target):
    """An install whose record is gone (as after the Go program's own install) still ejects cleanly."""
    home, project = host
    base = config_dir(target, home, project, "global")
    assert cli("setup", "--target", target, "--global").code == 0
    (base / ("agent-hooks/mnemon" if target == "hermes" else "hooks/mnemon") / "setup.json").unlink()
    assert cli("setup", "--target", target, "--global", "--eject").code == 0
    assert not config_path(target, base).exists() and not (base / "skills").exists()


def test_zcode_local_install_is_the_skill_only(cli, host):
    home, project = host
    res = cli("setup", "--target", "zcode")
    assert res.code == 0, res.err
    assert "ZCode currently ignores project-level hooks; use '--global' to install lifecycle hooks" in res.out
    assert (project / ".zcode/skills/mnemon/SKILL.md").is_file()
    assert not (project / ".zcode/hooks").exists() and not (project / ".zcode/cli").exists()
    assert cli("setup", "--target", "zcode", "--eject").code == 0
    assert not (project / ".zcode").exists()


def test_zcode_keeps_a_users_disabled_switch(cli, host):
    home, _ = host
    path = home / ".zcode/cli/config.json"
    path.parent.mkdir(parents=True)
    path.write_text('{\n  "hooks": {\n    "enabled": false\n  }\n}\n')
    assert cli("setup", "--target", "zcode", "--global").code == 0
    assert jsonc.loads(path.read_text())["hooks"]["enabled"] is True  # hooks must run
    assert cli("setup", "--target", "zcode", "--global", "--eject").code == 0
    assert path.read_text() == '{\n  "hooks": {\n    "enabled": false\n  }\n}\n'


def test_minimax_code_gets_the_skill_and_keeps_other_skills(cli, host):
    home, project = host
    other = project / ".minimax/skills/other/SKILL.md"
    other.parent.mkdir(parents=True)
    other.write_text("mine")
    assert cli("setup", "--target", "minimax-code").code == 0
    assert (project / ".minimax/skills/mnemon/SKILL.md").is_file()
    assert sorted(p.name for p in (project / ".minimax").iterdir()) == ["skills"]  # no hooks, no config
    assert cli("setup", "--target", "minimax-code", "--eject").code == 0
    assert other.read_text() == "mine" and not (project / ".minimax/skills/mnemon").exists()
    assert cli("setup", "--target", "minimax-code", "--global").code == 0
    assert (home / ".minimax/skills/mnemon/SKILL.md").is_file()
    assert cli("setup", "--target", "minimax-code", "--global", "--eject").code == 0
    assert not (home / ".minimax").exists()


def test_home_only_hosts_ignore_the_scope_and_kimi_honours_its_home_variable(cli, host, monkeypatch, tmp_path):
    home, project = host
    assert cli("setup", "--target", "qoderwork").code == 0  # no --global: still ~/.qoderwork
    assert (home / ".qoderwork/settings.json").is_file() and not (project / ".qoderwork").exists()
    kimi_home = tmp_path / "kimi home"
    monkeypatch.setenv("KIMI_CODE_HOME", f" {kimi_home} ")  # trimmed, as the Go program does
    assert cli("setup", "--target", "kimi").code == 0
    blocks = tomllib.loads((kimi_home / "config.toml").read_text())["hooks"]
    assert blocks[0]["command"] == f"'{kimi_home}/hooks/mnemon/prime.sh'"  # sh -c: quoted path with a space
    assert not (home / ".kimi-code").exists()


def test_kimi_refuses_hooks_defined_as_an_inline_array(cli, host):
    home, _ = host
    path = home / ".kimi-code/config.toml"
    path.parent.mkdir(parents=True)
    path.write_text('hooks = []\n')
    res = cli("setup", "--target", "kimi")
    assert res.code == 1 and "cannot take our [[hooks]] blocks" in res.err
    assert path.read_text() == "hooks = []\n"


@pytest.mark.parametrize("text", ['default_model = "k"\n\n\n', "   \n\n"])
def test_kimi_eject_keeps_the_blank_lines_that_end_the_file(cli, host, text):
    """A removed block once took every line up to the next table with it: the blank line install put before
    our next block and, after the last one, the user's own trailing blank lines."""
    home, _ = host
    path = home / ".kimi-code/config.toml"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    assert cli("setup", "--target", "kimi").code == 0
    assert cli("setup", "--target", "kimi").code == 0  # a second run replaces our blocks
    assert len(tomllib.loads(path.read_text())["hooks"]) == 3
    assert cli("setup", "--target", "kimi", "--eject").code == 0
    assert path.read_text() == text


def test_kimi_eject_keeps_the_comment_heading_a_table_added_after_our_blocks(cli, host):
    """The comment line before the next table belongs to that table, not to our block before it."""
    home, _ = host
    path = home / ".kimi-code/config.toml"
    assert cli("setup", "--target", "kimi").code == 0
    added = '\n# the model I use\n[models.k]\nprovider = "m"\n'
    path.write_text(path.read_text() + added)
    assert cli("setup", "--target", "kimi", "--eject").code == 0
    assert path.read_text() == added


def test_kimi_eject_of_go_blocks_takes_the_blank_lines_after_them_and_keeps_the_users_comments(cli, host):
    """Blank lines after the last removed block stayed behind (the Go eject takes every line up to the next
    table with a block). They go now where nothing but blank lines follows; a comment is the user's and stays."""
    home, _ = host
    path = home / ".kimi-code/config.toml"
    path.parent.mkdir(parents=True)
    hooks = home / ".kimi-code/hooks/mnemon"
    go_blocks = "".join(f'[[hooks]]\nevent = "{event}"\ncommand = "{hooks}/{script}"\ntimeout = 10\n\n'
                        for event, script in (("SessionStart", "prime.sh"), ("UserPromptSubmit", "user_prompt.sh"),
                                              ("Stop", "stop.sh")))
    user = 'default_model = "k"\n'
    for tail, left in (("", user), ("\n\n", user), ("# my note\n", user + "\n# my note\n"),
                       ("\n# the model\n[models.k]\n", user + "\n\n# the model\n[models.k]\n")):
        path.write_text(user + "\n" + go_blocks + tail)  # the Go program's install: no manifest of ours
        res = cli("setup", "--target", "kimi", "--eject")
        assert res.code == 0, res.err
        assert path.read_text() == left, tail


@pytest.mark.parametrize("layout", ["hooks: {}\n", "model: x\nhooks:\n", "hooks: {on_session_start: []}\n",
                                    "hooks:\n  on_session_start: []\n"])
def test_hermes_inline_or_empty_hooks(cli, host, layout):
    home, _ = host
    path = home / ".hermes/config.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(layout)
    res = cli("setup", "--target", "hermes")
    if "on_session_start" in layout:  # flow style inside: we do not rewrite it
        assert res.code == 1 and "cannot edit the hooks" in res.err and path.read_text() == layout
        return
    assert res.code == 0, res.err
    assert registered("hermes", path) == expected("hermes", home / ".hermes")
    assert cli("setup", "--target", "hermes", "--eject").code == 0
    assert path.read_text() == layout


def test_hermes_eject_removes_the_hooks_state_dir(cli, host):
    """prime.sh and nudge.sh leave their text in ~/.hermes/mnemon/ for the next pre_llm_call; the Go eject
    removes that dir (setup-targets §3), ours left it behind (and with it ~/.hermes, which setup created)."""
    home, _ = host
    assert cli("setup", "--target", "hermes").code == 0
    proc = subprocess.run(["sh", str(home / ".hermes/agent-hooks/mnemon/prime.sh")], input=b"{}", capture_output=True,
                          env={**os.environ, "HOME": str(home)}, timeout=30)
    assert proc.stdout == b"{}\n" and (home / ".hermes/mnemon/prime-context.txt").is_file()
    res = cli("setup", "--target", "hermes", "--eject")
    assert res.code == 0 and f"removed  {home / '.hermes/mnemon'}" in res.out
    assert not (home / ".hermes").exists()


def test_recall_flag_is_recorded_per_host_default(cli, host):
    home, _ = host
    assert cli("setup", "--target", "hermes").code == 0  # Hermes recalls by default, as the Go hook does
    assert "MNEMON_RECALL=1" in (home / ".hermes/agent-hooks/mnemon/remind.sh").read_text()
    assert cli("setup", "--target", "qoder", "--global").code == 0  # off elsewhere
    assert "MNEMON_RECALL=0" in (home / ".qoder/hooks/mnemon/user_prompt.sh").read_text()
    assert cli("setup", "--target", "qoder", "--global", "--recall-on-prompt").code == 0
    assert "MNEMON_RECALL=1" in (home / ".qoder/hooks/mnemon/user_prompt.sh").read_text()
    assert "MNEMON_RECALL=0" in (home / ".qoder/hooks/mnemon/prime.sh").read_text()  # only the prompt hook
    assert cli("setup", "--target", "hermes", "--no-recall-on-prompt").code == 0
    assert "MNEMON_RECALL=0" in (home / ".hermes/agent-hooks/mnemon/remind.sh").read_text()
    res = cli("setup", "--target", "qoder", "--recall-on-prompt", "--no-remind")
    assert res.code == 1 and res.err == "Error: --recall-on-prompt needs the prompt hook; drop --no-remind\n"


def test_setup_without_target_lists_every_host_and_installs_the_detected(cli, host):
    home, project = host
    (home / ".trae").mkdir()
    (home / ".mavis").mkdir()  # MiniMax Code's legacy dir counts as detected
    res = cli("setup", "--yes")
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert lines[0] == "Agent hosts:"
    table = lines[1:17]
    assert [ln.split()[0] for ln in table] == [
        "claude-code", "codex", "cursor", "openclaw", "nanobot", "pi", "hermes", "zcode", "minimax-code", "trae",
        "qoder", "qoderwork", "codebuddy", "workbuddy", "kimi", "opencode"]
    assert table[9] == "  trae          TRAE            detected"
    assert table[8] == "  minimax-code  MiniMax Code    detected"
    assert table[0] == "  claude-code   Claude Code     not found"
    assert (project / ".trae/hooks.json").is_file() and (project / ".minimax/skills/mnemon/SKILL.md").is_file()
    again = cli("setup", "--yes")
    assert "  trae          TRAE            detected, mnemon installed" in again.out.splitlines()


def test_a_host_version_with_escape_codes_and_bad_bytes_is_listed_as_plain_text(cli, host, tmp_path, monkeypatch):
    """A host that colours its --version output even into a pipe (and writes a byte that is no UTF-8) once coloured
    the list, or ended setup with a traceback: the version is shown as plain text."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "codex"
    fake.write_text("#!/bin/sh\nprintf '\\n\\033[1;32mcodex-cli 0.46.0\\033[0m \\377 (build x)\\n\\033]0;title\\007'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    res = cli("setup")  # no terminal, no --yes: the list only
    assert res.code == 0, res.err
    line = next(ln for ln in res.out.splitlines() if ln.split()[:1] == ["codex"])
    assert line == "  codex         Codex           detected (codex-cli 0.46.0 \ufffd)"
    assert "\x1b" not in res.out


def test_markdown_block_is_stripped_from_agents_md_on_eject(cli, host):
    _, project = host
    (project / "AGENTS.md").write_text("<!-- mnemon:start -->\nold\n<!-- mnemon:end -->\n")
    assert cli("setup", "--target", "codebuddy").code == 0
    assert cli("setup", "--target", "codebuddy", "--eject", "--yes").code == 0
    assert not (project / "AGENTS.md").exists()  # nothing else was in it (Go's ejectMarkdown)
    (project / "AGENTS.md").write_text("<!-- mnemon:start -->\nold\n<!-- mnemon:end -->\n")
    assert cli("setup", "--target", "zcode", "--eject").code == 0  # ZCode has no markdown step
    assert (project / "AGENTS.md").exists()


def test_eject_without_target_cleans_every_detected_host(cli, host):
    home, project = host
    for target in ("qoder", "kimi"):
        assert cli("setup", "--target", target, "--global").code == 0
    (home / ".trae").mkdir()  # detected, never installed: nothing to remove
    res = cli("setup", "--eject", "--global", "--yes")
    assert res.code == 0, res.err
    assert "trae (global): " in res.out and "  nothing to remove" in res.out
    assert not (home / ".qoder").exists() and not (home / ".kimi-code").exists()
    assert (home / ".trae").is_dir()


def test_install_over_the_go_programs_entries_replaces_them(cli, host):
    """A config the Go program wrote (its entries point into the same hook dir): one entry per event after our
    install, and none, with the events it emptied, after our eject; the user's entries stay."""
    home, _ = host
    hook_dir = home / ".qoder/hooks/mnemon"
    path = home / ".qoder/settings.json"
    path.parent.mkdir(parents=True)
    go = {"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": f"{hook_dir}/prime.sh"}]}],
                    "Stop": [{"hooks": [{"type": "command", "command": "echo mine"}]},
                             {"hooks": [{"type": "command", "command": f"{hook_dir}/stop.sh"}]}]}}
    path.write_text(json.dumps(go, indent=2) + "\n")
    assert cli("setup", "--target", "qoder", "--global").code == 0
    assert registered("qoder", path) == expected("qoder", home / ".qoder")
    assert cli("setup", "--target", "qoder", "--global", "--eject").code == 0
    assert jsonc.loads(path.read_text()) == {"hooks": {"Stop": [{"hooks": [{"type": "command",
                                                                            "command": "echo mine"}]}]}}
    hermes = home / ".hermes/config.yaml"
    hermes.parent.mkdir()
    ours = home / ".hermes/agent-hooks/mnemon"
    hermes.write_text(f"hooks:\n    on_session_start:\n        - command: {ours}/prime.sh\n          timeout: 10\n"
                      "    pre_llm_call:\n        - command: /opt/other.sh\n          timeout: 5\n")
    assert cli("setup", "--target", "hermes").code == 0
    assert registered("hermes", hermes) == expected("hermes", home / ".hermes")
    assert "\n        - command: " + str(ours) + "/nudge.sh\n" in hermes.read_text()  # the file's 4-space step
    assert cli("setup", "--target", "hermes", "--eject").code == 0
    assert hermes.read_text() == "hooks:\n    pre_llm_call:\n        - command: /opt/other.sh\n          timeout: 5\n"


def test_on_a_terminal_setup_asks_for_one_host_and_the_scope(host, data_dir):
    """The Go program's interactive flow: a menu of the detected hosts, then Local/Global."""
    home, project = host
    (home / ".trae").mkdir()
    (home / ".qoder").mkdir()
    master, slave = os.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(home), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen([sys.executable, "-m", "mnemon", "--data-dir", str(data_dir), "setup"], stdin=slave,
                            stdout=slave, stderr=slave, env=env, cwd=project, close_fds=True)
    os.close(slave)
    out, answers = b"", [(b"which host?", b"2\n"), (b"Install scope", b"global\n")]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if answers and answers[0][0] in out:
            os.write(master, answers.pop(0)[1])
        ready = select.select([master], [], [], 0.5)[0]
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)
    text = out.decode("utf-8", "replace")
    assert proc.returncode == 0, text
    assert "1. TRAE (trae)" in text and "2. Qoder (qoder)" in text
    assert (home / ".qoder/settings.json").is_file() and not (home / ".trae/hooks.json").exists()
    assert not (project / ".qoder").exists()
