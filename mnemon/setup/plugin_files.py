"""Render the in-process plugins (OpenClaw, OpenCode, Pi) from the assets in ``plugins/``.

Each JavaScript/TypeScript asset has one line ``/*@MNEMON_RUNTIME@*/`` where the shared runtime
(``plugins/runtime.js``: the budgeted, fail-open mnemon runner, status line, recall on prompt) is
inlined, because every host loads one self-contained file; and the runtime has one substitution
point, ``const CONFIG = /*@MNEMON_CONFIG@*/null;``, replaced by the install-time configuration
as a JSON object: the absolute command that runs mnemon, the data and prompt dirs, the chosen
hooks, recall on prompt and the time budgets. JSON assets are written as they are, except the
OpenClaw manifest's version. stdlib only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from mnemon.setup.hooks import (
    RECALL_BUDGET_SECONDS,
    RECALL_FLOOR,
    RECALL_LIMIT,
    console_script,
    interpreter,
    mnemon_import_root,
)

RUNTIME_MARK = "/*@MNEMON_RUNTIME@*/"
CONFIG_MARK = "/*@MNEMON_CONFIG@*/null"

# Recall on prompt uses the shell hooks' limit, relevance floor, budget and prompt bound (one policy).
RECALL_PROMPT_CHARS = 500  # = PROMPT_CHARS in templates/helper.py, the shell hooks' bound
PRIME_BUDGET_MS = 3000  # session start: `mnemon status`, off the prompt's path where the host allows


@dataclass(frozen=True)
class PluginConfig:
    """What a plugin needs to know at run time; everything absolute."""

    data_dir: Path
    hooks: tuple[str, ...] = ("prime", "remind", "nudge")
    recall_on_prompt: bool = False
    prompt_subdir: str = ""  # Pi keeps its own guide in <prompt dir>/pi
    skills_dir: Path | None = None

    def as_json(self) -> dict[str, object]:
        data_dir = self.data_dir.absolute()
        root = mnemon_import_root()
        return {
            "command": [script] if (script := console_script()) else [interpreter(), "-m", "mnemon"],
            "env": {"PYTHONPATH": root} if root else {},
            "dataDir": str(data_dir),
            "promptDir": str(data_dir / "prompt"),
            "promptSubdir": self.prompt_subdir,
            "skillsDir": str(self.skills_dir.absolute()) if self.skills_dir else "",
            "hooks": {hook: hook in self.hooks for hook in ("prime", "remind", "nudge", "compact")},
            "recall": {
                "enabled": self.recall_on_prompt,
                "limit": RECALL_LIMIT,
                "minRelevance": RECALL_FLOOR,
                "budgetMs": round(RECALL_BUDGET_SECONDS * 1000),
                "maxPromptChars": RECALL_PROMPT_CHARS,
            },
            "primeBudgetMs": PRIME_BUDGET_MS,
        }


def asset(name: str) -> str:
    """The packaged asset ``name`` (a path relative to ``plugins/``), unrendered."""
    return resources.files(__package__).joinpath("plugins", name).read_text(encoding="utf-8")


def _substitute(text: str, mark: str, value: str, name: str) -> str:
    if text.count(mark) != 1:
        raise ValueError(f"plugin asset {name} must contain {mark} exactly once")
    return text.replace(mark, value)


def render_code(name: str, config: PluginConfig) -> str:
    """A JavaScript/TypeScript asset with the runtime inlined and the configuration filled in."""
    runtime = asset("runtime.js")
    literal = json.dumps(config.as_json(), indent=2, ensure_ascii=False)
    runtime = _substitute(runtime, CONFIG_MARK, literal, "runtime.js")
    return _substitute(asset(name), RUNTIME_MARK, runtime.rstrip("\n"), name)


def openclaw_manifest(version: str) -> str:
    """``openclaw.plugin.json`` with mnemon's version, unless that is empty or ``dev`` (as in Go)."""
    manifest = json.loads(asset("openclaw/extension/openclaw.plugin.json"))
    if version and version != "dev":
        manifest["version"] = version
    return json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
