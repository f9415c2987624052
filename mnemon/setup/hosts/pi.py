"""Pi (setup-targets §2): ``extensions/mnemon.ts`` and the skill, found by Pi's auto-discovery.

Pi loads the TypeScript extension with jiti (no build step). Before each agent run it appends to
the system prompt the store's status line, Pi's own guide (``<data-dir>/prompt/pi/guide.md``,
written here, kept on eject as in Go) and, with ``--recall-on-prompt`` (off by default: the Go
extension does not recall), the memories recalled for the prompt. No config file is registered.
"""

from __future__ import annotations

from pathlib import Path

from mnemon import prompts
from mnemon.setup import Options, Placement, Report, Step, files, read_manifest, write_skill
from mnemon.setup.plugin_files import PluginConfig, render_code
from mnemon.setup.plugin_hosts import Install, eject_step

OWNED = ("extensions/mnemon.ts", "skills/mnemon")
GO_PARENTS = ("extensions", "skills")


def write_prompts(data_dir: Path) -> list[Path]:
    """Pi's copies of the guide and the skill in ``<data-dir>/prompt/pi/``."""
    written = []
    for name in prompts.NAMES:
        path = data_dir.absolute() / "prompt" / "pi" / name
        files.make_dirs(path.parent)
        files.write_text(path, prompts.text(name))
        written.append(path)
    return written


def plan_install(placement: Placement, options: Options) -> Step:
    run = Install(placement, placement.config_dir / "extensions", options.data_dir.absolute() / "prompt" / "pi")
    recall = options.recall(placement.target)
    extension = placement.config_dir / "extensions" / "mnemon.ts"

    def write() -> Report:
        skill = write_skill(placement, run.created)
        run.report.add("skill", skill)
        config = PluginConfig(options.data_dir, recall_on_prompt=recall, prompt_subdir="pi",
                              skills_dir=skill.parent.parent)
        run.write(extension, render_code("pi/mnemon.ts", config))
        run.report.add("plugin", extension)
        for path in write_prompts(options.data_dir):
            run.report.add("prompt", path)
        run.note_recall(recall)
        run.report.lines.append("  Start a new Pi session or run /reload")
        return run.finish()

    return write


def plan_eject(placement: Placement, options: Options) -> Step:
    # No config registers Pi's extension: its files, the directories setup made, AGENTS.md's block.
    return eject_step(placement, options, OWNED, GO_PARENTS, read_manifest(placement.skill_dir))
