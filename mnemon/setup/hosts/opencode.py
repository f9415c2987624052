"""OpenCode (setup-targets §12): ``plugins/mnemon.js`` and our guide in ``opencode.json``'s instructions.

The plugin (OpenCode loads ``plugins/*.js`` in-process) adds a ``<mnemon_context>`` part to the
latest user message before each model call: status line, memories recalled for the message
(recall on prompt, on by default as in the Go plugin) and a write reminder. ``opencode.json`` gets
``$schema`` when it has none and, in ``instructions``, the absolute path of ``<data-dir>/prompt/
guide.md`` in place of any earlier mnemon guide. A local install's config is the project's
``opencode.json`` beside ``.opencode/``, as in Go; ``$OPENCODE_CONFIG_DIR`` moves the global dir
(resolved by the registry). Updating mnemon does not refresh an installed plugin: rerun setup.
"""

from __future__ import annotations

from pathlib import Path

from mnemon.errors import InputError
from mnemon.setup import Options, Placement, Report, Step, files, jsonc, read_manifest, write_skill
from mnemon.setup.plugin_files import PluginConfig, render_code
from mnemon.setup.plugin_hosts import Install, drop_created, eject_step, empty_text, plan_unregister

SCHEMA = "https://opencode.ai/config.json"
# Instruction paths an earlier setup (ours or the Go program's) registered.
GUIDE_MARKS = ("mnemon/prompt/guide.md", ".mnemon/prompt/guide.md")
OWNED = ("skills/mnemon", "plugins/mnemon.js")
GO_PARENTS = ("skills", "plugins")


def config_path(placement: Placement) -> Path:
    """``OpenCodeConfigPath``: the parent's opencode.json for a ``.opencode`` dir, else the dir's own."""
    if placement.config_dir.name == ".opencode":
        return placement.config_dir.parent / "opencode.json"
    return placement.config_dir / "opencode.json"


def _guide_test(data_dir: Path, manifest: dict | None = None):
    """Matches our guide path for this data dir, the one our last install registered (the manifest's
    ``guide``: a data dir moved by --data-dir or MNEMON_DATA_DIR once left the old path registered beside the
    new one, since a path like /srv/agent-data/prompt/guide.md carries none of the marks), and any guide path
    an earlier setup registered (the Go program's test is only the ``mnemon/prompt/guide.md`` substring)."""
    ours = {str(data_dir.absolute() / "prompt" / "guide.md")}
    recorded = (manifest or {}).get("guide")
    if isinstance(recorded, str):
        ours.add(recorded)

    def is_guide(item: object) -> bool:
        return isinstance(item, str) and (item in ours or any(m in item.replace("\\", "/") for m in GUIDE_MARKS))

    return is_guide


def plan_install(placement: Placement, options: Options) -> Step:
    path = config_path(placement)
    doc = jsonc.read(path) or jsonc.Document("")  # refuses a broken file before anything is written
    instructions = doc.node(["instructions"])
    if instructions is not None and instructions.kind != "array":
        raise InputError(f'"instructions" in {path} is not a list; fix it, then run setup again')
    files.check_writable(path)
    run = Install(placement, placement.config_dir / "plugins", path.parent)
    created_keys = set(run.previous.get("created_keys", []))
    created_file = run.previous.get("created_file", not path.exists())
    before = empty_text(run, doc, path)
    recall = options.recall(placement.target)
    plugin = placement.config_dir / "plugins" / "mnemon.js"
    code = render_code("opencode/mnemon.js", PluginConfig(options.data_dir, recall_on_prompt=recall))
    if doc.node(["$schema"]) is None:
        doc.set(["$schema"], SCHEMA)
        created_keys.add("$schema")
    guide = str(options.data_dir.absolute() / "prompt" / "guide.md")
    if instructions is None:
        doc.set(["instructions"], [guide])
        created_keys.add("instructions")
    else:
        # Stale guides go; ours stays where it is (re-running with the same data dir changes no byte, even
        # when the user's own instructions follow it), or is appended.
        is_guide = _guide_test(options.data_dir, run.previous)
        doc.remove_items(["instructions"], lambda item: is_guide(item) and item != guide)
        if guide not in (doc.get(["instructions"]) or []):
            doc.append(["instructions"], guide)

    def write() -> Report:
        run.report.add("skill", write_skill(placement, run.created))
        run.write(plugin, code)
        run.report.add("plugin", plugin)
        run.write(path, doc.text)
        run.note_recall(recall)
        run.report.add("config", path)
        return run.finish(created_file=created_file, created_keys=sorted(created_keys), guide=guide, **before)

    return write


def _strip(doc: jsonc.Document, manifest: dict | None, data_dir: Path) -> None:
    if not doc.remove_items(["instructions"], _guide_test(data_dir, manifest)):
        return
    if manifest is not None:
        # What setup added goes (the $schema too, while it is still the one we wrote): byte-for-byte restore.
        drop_created(doc, [k for k in manifest.get("created_keys", []) if k != "$schema"])
        if "$schema" in manifest.get("created_keys", []) and doc.get(["$schema"]) == SCHEMA:
            doc.delete(["$schema"])
        return
    # The Go eject: an emptied list goes, and a default $schema left alone goes too.
    if doc.get(["instructions"]) == []:
        doc.delete(["instructions"])
    if doc.value == {"$schema": SCHEMA}:
        doc.delete(["$schema"])


def plan_eject(placement: Placement, options: Options) -> Step:
    manifest = read_manifest(placement.skill_dir)
    unregister = plan_unregister(config_path(placement), manifest, go_removes_empty=True,
                                 strip=lambda doc, record: _strip(doc, record, options.data_dir))
    return eject_step(placement, options, OWNED, GO_PARENTS, manifest, unregister)


def installed(placement: Placement) -> bool:
    """As the Go probe: the skill, the plugin, or "mnemon" in opencode.json."""
    if (placement.skill_dir / "SKILL.md").is_file() or (placement.config_dir / "plugins" / "mnemon.js").is_file():
        return True
    try:
        return "mnemon" in config_path(placement).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
