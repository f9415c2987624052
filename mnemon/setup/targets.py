"""The hosts ``mnemon setup`` knows: where their config lives and which hook events they read.

Each host names its lifecycle events differently and reads hook output in its own format
(contract §3.18): Claude Code takes plain stdout as context at SessionStart and UserPromptSubmit;
Codex takes the same events with JSON ``hookSpecificOutput``; Cursor keeps a flat ``hooks.json``
(version 1) whose ``sessionStart`` answers ``additional_context``. Nanobot reads skills only.
Targets the contract names without a documented hook format are refused with a clear message.
stdlib only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# Our four hooks and the script file names the Go installer used (§3.18), so a user who ejects
# with either tool finds the same files.
HOOK_FILES = {"prime": "prime.sh", "remind": "user_prompt.sh", "nudge": "stop.sh", "compact": "compact.sh"}


@dataclass(frozen=True)
class Target:
    """One host: config directory names, settings file and the hook events it reads."""

    name: str
    local_dir: str  # relative to the project (current directory)
    global_dir: str  # relative to the home directory
    settings_file: str = ""  # "" ⇒ skill only
    layout: str = ""  # "nested" (matcher groups, Claude Code and Codex) or "flat" (Cursor)
    output: str = ""  # hook output dialect, see hooks.py
    events: dict[str, str] = field(default_factory=dict)  # hook → host event name
    default_on: tuple[str, ...] = ()
    probe: tuple[str, ...] = ()  # executables whose presence means the host is installed

    def config_dir(self, *, is_global: bool, home: Path, project: Path) -> Path:
        base = home / self.global_dir if is_global else project / self.local_dir
        return base.absolute()

    @property
    def has_hooks(self) -> bool:
        return bool(self.events)


TARGETS: dict[str, Target] = {
    "claude-code": Target(
        "claude-code", ".claude", ".claude", "settings.json", "nested", "claude",
        {"prime": "SessionStart", "remind": "UserPromptSubmit", "nudge": "Stop", "compact": "PreCompact"},
        ("prime", "remind", "nudge"), ("claude",),
    ),
    "codex": Target(
        "codex", ".codex", ".codex", "hooks.json", "nested", "codex",
        {"prime": "SessionStart", "remind": "UserPromptSubmit", "nudge": "Stop"},
        ("prime", "remind", "nudge"), ("codex",),
    ),
    "cursor": Target(
        "cursor", ".cursor", ".cursor", "hooks.json", "flat", "cursor",
        {"prime": "sessionStart", "nudge": "stop", "compact": "preCompact"},
        ("prime", "nudge"), ("cursor", "cursor-agent"),
    ),
    "nanobot": Target("nanobot", ".nanobot", ".nanobot/workspace", probe=("nanobot",)),
}

# Named by the contract, but their hook and plugin formats are not specified there (§3.18).
UNSUPPORTED = (
    "openclaw", "pi", "hermes", "zcode", "minimax-code", "trae", "qoder", "qoderwork", "codebuddy",
    "workbuddy", "kimi", "opencode",
)
