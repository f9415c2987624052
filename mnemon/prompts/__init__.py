"""The agent-facing texts shipped as package data: the skill (command reference) and the guide.

``skill.md`` teaches an agent the commands; ``guide.md`` teaches it when to recall, what is worth
remembering and how to review the candidates that ``remember`` returns (contract §3.18, seeds'
``prompt/`` directory). ``mnemon setup`` copies both into ``<data-dir>/prompt/`` where the hooks
read the guide at run time, and installs the skill into each host's skill directory. stdlib only.
"""

from __future__ import annotations

from importlib import resources

NAMES = ("guide.md", "skill.md")

# Claude Code, Codex and Cursor read a skill's name and trigger description from YAML front matter.
SKILL_FRONT_MATTER = """---
name: mnemon
description: Persistent memory across sessions. Use it to recall earlier decisions, preferences and facts before
  answering, and to remember durable insights (decisions, preferences, facts, lessons) when you learn them.
---

"""


def text(name: str) -> str:
    """Return the packaged prompt ``name`` (one of ``NAMES``)."""
    if name not in NAMES:
        raise ValueError(f"unknown prompt {name!r}")
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


def skill_file() -> str:
    """The SKILL.md a host loads: front matter plus the command reference."""
    return SKILL_FRONT_MATTER + text("skill.md")
