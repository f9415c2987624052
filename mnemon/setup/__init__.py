"""``mnemon setup``: install the skill, the guide and the hooks into an agent host, or eject them.

Owns contract §3.18. ``install`` writes ``<config>/skills/mnemon/SKILL.md``, the hook scripts in
``<config>/hooks/mnemon/`` and their registration in the host's settings file, plus a manifest of
what it had to create; ``eject`` removes exactly that, so the settings file compares equal to what
it was before setup. The shared prompts go to ``<data-dir>/prompt/`` (``write_prompts``). Paths
come in as arguments (home, project, data dir): nothing here reads the environment. stdlib only.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from mnemon import prompts
from mnemon.errors import InputError
from mnemon.setup import hooks as hook_scripts
from mnemon.setup import settings
from mnemon.setup.targets import TARGETS, UNSUPPORTED, Target

__all__ = ["Placement", "TARGETS", "Target", "eject", "install", "resolve_target", "write_prompts"]

MANIFEST = "setup.json"
BLOCK_START, BLOCK_END = "<!-- mnemon:start -->", "<!-- mnemon:end -->"
# Instruction files that older installers extended with a marked mnemon block (§3.18).
INSTRUCTION_FILES = {"claude-code": "CLAUDE.md", "codex": "AGENTS.md"}


def resolve_target(name: str) -> Target:
    key = name.strip().lower()
    if key in TARGETS:
        return TARGETS[key]
    valid = ", ".join(TARGETS)
    if key in UNSUPPORTED:
        raise InputError(f'target "{name}" is not supported by this version of mnemon (supported: {valid})')
    raise InputError(f'invalid target "{name}"; valid: {valid}')


@dataclass(frozen=True)
class Placement:
    """Where one target's files go for this run."""

    target: Target
    config_dir: Path
    project: Path
    is_global: bool

    @property
    def skill_dir(self) -> Path:
        return self.config_dir / "skills" / "mnemon"

    @property
    def hook_dir(self) -> Path:
        return self.config_dir / "hooks" / "mnemon"

    @property
    def settings_path(self) -> Path:
        return self.config_dir / self.target.settings_file

    @property
    def instruction_file(self) -> Path | None:
        name = INSTRUCTION_FILES.get(self.target.name)
        if name is None:
            return None
        return (self.config_dir if self.is_global else self.project) / name


def place(target: Target, *, is_global: bool, home: Path, project: Path) -> Placement:
    return Placement(target, target.config_dir(is_global=is_global, home=home, project=project), project, is_global)


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)

    def add(self, label: str, value: object) -> None:
        self.lines.append(f"  {label:<9}{value}")


def write_prompts(data_dir: Path) -> list[Path]:
    """Write ``<data-dir>/prompt/{guide.md,skill.md}``, the files hooks read at run time."""
    prompt_dir = data_dir.absolute() / "prompt"
    prompt_dir.mkdir(parents=True, exist_ok=True)
    data_dir.absolute().chmod(0o700)
    written = []
    for name in prompts.NAMES:
        path = prompt_dir / name
        path.write_text(prompts.text(name), encoding="utf-8")
        written.append(path)
    return written


def _read_manifest(hook_dir: Path) -> dict[str, object] | None:
    try:
        data = json.loads((hook_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _mkdirs(path: Path, created: list[str]) -> None:
    """mkdir -p, remembering which directories did not exist before (eject removes them if empty)."""
    missing = []
    for parent in [path, *path.parents]:
        if parent.exists():
            break
        missing.append(parent)
    path.mkdir(parents=True, exist_ok=True)
    created.extend(str(p) for p in reversed(missing))


def install(placement: Placement, hooks: list[str], data_dir: Path) -> Report:
    """Install the skill and the given hooks for one target; re-running replaces our entries only."""
    target = placement.target
    report = Report([f"{target.name} ({'global' if placement.is_global else 'local'}): {placement.config_dir}"])
    previous = _read_manifest(placement.hook_dir) or {}
    created_dirs: list[str] = list(previous.get("created_dirs", []))  # type: ignore[call-overload]
    data = settings.load(placement.settings_path) if target.has_hooks else None  # validate before writing

    _mkdirs(placement.skill_dir, created_dirs)
    (placement.skill_dir / "SKILL.md").write_text(prompts.skill_file(), encoding="utf-8")
    report.add("skill", placement.skill_dir / "SKILL.md")
    if not target.has_hooks:
        return report

    manifest: dict[str, object] = {k: v for k, v in previous.items() if k != "created_dirs"}
    _mkdirs(placement.hook_dir, created_dirs)
    for stale in placement.hook_dir.glob("*.sh"):  # a hook switched off since the last run
        stale.unlink()
    scripts = hook_scripts.write_scripts(target, hooks, placement.hook_dir, data_dir)
    merged = settings.merge(target, data, scripts, placement.hook_dir, manifest)
    manifest["created_dirs"] = sorted(set(created_dirs), key=created_dirs.index)
    manifest["target"] = target.name
    (placement.hook_dir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    settings.save(placement.settings_path, merged)
    for hook, script in scripts.items():
        report.add(hook, f"{script}  ({target.events[hook]})")
    report.add("settings", placement.settings_path)
    return report


def _strip_block(path: Path) -> bool:
    """Remove a ``<!-- mnemon:start --> … <!-- mnemon:end -->`` block left by an older installer."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    start, end = text.find(BLOCK_START), text.find(BLOCK_END)
    if start < 0 or end < start:
        return False
    after = text[end + len(BLOCK_END):]
    path.write_text(text[:start].rstrip("\n") + ("\n" + after.lstrip("\n") if after.strip() else "\n"), "utf-8")
    return True


def eject(placement: Placement) -> Report:
    """Remove our skill, hook scripts and settings entries for one target, and nothing else."""
    target = placement.target
    report = Report([f"{target.name} ({'global' if placement.is_global else 'local'}): {placement.config_dir}"])
    manifest = _read_manifest(placement.hook_dir)
    if target.has_hooks:
        data = settings.load(placement.settings_path)
        if data is not None:
            cleaned = settings.remove(target, data, placement.hook_dir, manifest)
            if cleaned is None:
                placement.settings_path.unlink()
                report.add("removed", placement.settings_path)
            elif cleaned != data:
                settings.save(placement.settings_path, cleaned)
                report.add("cleaned", placement.settings_path)
    for owned in (placement.skill_dir, placement.hook_dir):
        if owned.is_dir():
            shutil.rmtree(owned)
            report.add("removed", owned)
    created = [Path(p) for p in (manifest or {}).get("created_dirs", [])]  # type: ignore[attr-defined]
    if manifest is None:  # no record: only our own parents may go, and only when empty
        created = [placement.config_dir / "skills", placement.config_dir / "hooks"]
    for directory in sorted(created, key=lambda p: len(p.parts), reverse=True):
        if directory.is_dir() and not any(directory.iterdir()):
            directory.rmdir()
    instructions = placement.instruction_file
    if instructions is not None and _strip_block(instructions):
        report.add("cleaned", instructions)
    if len(report.lines) == 1:
        report.lines.append("  nothing to remove")
    return report


def detect(home: Path, project: Path) -> list[Target]:
    """Hosts that look installed: their config directory exists or their executable is on PATH."""
    found = []
    for target in TARGETS.values():
        dirs = (home / target.global_dir, project / target.local_dir)
        if any(d.is_dir() for d in dirs) or any(shutil.which(exe) for exe in target.probe):
            found.append(target)
    return found
