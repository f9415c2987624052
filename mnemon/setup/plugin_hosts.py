"""Steps shared by the hosts that run mnemon in-process (``hosts/openclaw.py``, ``opencode.py``, ``pi.py``).

They load our own plugin code instead of shell hooks, so each writes its files into the host's
directories, maybe registers them in a JSON config, and on eject removes the same files the Go
program's eject removes. What setup had to create (directories, the config file, container keys)
is recorded in a manifest inside ``skills/mnemon/``, which both programs' ejects delete: with it,
eject leaves an existing config byte for byte as it was and removes one that setup created;
without it (an install by the Go program) eject follows the Go program. Config edits are text
splices (``jsonc.Document``): the user's comments, layout and foreign entries stay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mnemon.errors import InputError
from mnemon.setup import Options, Placement, Report, Step, files, jsonc, read_manifest, strip_markdown, write_manifest


class Install:
    """One install run: the previous manifest, the directories created so far, the report. ``dirs``: the other
    directories it writes into."""

    def __init__(self, placement: Placement, *dirs: Path) -> None:
        files.check_dirs(placement.skill_dir, *dirs)  # before anything is written
        self.placement = placement
        self.previous: dict[str, Any] = read_manifest(placement.skill_dir) or {}
        self.created: list[str] = list(self.previous.get("created_dirs", []))
        self.report = Report.start(placement)

    def write(self, path: Path, text: str, *, mode: int = files.CONFIG_MODE) -> None:
        files.make_dirs(path.parent, self.created)
        files.write_text(path, text, mode=mode)

    def note_recall(self, recall: bool) -> None:
        self.report.add("recall", "on each prompt" if recall else "off (--recall-on-prompt turns it on)")

    def finish(self, **record: Any) -> Report:
        manifest = {"target": self.placement.target.name,
                    "created_dirs": sorted(set(self.created), key=self.created.index), **record}
        write_manifest(self.placement.skill_dir, manifest)
        return self.report


def missing_objects(doc: jsonc.Document, path: Sequence[str], config: Path) -> list[str]:
    """The dotted prefixes of ``path`` (its parents) that setting ``path`` will create; refuses a
    prefix that exists but is not an object, before anything is written."""
    missing = []
    for depth in range(1, len(path)):
        node = doc.node(path[:depth])
        if node is None:
            missing.append(".".join(path[:depth]))
        elif node.kind != "object":
            raise InputError(f'"{".".join(path[:depth])}" in {config} is not an object; fix it, then run '
                                   "setup again")
    return missing


def empty_text(run: Install, doc: jsonc.Document, config: Path) -> dict[str, str]:
    """The manifest entry that lets eject give back a config that existed but held no value (empty, blank or
    only comments): eject once left "{}" in it. Noted by the first install only."""
    if "empty_text" in run.previous:
        return {"empty_text": run.previous["empty_text"]}
    return {"empty_text": doc.text} if doc.root is None and config.exists() else {}


def drop_created(doc: jsonc.Document, created: Sequence[str]) -> None:
    """Delete, deepest first, the containers setup created that are empty again."""
    for dotted in sorted(created, key=lambda k: k.count("."), reverse=True):
        path = dotted.split(".")
        if doc.get(path, None) in ({}, []):
            doc.delete(path)


def plan_unregister(config: Path, manifest: dict[str, Any] | None, *, json5: bool = False,
                    strip: Callable[[jsonc.Document, dict[str, Any] | None], None],
                    go_removes_empty: bool) -> Callable[[Report], None]:
    """Plan taking our entries out of a host config with ``strip``: the returned step makes the change. A config
    that does not parse is left alone (as the Go program does). A config setup created (or, without a
    manifest, one that Go's WriteOrRemove would delete) goes when nothing is left in it. A config to rewrite
    that nobody may write is refused here, before any host's eject removed anything."""
    try:
        doc = jsonc.read(config, json5=json5)
    except InputError:
        return _unchanged
    if doc is None:
        return _unchanged
    before = doc.text
    strip(doc, manifest)
    if doc.text == before:
        return _unchanged
    files.check_writable(config)  # a frozen config is neither rewritten nor removed (as the hook hosts' eject)
    if manifest is not None and isinstance(manifest.get("empty_text"), str) and doc.value in ({}, None):
        return _rewrite(config, manifest["empty_text"])  # it was empty (or only comments) before setup
    created_file = manifest.get("created_file", False) if manifest is not None else go_removes_empty
    if created_file and doc.value in ({}, None):
        def remove(report: Report) -> None:
            files.remove_file(config)
            report.add("removed", config)

        return remove
    return _rewrite(config, doc.text)


def _unchanged(report: Report) -> None:
    pass


def _rewrite(config: Path, text: str) -> Callable[[Report], None]:
    def write(report: Report) -> None:
        files.write_text(config, text)
        report.add("cleaned", config)

    return write


def eject_step(placement: Placement, options: Options, owned: Sequence[str], go_parents: Sequence[str],
               manifest: dict[str, Any] | None, unregister: Callable[[Report], None] = _unchanged) -> Step:
    """A plugin host's eject once planned: its config's registration (``plan_unregister``), the files it owns,
    the directories setup created (``manifest``, read with the plan) once empty, then AGENTS.md's block."""
    def remove() -> Report:
        report = Report.start(placement)
        unregister(report)
        remove_owned(placement, owned, report)
        remove_empty_dirs(placement, manifest, go_parents)
        return eject_markdown(placement, options, report)

    return remove


def remove_owned(placement: Placement, owned: Sequence[str], report: Report) -> None:
    for rel in owned:
        path = placement.config_dir / rel
        if files.remove_tree(path):
            report.add("removed", path)


def remove_empty_dirs(placement: Placement, manifest: dict[str, Any] | None, go_parents: Sequence[str]) -> None:
    """Directories setup created, once empty; without a manifest the parents the Go eject tries and the
    config dir (Go's removeIfEmpty)."""
    if manifest is not None:
        dirs = [Path(p) for p in manifest.get("created_dirs", [])]
    else:
        dirs = [placement.config_dir / p for p in go_parents] + [placement.config_dir]
    files.remove_if_empty(*sorted(dirs, key=lambda p: len(p.parts), reverse=True))


def eject_markdown(placement: Placement, options: Options, report: Report) -> Report:
    """Go's ejectMarkdown on AGENTS.md (asked first), then the report."""
    markdown = placement.markdown_path
    if markdown is not None and markdown.is_file():
        text = markdown.read_text(encoding="utf-8", errors="replace")
        if "<!-- mnemon:start -->" in text and options.markdown(markdown) and strip_markdown(markdown):
            report.add("cleaned", markdown)
    if len(report.lines) == 1:
        report.lines.append("  nothing to remove")
    return report
