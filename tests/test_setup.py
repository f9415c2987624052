"""`mnemon setup`: files, settings entries, idempotence and an eject that restores the host's settings."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, Cli, run_process

USER_SETTINGS = {
    "claude-code": {
        "model": "opus",
        "permissions": {"allow": ["Bash(ls:*)"]},
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo user-stop"}]}]},
    },
    "codex": {"hooks": {"SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "true"}]}]}},
    "cursor": {"version": 1, "hooks": {"stop": [{"command": "./user-stop.sh"}], "afterFileEdit": [{"command": "fmt"}]}},
}
SETTINGS_FILE = {"claude-code": ".claude/settings.json", "codex": ".codex/hooks.json", "cursor": ".cursor/hooks.json"}
EXPECTED_EVENTS = {
    "claude-code": {"SessionStart": "prime.sh", "UserPromptSubmit": "user_prompt.sh", "Stop": "stop.sh"},
    "codex": {"SessionStart": "prime.sh", "UserPromptSubmit": "user_prompt.sh", "Stop": "stop.sh"},
    "cursor": {"sessionStart": "prime.sh", "stop": "stop.sh"},
}


def commands(target: str, settings: dict) -> dict[str, list[str]]:
    """Event → every command registered for it, whatever the layout."""
    out: dict[str, list[str]] = {}
    for event, entries in settings.get("hooks", {}).items():
        for entry in entries:
            inner = [entry] if target == "cursor" else entry.get("hooks", [])
            out.setdefault(event, []).extend(h["command"] for h in inner)
    return out


@pytest.mark.parametrize("target", ["claude-code", "codex", "cursor"])
@pytest.mark.parametrize("pre_existing", [True, False], ids=["user-settings", "no-settings"])
def test_setup_registers_hooks_and_eject_restores_settings(cli, host, data_dir, target, pre_existing):
    home, project = host
    settings_path = project / SETTINGS_FILE[target]
    if pre_existing:
        settings_path.parent.mkdir(parents=True)
        settings_path.write_text(json.dumps(USER_SETTINGS[target], indent=4))
    before = settings_path.read_bytes() if pre_existing else None

    res = cli("setup", "--target", target)
    assert res.code == 0, res.err
    assert "mnemon ready: 0 insights" in res.out
    config = project / SETTINGS_FILE[target].split("/")[0]
    skill = (config / "skills/mnemon/SKILL.md").read_text()
    assert skill.startswith("---\nname: mnemon\n") and "mnemon recall" in skill and "supersedes" in skill
    guide = (data_dir / "prompt/guide.md").read_text()
    assert "Never store secrets" in guide and "--type supersedes" in guide and "causal_candidates" in guide
    assert (data_dir / "prompt/skill.md").is_file()
    assert (data_dir / "data/default/mnemon.db").is_file()
    assert not (home / ".claude").exists()  # local install never touches the user-wide dir

    settings = json.loads(settings_path.read_text())
    registered = commands(target, settings)
    for event, script in EXPECTED_EVENTS[target].items():
        ours = [c for c in registered[event] if "/hooks/mnemon/" in c]
        assert ours == [str(config / "hooks/mnemon" / script)], (event, registered)
        path = Path(ours[0])
        assert path.is_absolute() and path.stat().st_mode & stat.S_IXUSR
        text = path.read_text()
        assert text.startswith("#!/bin/sh\n") and f"MNEMON_PYTHON={sys.executable}" in text
        assert f"MNEMON_DEFAULT_DATA_DIR={data_dir}" in text
    if pre_existing:  # the user's own entries and keys survive
        for key, value in USER_SETTINGS[target].items():
            if key != "hooks":
                assert settings[key] == value
        for event, entries in USER_SETTINGS[target]["hooks"].items():
            assert settings["hooks"][event][: len(entries)] == entries
    assert "PreCompact" not in settings["hooks"] and "preCompact" not in settings["hooks"]  # compact: opt-in

    again = cli("setup", "--target", target)  # idempotent: one entry per event, never two
    assert again.code == 0, again.err
    assert commands(target, json.loads(settings_path.read_text())) == registered

    out = cli("setup", "--target", target, "--eject")
    assert out.code == 0, out.err
    if pre_existing:
        assert json.loads(settings_path.read_bytes()) == json.loads(before)
    else:
        assert not settings_path.exists()
        assert not config.exists()  # every directory setup created is gone again
    assert not (config / "skills/mnemon").exists() and not (config / "hooks/mnemon").exists()
    assert (data_dir / "prompt/guide.md").is_file()  # the data dir belongs to the user's memory, kept


def test_a_symlinked_settings_file_stays_a_link_through_setup_and_eject(cli, host, tmp_path):
    """A dotfiles checkout links ~/.claude/settings.json to its own file: setup writes through the link (the
    checkout's file gets the hooks) and eject restores that file's bytes, the link in place both times."""
    _, project = host
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text(json.dumps(USER_SETTINGS["claude-code"], indent=4))
    before = dotfiles.read_bytes()
    link = project / SETTINGS_FILE["claude-code"]
    link.parent.mkdir(parents=True)
    link.symlink_to(dotfiles)
    assert cli("setup", "--target", "claude-code").code == 0
    assert link.is_symlink() and link.resolve() == dotfiles.resolve()
    assert "UserPromptSubmit" in json.loads(dotfiles.read_text())["hooks"]
    assert cli("setup", "--target", "claude-code", "--eject").code == 0
    assert link.is_symlink() and dotfiles.read_bytes() == before


@pytest.mark.parametrize("target,rel", [("claude-code", SETTINGS_FILE["claude-code"]), ("opencode", "opencode.json")])
def test_a_config_link_to_a_file_not_there_yet_stays_a_link_after_eject(cli, host, tmp_path, target, rel):
    """Setup writes through a link whose file does not exist yet (creating it); eject then removed the user's
    link and left that file, with our entries, behind. Now the file goes and the link stays, as before setup."""
    _, project = host
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    link = project / rel
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(dotfiles / "config.json")
    assert cli("setup", "--target", target).code == 0
    assert link.is_symlink() and "mnemon" in (dotfiles / "config.json").read_text()
    assert cli("setup", "--target", target, "--eject").code == 0
    assert link.is_symlink() and os.readlink(link) == str(dotfiles / "config.json")
    assert list(dotfiles.iterdir()) == []


def test_a_read_only_settings_file_is_refused_before_anything_is_written(cli, host):
    """A user who made the host's config read-only (0444) meant it: setup refused nothing and replaced it by
    rename, which the mode does not stop. Now setup and eject say so and write nothing (not even the skill)."""
    _, project = host
    path = project / SETTINGS_FILE["claude-code"]
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(USER_SETTINGS["claude-code"], indent=4))
    path.chmod(0o444)
    before = path.read_bytes()
    out = cli("setup", "--target", "claude-code")
    assert out.code == 1 and out.err.startswith("Error: ") and "Traceback" not in out.err
    assert "is read-only (mode 0444)" in out.err and str(path) in out.err
    assert path.read_bytes() == before and path.stat().st_mode & 0o777 == 0o444
    assert not (project / ".claude/skills").exists() and not (project / ".claude/hooks").exists()
    path.chmod(0o644)  # made writable: setup edits it, keeping the mode it has
    assert cli("setup", "--target", "claude-code").code == 0
    path.chmod(0o444)
    installed = path.read_bytes()
    out = cli("setup", "--target", "claude-code", "--eject")
    assert out.code == 1 and "is read-only (mode 0444)" in out.err
    assert path.read_bytes() == installed and (project / ".claude/hooks/mnemon").is_dir()
    path.chmod(0o644)
    assert cli("setup", "--target", "claude-code", "--eject").code == 0
    assert path.read_bytes() == before


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path below ``root`` with a file's bytes (None for a directory)."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def test_several_hosts_with_one_refused_write_nothing_for_any_of_them(cli, host, data_dir):
    """setup installed the hosts before a refused one and stopped there: those stayed installed and the prompts
    were never written. Now every host's checks run before the first write, and the error names the host."""
    home, project = host
    codex = project / SETTINGS_FILE["codex"]
    codex.parent.mkdir(parents=True)
    codex.write_text(json.dumps(USER_SETTINGS["codex"], indent=4))
    codex.chmod(0o444)
    before = tree(project), tree(home)
    res = cli("setup", "--target", "claude-code,codex", "--target", "cursor,opencode")
    assert res.code == 1 and "Traceback" not in res.err and res.out == ""
    assert res.err.startswith("Error: nothing was installed, 1 of 4 hosts refused: codex: ")
    assert f"{codex} is read-only (mode 0444)" in res.err and res.err.count("\n") == 1
    assert (tree(project), tree(home)) == before
    assert not data_dir.exists()  # neither the prompts nor the default store
    codex.chmod(0o644)
    assert cli("setup", "--target", "claude-code,codex,cursor,opencode").code == 0


def test_every_refused_host_is_named_and_eject_of_several_removes_nothing_when_one_is_refused(cli, host):
    home, project = host
    assert cli("setup", "--target", "claude-code,codex,openclaw").code == 0
    codex, openclaw = project / SETTINGS_FILE["codex"], project / ".openclaw/openclaw.json"
    codex.chmod(0o444)
    openclaw.chmod(0o444)
    installed = tree(project)
    res = cli("setup", "--target", "claude-code,codex,openclaw", "--eject")
    assert res.code == 1 and res.out == ""
    assert res.err.startswith("Error: nothing was ejected, 2 of 3 hosts refused: codex: ")
    assert f"; openclaw: {openclaw} is read-only" in res.err
    assert tree(project) == installed  # claude-code's hooks, skill and settings are all still there
    codex.chmod(0o644)
    openclaw.chmod(0o644)
    assert cli("setup", "--target", "claude-code,codex,openclaw", "--eject").code == 0
    assert not (project / ".claude").exists() and not (project / ".openclaw").exists()


@pytest.mark.parametrize("target,rel", [("opencode", "opencode.json"), ("openclaw", ".openclaw/openclaw.json")])
def test_a_plugin_hosts_read_only_config_is_refused_before_its_files_are_written(cli, host, target, rel):
    """The plugin hosts checked their config's mode only when they wrote it, after the skill and the plugin."""
    _, project = host
    path = project / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}\n")
    path.chmod(0o444)
    before = tree(project)
    res = cli("setup", "--target", target)
    assert res.code == 1 and res.err.startswith(f"Error: {path} is read-only (mode 0444)")
    assert tree(project) == before


@pytest.mark.in_process  # it counts the parses in this process
@pytest.mark.parametrize("hooks_first", [True, False], ids=["hooks-first", "hooks-last"])
def test_a_large_settings_file_is_parsed_once_by_install_and_once_by_eject(cli, host, monkeypatch, hooks_first):
    """The JSON editor parsed the whole file again after each edit: a 2.4 MB settings.json took 3.5 s to install
    and 9 s to eject. An edit now re-parses only what it touched, so each command parses the file once (and the
    bytes still come back as they were)."""
    from mnemon.setup import jsonc

    _, project = host
    bulk = {"permissions": {"allow": [f"Bash(npm run task-{i}:*)" for i in range(3000)]},
            "env": {f"VAR_{i}": "x" * 20 for i in range(1000)}}
    user_hooks = {"hooks": USER_SETTINGS["claude-code"]["hooks"]}
    settings = {**user_hooks, **bulk} if hooks_first else {**bulk, **user_hooks}
    path = project / SETTINGS_FILE["claude-code"]
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(settings, indent=2) + "\n")
    before = path.read_bytes()
    whole_parses = []
    real = jsonc._Parser.document
    monkeypatch.setattr(jsonc._Parser, "document", lambda self: whole_parses.append(self.n) or real(self))
    for args in ((), ("--eject",)):
        whole_parses.clear()
        res = cli("setup", "--target", "claude-code", *args)
        assert res.code == 0, res.err
        assert len(whole_parses) == 1, (args, whole_parses)
    assert path.read_bytes() == before


def test_compact_hook_is_opt_in_and_user_groups_mixing_our_hook_keep_theirs(cli, host):
    _, project = host
    assert cli("setup", "--target", "claude-code", "--compact", "--no-nudge").code == 0
    path = project / ".claude/settings.json"
    settings = json.loads(path.read_text())
    assert "Stop" not in settings["hooks"]
    ours = settings["hooks"]["PreCompact"][0]["hooks"][0]["command"]
    assert ours.endswith("/hooks/mnemon/compact.sh")
    # The user adds their own hook inside our group; eject must keep it.
    settings["hooks"]["PreCompact"][0]["hooks"].append({"type": "command", "command": "echo mine"})
    path.write_text(json.dumps(settings))
    assert cli("setup", "--target", "claude-code", "--eject").code == 0
    left = json.loads(path.read_text())
    assert left == {"hooks": {"PreCompact": [{"hooks": [{"type": "command", "command": "echo mine"}]}]}}


def test_global_install_goes_to_home_with_absolute_paths(cli, host):
    home, project = host
    assert cli("setup", "--target", "codex", "--global").code == 0
    hooks = json.loads((home / ".codex/hooks.json").read_text())
    command = hooks["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert command == str(home / ".codex/hooks/mnemon/prime.sh")
    assert (home / ".codex/skills/mnemon/SKILL.md").is_file()
    assert not (project / ".codex").exists()
    assert cli("setup", "--target", "codex", "--global", "--eject").code == 0
    assert not (home / ".codex").exists()


def test_nanobot_gets_the_skill_only(cli, host):
    home, _ = host
    assert cli("setup", "--target", "nanobot", "--global").code == 0
    assert (home / ".nanobot/workspace/skills/mnemon/SKILL.md").is_file()
    assert cli("setup", "--target", "nanobot", "--global", "--eject").code == 0
    assert not (home / ".nanobot/workspace/skills").exists()


def test_eject_strips_a_legacy_instruction_block(cli, host):
    _, project = host
    (project / "CLAUDE.md").write_text("# Project\n\n<!-- mnemon:start -->\nold guide\n<!-- mnemon:end -->\n\nKeep me.\n")
    assert cli("setup", "--target", "claude-code").code == 0
    assert cli("setup", "--target", "claude-code", "--eject").code == 0
    assert (project / "CLAUDE.md").read_text() == "# Project\nKeep me.\n"


@pytest.mark.parametrize("target", ["codex", "opencode"])
def test_eject_with_a_read_only_agents_md_refuses_before_removing_anything(cli, host, target):
    """The markdown step is eject's last: a read-only AGENTS.md with our block failed it after the host's
    files and config entries were gone (exit 1, no report), and the run's later hosts were never ejected."""
    _, project = host
    assert cli("setup", "--target", target).code == 0
    installed = sorted(str(p) for p in project.rglob("*"))
    agents = project / "AGENTS.md"
    agents.write_text("rules\n<!-- mnemon:start -->\nold\n<!-- mnemon:end -->\n")
    agents.chmod(0o444)
    res = cli("setup", "--target", target, "--eject")
    assert res.code == 1 and res.err.startswith(f"Error: {agents} is read-only (mode 0444)")
    assert sorted(str(p) for p in project.rglob("*") if p != agents) == installed
    agents.chmod(0o644)
    assert cli("setup", "--target", target, "--eject").code == 0
    assert agents.read_text() == "rules\n" and sorted(project.iterdir()) == [agents]


@pytest.mark.parametrize("target", ["codex", "opencode"])
def test_a_project_path_that_is_not_utf8_is_refused_before_anything_is_written(cli, host, monkeypatch, target):
    """The hook and config paths are written into text files: a project dir named with a non-UTF-8 byte
    failed with a UnicodeEncodeError traceback after the skill and hook scripts were written."""
    _, project = host
    odd = project / os.fsdecode(b"caf\xe9")
    odd.mkdir()
    monkeypatch.chdir(odd)
    res = cli("setup", "--target", target)
    assert res.code == 1 and "Traceback" not in res.err
    assert res.err.startswith("Error: the ") and res.err.endswith(" config directory path is not valid UTF-8\n")
    assert list(odd.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--target", "vim"], 'Error: invalid target "vim" (must be claude-code, codex, cursor, openclaw, nanobot, '
                              'pi, hermes, zcode, minimax-code, trae, qoder, qoderwork, codebuddy, workbuddy, kimi, '
                              'opencode)\n'),
        ([], "Error: no supported agent host detected; choose one with --target"),
    ],
)
def test_bad_targets_are_clean_errors(cli, host, args, message, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no claude/codex/cursor executable to detect
    res = cli("setup", *args)
    assert res.code == 1 and res.err.startswith(message) and "Traceback" not in res.err
    assert not any(p.exists() for p in (Path(".claude"), Path(".codex"), Path(".cursor")))


def test_invalid_settings_json_is_left_untouched(cli, host):
    _, project = host
    path = project / ".claude/settings.json"
    path.parent.mkdir()
    path.write_text("{ not json")
    res = cli("setup", "--target", "claude-code")
    assert res.code == 1 and "settings.json is not valid JSON" in res.err
    assert path.read_text() == "{ not json"
    assert not (project / ".claude/hooks").exists() and not (project / ".claude/skills").exists()


@pytest.mark.parametrize("text", ["{}\n", '{"hooks": {}}\n', '{"version": 1}\n', '{"hooks": []}\n'])
@pytest.mark.parametrize("target", ["claude-code", "codex", "cursor"])
def test_eject_without_setup_leaves_a_config_without_our_entries_alone(cli, host, target, text):
    """No install record and no entry of ours: eject has nothing to take out. It once tidied the user's own
    empty containers and then deleted the file as "left empty" (`setup --eject --yes` on every detected host)."""
    _, project = host
    path = project / SETTINGS_FILE[target]
    path.parent.mkdir(parents=True)
    path.write_text(text)
    res = cli("setup", "--target", target, "--eject")
    assert res.code == 0, res.err
    assert path.read_text() == text


@pytest.mark.parametrize("where", ["file", "file/below"])
def test_a_data_dir_that_cannot_hold_the_prompts_is_refused_before_anything_is_written(host, capsys, where):
    """The prompts are written after the hosts' files: a data dir that is a file (or lies below one) ended
    setup with a traceback, the host's skill, hooks and settings already written."""
    home, project = host
    (home / "file").write_text("not a directory")
    res = Cli(home / where, capsys)("setup", "--target", "claude-code")
    assert res.code == 1 and "Traceback" not in res.err
    assert res.err == f"Error: cannot use {home / where} as the data directory: {home / 'file'} is not a directory\n"
    assert not (project / ".claude").exists()
    assert (home / "file").read_text() == "not a directory"


@pytest.mark.parametrize("target,blocker", [("claude-code", ".claude"), ("claude-code", ".claude/skills"),
                                             ("claude-code", ".claude/hooks"), ("claude-code", ".claude/hooks/mnemon"),
                                             ("codex", ".codex"), ("opencode", ".opencode"), ("pi", ".pi/extensions"),
                                             ("openclaw", ".openclaw/extensions")])
def test_a_file_where_setup_needs_a_directory_is_refused_before_anything_is_written(cli, host, target, blocker):
    """mkdir met the file with a traceback (NotADirectoryError, FileExistsError), part of the install
    (the skill, say) already written."""
    _, project = host
    (project / blocker).parent.mkdir(parents=True, exist_ok=True)
    (project / blocker).write_text("mine")
    before = sorted(str(p.relative_to(project)) for p in project.rglob("*"))
    res = cli("setup", "--target", target)
    assert res.code == 1 and "Traceback" not in res.err
    assert res.err == f"Error: {project / blocker} is not a directory, and setup needs one there; move it, then run " \
        "setup again\n"
    assert sorted(str(p.relative_to(project)) for p in project.rglob("*")) == before
    assert (project / blocker).read_text() == "mine"


@pytest.mark.parametrize("target,rel", [("claude-code", ".claude/settings.json"), ("kimi", ".kimi-code/config.toml"),
                                        ("hermes", ".hermes/config.yaml")])
def test_a_config_that_is_a_named_pipe_is_refused_instead_of_read(host, data_dir, target, rel):
    """Reading a FIFO waits for a writer: setup and eject hung forever on one."""
    home, _ = host
    path = home / rel
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    for args in ((), ("--eject",)):
        res = run_process(["setup", "--target", target, "--global", *args], data_dir=data_dir,
                          env={"HOME": str(home)}, timeout=30)
        assert res.code == 1 and res.err == f"Error: {path} is not a regular file; move it, then run setup again\n"
    assert stat.S_ISFIFO(path.lstat().st_mode) and sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_eject_refuses_a_settings_path_that_is_a_directory(cli, host):
    _, project = host
    (project / SETTINGS_FILE["claude-code"]).mkdir(parents=True)
    res = cli("setup", "--target", "claude-code", "--eject")
    assert res.code == 1 and res.err == f"Error: cannot read {project / SETTINGS_FILE['claude-code']}: Is a directory\n"
    assert (project / SETTINGS_FILE["claude-code"]).is_dir()


def test_detected_hosts_are_set_up_without_questions_when_not_on_a_terminal(cli, host):
    home, project = host
    (home / ".cursor").mkdir()
    res = cli("setup")  # stdin is not a terminal under pytest
    assert res.code == 0, res.err
    assert (project / ".cursor/hooks.json").is_file()


def test_help_of_agent_commands_imports_no_numpy():
    code = (
        "import sys\nfrom mnemon.cli import main\n"
        "for c in ('setup', 'viz', 'mcp'):\n    main([c, '--help'])\n"
        "print('HEAVY' if {'numpy', 'numba'} & set(sys.modules) else 'LIGHT')"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60).stdout
    assert "--eject" in out and "--format" in out and "serve" in out
    assert out.strip().endswith("LIGHT")
