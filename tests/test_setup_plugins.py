"""`mnemon setup` for the in-process hosts (OpenClaw, OpenCode, Pi) through the CLI: files, local and
global scopes, idempotent re-install, eject restoring an existing config byte for byte and removing
one setup created, foreign entries and comments kept, an unparseable config refused unchanged, and
an eject of what the Go program installed (no manifest)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from mnemon import __version__
from mnemon.setup import jsonc
from tests.conftest import Cli, Result

OPENCLAW_FILES = ("skills/mnemon/SKILL.md", "hooks/mnemon-prime/HOOK.md", "hooks/mnemon-prime/handler.js",
                  "extensions/mnemon/package.json", "extensions/mnemon/openclaw.plugin.json",
                  "extensions/mnemon/index.js")
OPENCODE_FILES = ("skills/mnemon/SKILL.md", "plugins/mnemon.js")
PI_FILES = ("skills/mnemon/SKILL.md", "extensions/mnemon.ts")

# A hand-written JSON5-like OpenClaw config: comments, unquoted keys, trailing commas, a foreign plugin.
OPENCLAW_USER = """{
  // gateway settings
  gateway: { port: 18789, },
  plugins: {
    entries: {
      'voice-call': { enabled: true }, /* theirs */
    },
  },
  agents: { defaults: { model: "anthropic/claude-opus" } },
}
"""
OPENCODE_USER = """{
  // project config
  "$schema": "https://opencode.ai/config.json",
  "model": "anthropic/claude-sonnet",
  "instructions": [
    "CONTRIBUTING.md", // ours
    "docs/style.md",
  ],
}
"""


def setup(cli, *args: str) -> str:
    res = cli("setup", "--yes", *args)
    assert res.code == 0, res.err
    return res.out


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


# --- OpenClaw -----------------------------------------------------------------------------------


def test_openclaw_global_install_registers_the_plugin_and_eject_removes_a_created_config(cli, host, data_dir):
    home, project = host
    out = setup(cli, "--target", "openclaw", "--global")
    config_dir = home / ".openclaw"
    for rel in OPENCLAW_FILES:
        assert (config_dir / rel).is_file(), rel
    assert "Restart the OpenClaw gateway to activate." in out
    config = json.loads((config_dir / "openclaw.json").read_text())
    assert config == {"plugins": {"entries": {"mnemon": {"enabled": True, "hooks": {"allowConversationAccess": True},
                                                         "config": {"remind": True, "nudge": True, "compact": False}}}}}
    assert mode(config_dir / "openclaw.json") == 0o600
    manifest = json.loads((config_dir / "extensions/mnemon/openclaw.plugin.json").read_text())
    assert manifest["id"] == "mnemon" and manifest["version"] == __version__
    assert manifest["hooks"] == ["before_prompt_build", "agent_end"] and manifest["entry"] == "index.js"
    assert set(manifest["configSchema"]["properties"]) == {"remind", "nudge", "compact"}
    hook_md = (config_dir / "hooks/mnemon-prime/HOOK.md").read_text()
    assert "name: mnemon-prime" in hook_md and '"events": ["agent:bootstrap"]' in hook_md
    handler = (config_dir / "hooks/mnemon-prime/handler.js").read_text()
    assert str(data_dir.absolute()) in handler and "/*@MNEMON" not in handler  # configured, absolute
    first = tree(config_dir)
    setup(cli, "--target", "openclaw", "--global")  # idempotent
    assert tree(config_dir) == first
    setup(cli, "--target", "openclaw", "--global", "--eject")
    assert not config_dir.exists()  # everything was ours, the dir included


def test_openclaw_keeps_a_json5_config_and_eject_restores_it_byte_for_byte(cli, host):
    home, project = host
    config_dir = home / ".openclaw"
    config_dir.mkdir()
    path = config_dir / "openclaw.json"
    path.write_text(OPENCLAW_USER)
    path.chmod(0o640)
    setup(cli, "--target", "openclaw", "--global", "--compact", "--no-nudge")
    text = path.read_text()
    assert "// gateway settings" in text and "/* theirs */" in text and "port: 18789" in text
    value = jsonc.loads(text, json5=True)
    assert value["plugins"]["entries"]["voice-call"] == {"enabled": True}
    assert value["plugins"]["entries"]["mnemon"] == {"enabled": True, "hooks": {"allowConversationAccess": True},
                                                     "config": {"remind": True, "nudge": False, "compact": True}}
    assert mode(path) == 0o640  # an existing config keeps its mode
    setup(cli, "--target", "openclaw", "--global")  # re-install with other switches: one entry, updated
    value = jsonc.loads(path.read_text(), json5=True)
    assert value["plugins"]["entries"]["mnemon"]["config"] == {"remind": True, "nudge": True, "compact": False}
    setup(cli, "--target", "openclaw", "--global", "--eject")
    assert path.read_text() == OPENCLAW_USER
    assert sorted(p.name for p in config_dir.iterdir()) == ["openclaw.json"]


def test_openclaw_local_install_and_an_unparseable_config_is_refused(cli, host):
    home, project = host
    setup(cli, "--target", "openclaw")
    assert (project / ".openclaw/extensions/mnemon/index.js").is_file()
    setup(cli, "--target", "openclaw", "--eject")
    assert not (project / ".openclaw").exists()
    broken = home / ".openclaw" / "openclaw.json"
    broken.parent.mkdir()
    broken.write_text('{ plugins: { entries: { "a": 1 } ')
    res = cli("setup", "--yes", "--target", "openclaw", "--global")
    assert res.code == 1 and "openclaw.json is not valid JSON" in res.err and "Traceback" not in res.err
    assert broken.read_text() == '{ plugins: { entries: { "a": 1 } '
    assert sorted(p.name for p in broken.parent.iterdir()) == ["openclaw.json"]  # nothing else written
    broken.write_text('{"plugins": []}')
    res = cli("setup", "--yes", "--target", "openclaw", "--global")
    assert res.code == 1 and '"plugins"' in res.err and "not an object" in res.err
    assert broken.read_text() == '{"plugins": []}'


def test_openclaw_eject_of_a_go_install(cli, host):
    """The Go program's layout (no manifest): the same files go, and its openclaw.json entry."""
    home, project = host
    config_dir = home / ".openclaw"
    for rel in OPENCLAW_FILES:
        (config_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (config_dir / rel).write_text("go asset\n")
    (config_dir / "hooks" / "other-hook").mkdir()
    (config_dir / "openclaw.json").write_text(json.dumps({"gateway": {"port": 1}, "plugins": {"entries": {
        "mnemon": {"enabled": True, "config": {"remind": True}}}}}, indent=2) + "\n")
    setup(cli, "--target", "openclaw", "--global", "--eject")
    assert sorted(str(p.relative_to(config_dir)) for p in config_dir.rglob("*")) == [
        "hooks", "hooks/other-hook", "openclaw.json"]
    assert json.loads((config_dir / "openclaw.json").read_text()) == {"gateway": {"port": 1},
                                                                      "plugins": {"entries": {}}}


# --- OpenCode -----------------------------------------------------------------------------------


def test_opencode_local_install_writes_the_project_config_and_eject_removes_it(cli, host, data_dir):
    home, project = host
    out = setup(cli, "--target", "opencode")
    for rel in OPENCODE_FILES:
        assert (project / ".opencode" / rel).is_file(), rel
    assert "recall   on each prompt" in out
    config = project / "opencode.json"  # beside .opencode/, as in Go
    guide = str(data_dir.absolute() / "prompt" / "guide.md")
    assert json.loads(config.read_text()) == {"$schema": "https://opencode.ai/config.json", "instructions": [guide]}
    assert mode(config) == 0o644
    first = config.read_bytes()
    setup(cli, "--target", "opencode")
    assert config.read_bytes() == first
    setup(cli, "--target", "opencode", "--eject")
    assert sorted(p.name for p in project.iterdir()) == []


def test_opencode_keeps_comments_and_instructions_and_restores_byte_for_byte(cli, host, data_dir):
    home, project = host
    config = project / "opencode.json"
    config.write_text(OPENCODE_USER)
    setup(cli, "--target", "opencode")
    text = config.read_text()
    assert "// project config" in text and "// ours" in text
    value = jsonc.loads(text)
    guide = str(data_dir.absolute() / "prompt" / "guide.md")
    assert value["instructions"] == ["CONTRIBUTING.md", "docs/style.md", guide]
    assert value["model"] == "anthropic/claude-sonnet"
    setup(cli, "--target", "opencode")
    assert jsonc.loads(config.read_text())["instructions"] == ["CONTRIBUTING.md", "docs/style.md", guide]
    setup(cli, "--target", "opencode", "--eject")
    assert config.read_text() == OPENCODE_USER
    assert not (project / ".opencode").exists()


def test_opencode_replaces_an_older_guide_and_refuses_a_broken_config(cli, host, data_dir):
    home, project = host
    config = project / "opencode.json"
    config.write_text('{"instructions": ["/old/home/.mnemon/prompt/guide.md", "README.md"]}\n')
    setup(cli, "--target", "opencode")
    guide = str(data_dir.absolute() / "prompt" / "guide.md")
    assert jsonc.loads(config.read_text()) == {"instructions": ["README.md", guide],
                                               "$schema": "https://opencode.ai/config.json"}
    setup(cli, "--target", "opencode", "--eject")
    assert jsonc.loads(config.read_text()) == {"instructions": ["README.md"]}
    config.write_text('{"instructions": "README.md"}')
    res = cli("setup", "--yes", "--target", "opencode")
    assert res.code == 1 and '"instructions"' in res.err and "not a list" in res.err
    config.write_text('{"instructions": [,]}')
    res = cli("setup", "--yes", "--target", "opencode")
    assert res.code == 1 and "opencode.json is not valid JSON" in res.err
    assert config.read_text() == '{"instructions": [,]}' and not (project / ".opencode").exists()


@pytest.mark.parametrize("move", ["--data-dir", "MNEMON_DATA_DIR"])
def test_opencode_follows_a_moved_data_dir_and_a_rerun_changes_no_byte(host, capsys, monkeypatch, tmp_path, move):
    """Setup again with another data dir left the old guide path in opencode.json beside the new one (a data
    dir such as .../agent-data/prompt/guide.md carries none of the marks an older guide is known by)."""
    home, project = host
    config = project / "opencode.json"
    config.write_text(OPENCODE_USER)

    def setup_with(data: Path, *args: str) -> None:
        if move == "--data-dir":
            res = Cli(data, capsys)("setup", "--yes", "--target", "opencode", *args)
        else:
            monkeypatch.setenv("MNEMON_DATA_DIR", str(data))
            capsys.readouterr()
            from mnemon.cli import main

            res = Result(main(["setup", "--yes", "--target", "opencode", *args]), *capsys.readouterr())
        assert res.code == 0, res.err

    first, second = tmp_path / "agent-data", tmp_path / "moved" / "agent-data"
    setup_with(first)
    setup_with(second)
    guide = str(second / "prompt" / "guide.md")
    assert jsonc.loads(config.read_text())["instructions"] == ["CONTRIBUTING.md", "docs/style.md", guide]
    text = config.read_text()
    config.write_text(text.replace('"docs/style.md",', '"docs/style.md",\n    "extra.md",', 1)
                      .replace(guide + '"', guide + '",\n    "later.md"', 1))  # the user's own after ours
    edited = config.read_bytes()
    setup_with(second)
    assert config.read_bytes() == edited  # same data dir: not a byte changes
    setup_with(tmp_path / "third", "--eject")  # eject finds the guide it registered, whatever the data dir now
    assert jsonc.loads(config.read_text())["instructions"] == ["CONTRIBUTING.md", "docs/style.md", "extra.md",
                                                               "later.md"]


def test_opencode_global_honours_opencode_config_dir(cli, host, tmp_path, monkeypatch, data_dir):
    home, project = host
    setup(cli, "--target", "opencode", "--global")
    default = home / ".config" / "opencode"
    assert (default / "plugins" / "mnemon.js").is_file() and (default / "opencode.json").is_file()
    setup(cli, "--target", "opencode", "--global", "--eject")
    assert not default.exists() and (home / ".config").exists() is False
    custom = tmp_path / "oc-config"
    monkeypatch.setenv("OPENCODE_CONFIG_DIR", str(custom))
    setup(cli, "--target", "opencode", "--global")
    assert (custom / "plugins" / "mnemon.js").is_file()
    assert jsonc.loads((custom / "opencode.json").read_text())["instructions"] == [
        str(data_dir.absolute() / "prompt" / "guide.md")]
    setup(cli, "--target", "opencode", "--global", "--eject")
    assert not custom.exists()


def test_opencode_eject_of_a_go_install(cli, host):
    home, project = host
    for rel in OPENCODE_FILES:
        (project / ".opencode" / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / ".opencode" / rel).write_text("go asset\n")
    (project / ".opencode" / "plugins" / "theirs.js").write_text("export default {}\n")
    (project / "opencode.json").write_text(json.dumps({
        "$schema": "https://opencode.ai/config.json", "instructions": ["/home/u/.mnemon/prompt/guide.md"]}))
    setup(cli, "--target", "opencode", "--eject")
    assert not (project / "opencode.json").exists()  # Go's WriteOrRemove: nothing left ⇒ deleted
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*")) == [
        ".opencode", ".opencode/plugins", ".opencode/plugins/theirs.js"]


# --- Pi -----------------------------------------------------------------------------------------


def test_pi_local_and_global_install_and_eject(cli, host, data_dir):
    home, project = host
    out = setup(cli, "--target", "pi")
    for rel in PI_FILES:
        assert (project / ".pi" / rel).is_file(), rel
    assert "Start a new Pi session or run /reload" in out and "recall   off" in out
    pi_guide = data_dir / "prompt" / "pi" / "guide.md"
    assert pi_guide.is_file() and (data_dir / "prompt" / "pi" / "skill.md").is_file()
    first = tree(project / ".pi")
    setup(cli, "--target", "pi")
    assert tree(project / ".pi") == first
    setup(cli, "--target", "pi", "--eject")
    assert not (project / ".pi").exists()
    assert pi_guide.is_file()  # as in Go, Pi's prompts stay
    (home / ".pi" / "agent" / "extensions").mkdir(parents=True)
    (home / ".pi" / "agent" / "extensions" / "theirs.ts").write_text("export default () => {}\n")
    out = setup(cli, "--target", "pi", "--global", "--recall-on-prompt")
    assert "recall   on each prompt" in out
    extension = home / ".pi" / "agent" / "extensions" / "mnemon.ts"
    assert '"enabled": true' in extension.read_text()
    setup(cli, "--target", "pi", "--global", "--eject")
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == [
        ".pi", ".pi/agent", ".pi/agent/extensions", ".pi/agent/extensions/theirs.ts"]


def test_pi_global_honours_pi_coding_agent_dir(cli, host, tmp_path, monkeypatch):
    agent_dir = tmp_path / "pi-agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent_dir))
    setup(cli, "--target", "pi", "--global")
    assert (agent_dir / "extensions" / "mnemon.ts").is_file() and (agent_dir / "skills/mnemon/SKILL.md").is_file()
    assert not (host[0] / ".pi").exists()
    setup(cli, "--target", "pi", "--global", "--eject")
    assert not agent_dir.exists()


def test_eject_strips_the_agents_md_block(cli, host):
    home, project = host
    (project / "AGENTS.md").write_text("# Rules\n\n<!-- mnemon:start -->\nold\n<!-- mnemon:end -->\n")
    setup(cli, "--target", "pi")
    setup(cli, "--target", "pi", "--eject")
    assert (project / "AGENTS.md").read_text() == "# Rules\n"


@pytest.mark.parametrize("text", ["", "  \n", "// nothing here yet\n"])
@pytest.mark.parametrize("target", ["openclaw", "opencode"])
def test_eject_gives_back_a_config_that_was_empty_or_only_comments(cli, host, target, text):
    """Setup fills a config that exists but holds no value; eject left "{}" in it instead of its own bytes."""
    _, project = host
    path = project / ("opencode.json" if target == "opencode" else ".openclaw/openclaw.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    setup(cli, "--target", target)
    setup(cli, "--target", target)  # the second run keeps the first run's record of the text
    assert "mnemon" in path.read_text()
    setup(cli, "--target", target, "--eject")
    assert path.read_text() == text
