"""The 16 hosts ``mnemon setup`` knows (those of the Go program): where their config lives, how it is probed,
which hook events they read, how their config registers hooks, and what is on by default.

Each host names its lifecycle events differently and reads hook output in its own dialect
(setup-targets.md): Claude Code takes plain stdout; Codex, ZCode, TRAE, Qoder, CodeBuddy, WorkBuddy and
Kimi take a ``hookSpecificOutput`` JSON object; Cursor reads per-event fields; Hermes reads
``{"context": …}``. ``registration`` names the module-level registrar in ``registrars`` that edits the
host's config file. Plugin hosts (OpenClaw, OpenCode, Pi) run our own code inside the host; their
install and eject live in ``mnemon.setup.hosts.<name>`` (``module``). stdlib only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

# Our four hooks and the script file names the Go installer uses, so that a user who ejects with either
# program finds the same files gone. Hermes names them after the hook (``agent-hooks/mnemon/remind.sh``).
HOOK_FILES = {"prime": "prime.sh", "remind": "user_prompt.sh", "nudge": "stop.sh", "compact": "compact.sh"}
HERMES_FILES = {"prime": "prime.sh", "remind": "remind.sh", "nudge": "nudge.sh", "compact": "compact.sh"}
CLAUDE_EVENTS = {"prime": "SessionStart", "remind": "UserPromptSubmit", "nudge": "Stop"}
ALL_HOOKS = ("prime", "remind", "nudge", "compact")


@dataclass(frozen=True)
class Target:
    """One host. Directory names are relative to the project (local) or the home directory (global)."""

    name: str
    display: str
    local_dir: str | None  # None ⇒ home-only host (no local scope; --global is implied)
    global_dir: str
    probe: tuple[str, ...] = ()  # executables whose presence on PATH means "detected"
    probe_dirs: tuple[str, ...] = ()  # more home-relative dirs that mean "detected" (MiniMax's legacy ~/.mavis)
    global_env: str = ""  # environment variable that overrides the global dir (Kimi, OpenCode)
    settings_file: str = ""  # config file that registers the hooks, relative to the config dir
    registration: str = ""  # registrar name (see registrars.py); "" ⇒ no registration
    output: str = ""  # hook output dialect (templates/common.sh)
    events: dict[str, str] = field(default_factory=dict)  # hook → host event name
    files: dict[str, str] = field(default_factory=lambda: dict(HOOK_FILES))
    hook_subdir: str = "hooks/mnemon"
    default_on: tuple[str, ...] = ()
    recall_default: bool = False  # does the prompt hook recall by default (as the Go integration does)?
    markdown: str = ""  # instruction file whose legacy mnemon block eject strips ("" ⇒ no markdown step)
    global_hooks_only: bool = False  # ZCode ignores project-level hooks: a local install is the skill only
    default_global: bool = False  # the interactive scope prompt defaults to Global (OpenClaw, Nanobot)
    module: str = ""  # plugin hosts: module with install/eject/installed (mnemon.setup.hosts.*)

    @property
    def home_only(self) -> bool:
        return self.local_dir is None

    @property
    def has_hooks(self) -> bool:
        return bool(self.events)

    def global_config_dir(self, home: Path, env: Mapping[str, str]) -> Path:
        override = env.get(self.global_env, "").strip() if self.global_env else ""
        return Path(override).expanduser().absolute() if override else (home / self.global_dir).absolute()

    def config_dir(self, *, is_global: bool, home: Path, project: Path, env: Mapping[str, str] | None = None) -> Path:
        if is_global or self.local_dir is None:
            return self.global_config_dir(home, env or {})
        return (project / self.local_dir).absolute()


def _hooked(name: str, display: str, local: str | None, glob: str, exe: tuple[str, ...], settings: str,
            registration: str, output: str, **extra: object) -> Target:
    """A host that runs our three shell hooks (prime, remind, nudge) registered in a config file."""
    extra.setdefault("events", dict(CLAUDE_EVENTS))
    extra.setdefault("default_on", ("prime", "remind", "nudge"))
    extra.setdefault("markdown", "AGENTS.md")
    return Target(name, display, local, glob, exe, settings_file=settings, registration=registration,
                  output=output, **extra)  # type: ignore[arg-type]


TARGETS: dict[str, Target] = {
    "claude-code": Target(
        "claude-code", "Claude Code", ".claude", ".claude", ("claude",), settings_file="settings.json",
        registration="claude", output="claude", events={**CLAUDE_EVENTS, "compact": "PreCompact"},
        default_on=("prime", "remind", "nudge"), markdown="CLAUDE.md",
    ),
    "codex": _hooked("codex", "Codex", ".codex", ".codex", ("codex",), "hooks.json", "codex", "codex"),
    "cursor": Target(
        "cursor", "Cursor", ".cursor", ".cursor", ("cursor", "cursor-agent"), settings_file="hooks.json",
        registration="cursor", output="cursor",
        events={"prime": "sessionStart", "nudge": "stop", "compact": "preCompact"}, default_on=("prime", "nudge"),
    ),
    "openclaw": Target(
        "openclaw", "OpenClaw", ".openclaw", ".openclaw", ("openclaw",), default_on=("prime", "remind", "nudge"),
        recall_default=True, markdown="AGENTS.md", default_global=True, module="mnemon.setup.hosts.openclaw",
    ),
    "nanobot": Target("nanobot", "Nanobot", ".nanobot", ".nanobot/workspace", ("nanobot",), markdown="AGENTS.md",
                      default_global=True),
    # Pi reads its agent dir from PI_CODING_AGENT_DIR (Pi docs; the Go extension honours it too).
    "pi": Target("pi", "Pi", ".pi", ".pi/agent", ("pi",), markdown="AGENTS.md", module="mnemon.setup.hosts.pi",
                 global_env="PI_CODING_AGENT_DIR"),
    "hermes": Target(
        "hermes", "Hermes Agent", None, ".hermes", ("hermes",), settings_file="config.yaml", registration="hermes",
        output="hermes", files=dict(HERMES_FILES), hook_subdir="agent-hooks/mnemon",
        events={"prime": "on_session_start", "remind": "pre_llm_call", "nudge": "post_llm_call",
                "compact": "on_session_finalize"},
        default_on=("prime", "remind", "nudge"), recall_default=True, markdown="AGENTS.md",
    ),
    "zcode": _hooked("zcode", "ZCode", ".zcode", ".zcode", ("zcode",), "cli/config.json", "zcode", "json",
                     global_hooks_only=True, markdown=""),
    # Skill only. The Go test confirms just the ~/.minimax and legacy ~/.mavis probes; the executable is
    # unconfirmed, and third-party code names the MiniMax Code CLI `mcode`, so that is what we look for.
    "minimax-code": Target("minimax-code", "MiniMax Code", ".minimax", ".minimax", ("mcode",), probe_dirs=(".mavis",)),
    # TRAE's CN docs put global hooks in ~/.trae-cn/hooks.json; the Go program writes ~/.trae/ and so do we, so
    # that both programs find and eject the same file [unconfirmed for the international build].
    "trae": _hooked("trae", "TRAE", ".trae", ".trae", ("trae",), "hooks.json", "trae", "json"),
    # Qoder's IDE parses hook stdout strictly as JSON (third-party report), so the Qoder-like hosts answer with
    # hookSpecificOutput, which its CLI accepts too. QoderWork reuses Qoder's scripts, as in the Go program.
    "qoder": _hooked("qoder", "Qoder", ".qoder", ".qoder", ("qoder",), "settings.json", "claude-plain", "json"),
    "qoderwork": _hooked("qoderwork", "QoderWork", None, ".qoderwork", ("qoderwork",), "settings.json",
                         "claude-plain", "json"),
    "codebuddy": _hooked("codebuddy", "CodeBuddy Code", ".codebuddy", ".codebuddy", ("codebuddy",), "settings.json",
                         "claude-plain", "json"),
    # WorkBuddy has no public hooks docs; the Go program treats it as a copy of CodeBuddy (Claude-compatible
    # settings.json) [unconfirmed], and so do we.
    "workbuddy": _hooked("workbuddy", "WorkBuddy", ".workbuddy", ".workbuddy", ("workbuddy",), "settings.json",
                         "claude-plain", "json"),
    # Kimi reads `message`/hookSpecificOutput from JSON stdout; whether it uses SessionStart's is disputed
    # [unconfirmed], so prime answers in that documented JSON form. Its Stop blocks with exit 2 (stop.sh).
    "kimi": _hooked("kimi", "Kimi Code", None, ".kimi-code", ("kimi",), "config.toml", "kimi", "kimi",
                    global_env="KIMI_CODE_HOME"),
    "opencode": Target(
        "opencode", "OpenCode", ".opencode", ".config/opencode", ("opencode",), global_env="OPENCODE_CONFIG_DIR",
        recall_default=True, markdown="AGENTS.md", module="mnemon.setup.hosts.opencode",
    ),
}
