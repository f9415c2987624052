"""``mnemon setup``: install the skill, the guide and the hooks into an agent host, detect hosts, or eject.

Owns contract §3.18 and setup-targets.md. ``install`` writes ``<config>/skills/mnemon/SKILL.md``, the hook
scripts in ``<config>/<hook_subdir>/`` and their registration in the host's config file (through the
registrar the target names), plus a manifest of what it had to create; ``eject`` removes exactly that,
so the host's config compares byte for byte with what it was before setup. Plugin hosts (OpenClaw,
OpenCode, Pi) plug in through ``Target.module``: a module with ``plan_install(placement, options) -> Step``
and ``plan_eject(placement, options) -> Step`` (and optionally ``installed(placement) -> bool``) that uses the
helpers here. A plan runs every check and reads what it must; only its ``Step`` writes, so ``setup`` with
several hosts writes nothing when any of them is refused. The shared prompts go to ``<data-dir>/prompt/`` (``write_prompts``). Paths and the
environment come in as arguments: nothing here reads ``os.environ``. stdlib only (PyYAML is imported
inside the Hermes registrar).
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from mnemon import prompts
from mnemon.errors import InputError
from mnemon.validate import check_text
from mnemon.setup import files
from mnemon.setup import hooks as hook_scripts
from mnemon.setup import manifest as manifest_records
from mnemon.setup.targets import ALL_HOOKS, TARGETS, Target

__all__ = [
    "Detection", "Options", "available", "check_prompt_dir", "Placement", "Report", "Step", "TARGETS", "Target", "detect", "eject",
    "install", "place", "plan_eject", "plan_install", "read_manifest", "resolve_target", "strip_markdown", "write_manifest", "write_prompts", "write_skill",
]

MANIFEST = manifest_records.NAME
read_manifest = manifest_records.read  # (directory) -> dict | None
write_manifest = manifest_records.write  # (directory, dict)
BLOCK_START, BLOCK_END = "<!-- mnemon:start -->", "<!-- mnemon:end -->"
Step = Callable[[], "Report"]  # the writes of one planned install or eject
VERSION_TIMEOUT_SECONDS = 3.0
# Hosts whose Go eject also removes their config dir when it is left empty, even without our manifest.
_EJECT_REMOVES_EMPTY_CONFIG = ("kimi", "minimax-code", "nanobot")
# State our hooks keep inside a host's config dir, which eject removes too (setup-targets §3: Hermes'
# prime/nudge leave prime-context.txt and pending-nudge.txt in ~/.hermes/mnemon/ for the next pre_llm_call).
_HOOK_STATE_DIRS = {"hermes": "mnemon"}


def resolve_target(name: str) -> Target:
    key = name.strip().lower()
    if key in TARGETS:
        return TARGETS[key]
    raise InputError(f'invalid target "{name}" (must be {", ".join(TARGETS)})')


@dataclass(frozen=True)
class Placement:
    """Where one target's files go for this run."""

    target: Target
    config_dir: Path
    project: Path
    home: Path
    is_global: bool

    @property
    def scope(self) -> str:
        return "global" if self.is_global else "local"

    @property
    def skill_dir(self) -> Path:
        return self.config_dir / "skills" / "mnemon"

    @property
    def hook_dir(self) -> Path:
        return self.config_dir / self.target.hook_subdir

    @property
    def settings_path(self) -> Path:
        return self.config_dir / self.target.settings_file

    @property
    def markdown_path(self) -> Path | None:
        # The Go program strips ./CLAUDE.md or ./AGENTS.md in the current directory, whatever the scope.
        return self.project / self.target.markdown if self.target.markdown else None

    @property
    def installs_hooks(self) -> bool:
        return self.target.has_hooks and (self.is_global or not self.target.global_hooks_only)


def place(target: Target, *, is_global: bool, home: Path, project: Path,
          env: Mapping[str, str] | None = None) -> Placement:
    """Home-only hosts (Hermes, Kimi, QoderWork) ignore the scope: their placement is always global."""
    is_global = is_global or target.home_only
    config = target.config_dir(is_global=is_global, home=home, project=project, env=env)
    return Placement(target, config, project.absolute(), home.absolute(), is_global)


@dataclass(frozen=True)
class Options:
    """What the user chose. ``hooks`` is the set of enabled hooks among ALL_HOOKS; ``recall_on_prompt`` is
    None for the host's default (``Target.recall_default``)."""

    data_dir: Path
    hooks: tuple[str, ...] = ("prime", "remind", "nudge")
    recall_on_prompt: bool | None = None
    version: str = ""
    markdown: Callable[[Path], bool] = field(default=lambda path: True)  # eject: strip this file's block?

    def recall(self, target: Target) -> bool:
        return target.recall_default if self.recall_on_prompt is None else self.recall_on_prompt


def default_hooks(target: Target, *, compact: bool = False, remind: bool = True, nudge: bool = True) -> tuple[str, ...]:
    """The host's default hook set adjusted by mnemon's own --compact/--no-remind/--no-nudge."""
    chosen = []
    for hook in ALL_HOOKS:
        on = hook in target.default_on or (hook == "compact" and compact)
        if (hook == "remind" and not remind) or (hook == "nudge" and not nudge):
            on = False
        if on and (hook in target.events or target.module):
            chosen.append(hook)
    return tuple(chosen)


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, placement: Placement) -> Report:
        return cls([f"{placement.target.name} ({placement.scope}): {placement.config_dir}"])

    def add(self, label: str, value: object) -> None:
        self.lines.append(f"  {label:<9}{value}")


def check_prompt_dir(data_dir: Path) -> None:
    """Refuse (InputError) a data dir whose ``prompt/`` cannot be made: a file where a directory must be, or a
    parent we may not write. Called before any host file is written: ``write_prompts`` runs after the hosts'
    installs, and a data dir that was a file once ended setup with a traceback and a half-done install."""
    probe = data_dir.absolute() / "prompt"
    try:
        while not probe.exists() and not probe.is_symlink():
            probe = probe.parent
        if not probe.is_dir():
            raise InputError(f"cannot use {data_dir} as the data directory: {probe} is not a directory")
        if probe != data_dir.absolute() / "prompt" and not os.access(probe, os.W_OK | os.X_OK):
            raise InputError(f"cannot use {data_dir} as the data directory: {probe} is not writable")
    except OSError as exc:  # a name too long for the file system, say
        raise InputError(f"cannot use {data_dir} as the data directory: {exc.strerror}") from None


def write_prompts(data_dir: Path) -> list[Path]:
    """Write ``<data-dir>/prompt/{guide.md,skill.md}``, the files hooks read at run time."""
    prompt_dir = data_dir.absolute() / "prompt"
    written = []
    try:
        prompt_dir.mkdir(parents=True, exist_ok=True)
        data_dir.absolute().chmod(0o700)
        for name in prompts.NAMES:
            path = prompt_dir / name
            files.write_text(path, prompts.text(name))
            written.append(path)
    except OSError as exc:
        raise InputError(f"cannot write the prompts in {prompt_dir}: {exc.strerror or exc}") from None
    return written


def write_skill(placement: Placement, created: list[str], text: str | None = None) -> Path:
    files.make_dirs(placement.skill_dir, created)
    path = placement.skill_dir / "SKILL.md"
    files.write_text(path, prompts.skill_file() if text is None else text)
    return path


def _registrar(target: Target) -> ModuleType:
    if target.registration == "kimi":
        from mnemon.setup import kimi_toml

        return kimi_toml
    if target.registration == "hermes":
        from mnemon.setup import hermes_yaml

        return hermes_yaml
    from mnemon.setup import settings

    return settings


def _host_module(target: Target) -> ModuleType:
    try:
        return importlib.import_module(target.module)
    except ModuleNotFoundError as exc:
        if exc.name != target.module:
            raise
        raise InputError(f'target "{target.name}" is not supported by this version of mnemon yet') from None


def available(target: Target) -> bool:
    """False for a plugin host whose module this build lacks (setup refuses it with a clear error)."""
    if not target.module:
        return True
    try:
        _host_module(target)
    except InputError:
        return False
    return True


def install(placement: Placement, options: Options) -> Report:
    """Install for one target; re-running replaces our own entries only (idempotent)."""
    return plan_install(placement, options)()


def plan_install(placement: Placement, options: Options) -> Step:
    """Every check of an install and its config edit, planned; nothing is written until the returned step
    runs. ``setup`` plans every chosen host before it runs the first step: a host refused after others were
    installed once left those installed and the prompts unwritten."""
    target = placement.target
    # Its paths go into text (hook scripts, host configs, the manifest): a directory name that is not UTF-8
    # (a project under /tmp/caf\xe9) once failed with a UnicodeEncodeError traceback, half the files written.
    check_text(str(placement.config_dir), f"the {target.display} config directory path")
    if target.module:
        return _host_module(target).plan_install(placement, options)
    hooks = [h for h in options.hooks if h in target.events] if placement.installs_hooks else []
    previous = read_manifest(placement.hook_dir) or {}
    created_dirs: list[str] = list(previous.get("created_dirs", []))
    manifest: dict[str, Any] = {k: v for k, v in previous.items() if k != "created_dirs"}
    scripts = {h: placement.hook_dir / target.files[h] for h in hooks}
    files.check_dirs(placement.skill_dir, *([placement.hook_dir, placement.settings_path.parent]
                                            if placement.installs_hooks else []))
    new_config = None
    if placement.installs_hooks and target.registration:  # validate (and plan) before writing anything
        files.check_writable(placement.settings_path)
        new_config = _registrar(target).plan_install(target, placement.settings_path, placement.hook_dir, scripts,
                                                     manifest)
    return lambda: _write_install(placement, options, scripts, manifest, created_dirs, new_config)


def _write_install(placement: Placement, options: Options, scripts: dict[str, Path], manifest: dict[str, Any],
                   created_dirs: list[str], new_config: str | None) -> Report:
    target = placement.target
    report = Report.start(placement)
    report.add("skill", write_skill(placement, created_dirs))
    if not placement.installs_hooks:
        if target.global_hooks_only:
            report.lines.append(f"  {target.display} currently ignores project-level hooks; use '--global' "
                                "to install lifecycle hooks")
        return report
    files.make_dirs(placement.hook_dir, created_dirs)
    for stale in placement.hook_dir.iterdir():  # a hook switched off since the last run
        if stale.is_file() and stale.name != MANIFEST and stale not in scripts.values():
            stale.unlink()
    hook_scripts.write_scripts(placement, scripts, options.data_dir, recall=options.recall(target))
    if new_config is not None:
        files.make_dirs(placement.settings_path.parent, created_dirs)  # ZCode's cli/
    manifest["created_dirs"] = sorted(set(created_dirs), key=created_dirs.index)
    manifest["target"] = target.name
    manifest["recall_on_prompt"] = options.recall(target)
    write_manifest(placement.hook_dir, manifest)  # first: a failed config write still ejects cleanly
    if new_config is not None and files.read_config(placement.settings_path) != new_config:  # hosts watch it
        files.write_text(placement.settings_path, new_config, mode=_config_mode(target))
    for hook, script in scripts.items():
        report.add(hook, f"{script}  ({target.events[hook]})")
    if "remind" in scripts:
        report.add("recall", "on each prompt" if options.recall(target) else "off (--recall-on-prompt turns it on)")
    if new_config is not None:
        report.add("config", placement.settings_path)
    if target.name == "hermes":
        report.lines.append("  Hermes may prompt once to approve the installed shell hooks.")
    elif target.name == "qoderwork":
        report.lines.append("  Restart QoderWork to load the hooks.")
    return report


def _config_mode(target: Target) -> int:
    # Hermes' config.yaml holds API keys: a new one is private, as the Go program writes it.
    return files.PRIVATE_MODE if target.registration == "hermes" else files.CONFIG_MODE


def strip_markdown(path: Path) -> bool:
    """Remove the ``<!-- mnemon:start --> … <!-- mnemon:end -->`` block (Go's ejectMarkdown); delete the file
    when nothing else is left."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    start, end = text.find(BLOCK_START), text.find(BLOCK_END)
    if start < 0 or end < start:
        return False
    before, after = text[:start].rstrip("\n"), text[end + len(BLOCK_END):].lstrip("\n")
    rest = before + ("\n" + after if after.strip() else "\n") if before.strip() else after
    if rest.strip():
        files.write_text(path, rest)
    else:
        path.unlink()
    return True


def eject(placement: Placement, options: Options) -> Report:
    """Remove our skill, hook scripts and config entries for one target, and nothing else."""
    return plan_eject(placement, options)()


def plan_eject(placement: Placement, options: Options) -> Step:
    """Every check of an eject and its config edit, planned; the returned step removes (see plan_install)."""
    target = placement.target
    markdown = placement.markdown_path
    if markdown is not None and _has_block(markdown):
        # Before anything is removed: a read-only AGENTS.md once failed eject at its last step, the host's
        # files already gone, no report printed, and the hosts after it in the run never ejected.
        files.check_writable(markdown)
    if target.module:
        return _host_module(target).plan_eject(placement, options)
    manifest = read_manifest(placement.hook_dir)
    original: bytes | None = None
    cleaned: str | None = None
    if target.has_hooks and target.registration and placement.settings_path.exists():
        files.check_writable(placement.settings_path)  # before anything is removed
        original = (files.read_config(placement.settings_path) or "").encode("utf-8")  # a directory: InputError
        cleaned = _registrar(target).plan_eject(target, placement.settings_path, placement.hook_dir, manifest)
    return lambda: _write_eject(placement, options, manifest, original, cleaned)


def _write_eject(placement: Placement, options: Options, manifest: dict[str, Any] | None, original: bytes | None,
                 cleaned: str | None) -> Report:
    target = placement.target
    report = Report.start(placement)
    if original is not None:  # the config was there and planned
        if cleaned is None:
            files.remove_file(placement.settings_path)
            report.add("removed", placement.settings_path)
        elif cleaned.encode("utf-8") != original:
            files.write_text(placement.settings_path, cleaned)
            report.add("cleaned", placement.settings_path)
    state = [placement.config_dir / _HOOK_STATE_DIRS[target.name]] if target.name in _HOOK_STATE_DIRS else []
    for owned in (placement.skill_dir, placement.hook_dir, *state):
        if files.remove_tree(owned):
            report.add("removed", owned)
    if manifest is not None:
        created = [Path(p) for p in manifest.get("created_dirs", [])]
    else:  # no record: only our own parents may go, and only when empty
        created = [placement.config_dir / "skills", placement.hook_dir.parent]
        if target.settings_file and placement.settings_path.parent != placement.config_dir:
            created.append(placement.settings_path.parent)  # ZCode's cli/
        if target.name in _EJECT_REMOVES_EMPTY_CONFIG or not placement.installs_hooks:
            created.append(placement.config_dir)
    files.remove_if_empty(*sorted(created, key=lambda p: len(p.parts), reverse=True))
    markdown = placement.markdown_path
    if markdown is not None and _has_block(markdown) and options.markdown(markdown) and strip_markdown(markdown):
        report.add("cleaned", markdown)
    if len(report.lines) == 1:
        report.lines.append("  nothing to remove")
    return report


def _has_block(path: Path) -> bool:
    try:
        return BLOCK_START in path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


@dataclass(frozen=True)
class Detection:
    """What the probe found for one host (setup-targets.md §0)."""

    target: Target
    detected: bool
    version: str
    installed: bool
    config_dir: Path

    def line(self) -> str:
        state = "detected" if self.detected else "not found"
        if self.detected and self.version:
            state += f" ({self.version})"
        if self.installed:
            state += ", mnemon installed"
        return f"  {self.target.name:<14}{self.target.display:<16}{state}"


# A terminal escape sequence (CSI "ESC [ ... letter", OSC "ESC ] ... BEL or ESC \\", or any other ESC pair): a host
# that colours its --version output even into a pipe would otherwise colour (or retitle) our host list.
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|.)", re.DOTALL)
VERSION_MAX_CHARS = 80  # a host's version line, as shown in the list


def _version(executable: str) -> str:
    """The first line of ``<exe> --version`` up to " (", as plain text: escape sequences and other control
    characters out, bytes that are no UTF-8 replaced (a traceback once), at most VERSION_MAX_CHARS."""
    try:
        raw = subprocess.run([executable, "--version"], capture_output=True, timeout=VERSION_TIMEOUT_SECONDS,
                             stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    out = _ESCAPE.sub("", raw.decode("utf-8", errors="replace"))
    first = next((line.strip() for line in out.splitlines() if line.strip()), "")
    first = "".join(ch for ch in first if ch.isprintable())
    return first.split(" (")[0].strip()[:VERSION_MAX_CHARS]


def installed(placement: Placement) -> bool:
    target = placement.target
    if target.module:
        try:
            module = _host_module(target)
        except InputError:
            module = None
        if module is not None and hasattr(module, "installed"):
            return bool(module.installed(placement))
    if (placement.skill_dir / "SKILL.md").is_file():
        return True
    if target.settings_file:
        try:
            return "mnemon" in placement.settings_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
    return False


def detect(home: Path, project: Path, env: Mapping[str, str], *, is_global: bool = False,
           search_path: str | None = None) -> list[Detection]:
    """Every host, in the Go program's order: detected when its executable is on PATH or its global config
    dir (or a legacy one) exists; the version is ``<exe> --version`` up to " (" when it runs."""
    found = []
    for target in TARGETS.values():
        exe = next((p for p in (shutil.which(e, path=search_path) for e in target.probe) if p), None)
        global_dir = target.global_config_dir(home, env)
        dirs = [global_dir, *(home / d for d in target.probe_dirs)]
        detected = exe is not None or any(d.is_dir() for d in dirs)
        placement = place(target, is_global=is_global, home=home, project=project, env=env)
        found.append(Detection(target, detected, _version(exe) if exe else "", installed(placement),
                               placement.config_dir))
    return found
