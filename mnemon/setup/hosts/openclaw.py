"""OpenClaw (setup-targets §1): a managed hook that primes the agent, a plugin for each prompt.

``hooks/mnemon-prime/{HOOK.md,handler.js}`` pushes the guide, headed by the store's status line,
into the bootstrap files on ``agent:bootstrap``; ``extensions/mnemon/`` (package.json,
openclaw.plugin.json, index.js) returns ``{prependContext}`` before each prompt: recalled memories
(recall on prompt, on by default as in the Go plugin), the recall reminder, the remember nudge. It
is enabled in ``openclaw.json`` as ``plugins.entries.mnemon = {enabled, hooks:
{allowConversationAccess}, config: {remind, nudge, compact}}``. OpenClaw's config is JSON5-like: we read it tolerantly and edit it as text (the Go
program's strict parse refuses a commented file); a new file is private (0600), since OpenClaw keeps
credentials there, and an existing one keeps its mode.
"""

from __future__ import annotations

from pathlib import Path

from mnemon.setup import Options, Placement, Report, Step, files, jsonc, read_manifest, write_skill
from mnemon.setup.plugin_files import PluginConfig, asset, openclaw_manifest, render_code
from mnemon.setup.plugin_hosts import (Install, drop_created, eject_step, empty_text, missing_objects,
                                       plan_unregister)

ENTRY = ["plugins", "entries", "mnemon"]
OWNED = ("skills/mnemon", "hooks/mnemon-prime", "extensions/mnemon")
GO_PARENTS = ("skills", "hooks", "extensions")
SWITCHES = ("remind", "nudge", "compact")


def _config_path(placement: Placement) -> Path:
    return placement.config_dir / "openclaw.json"


def plan_install(placement: Placement, options: Options) -> Step:
    config_path = _config_path(placement)
    doc = jsonc.read(config_path, json5=True) or jsonc.Document("", json5=True)  # refuses a broken file first
    missing = missing_objects(doc, ENTRY, config_path)
    files.check_writable(config_path)
    hook_dir, plugin_dir = placement.config_dir / "hooks" / "mnemon-prime", placement.config_dir / "extensions" / "mnemon"
    run = Install(placement, hook_dir, plugin_dir)
    before = empty_text(run, doc, config_path)
    plugin = PluginConfig(options.data_dir, options.hooks, options.recall(placement.target))
    hook_files = {"HOOK.md": asset("openclaw/hook/HOOK.md"),
                  "handler.js": render_code("openclaw/hook/handler.js", plugin)}
    plugin_files = {"package.json": asset("openclaw/extension/package.json"),
                    "openclaw.plugin.json": openclaw_manifest(options.version),
                    "index.js": render_code("openclaw/extension/index.js", plugin)}
    # OpenClaw (docs/plugins/hooks.md, 2026.9) runs a non-bundled plugin's before_prompt_build and agent_end
    # only with hooks.allowConversationAccess; the Go program's entry lacks it, so its plugin stays silent.
    doc.set(ENTRY, {"enabled": True, "hooks": {"allowConversationAccess": True},
                    "config": {s: s in options.hooks for s in SWITCHES}})
    created_file = run.previous.get("created_file", not config_path.exists())
    created_keys = sorted(set(run.previous.get("created_keys", [])) | set(missing))

    def write() -> Report:
        run.report.add("skill", write_skill(placement, run.created))
        for name, text in hook_files.items():
            run.write(hook_dir / name, text)
        run.report.add("hook", f"{hook_dir}  (agent:bootstrap)")
        for name, text in plugin_files.items():
            run.write(plugin_dir / name, text)
        run.report.add("plugin", f"{plugin_dir}  (before_prompt_build)")
        run.write(config_path, doc.text, mode=files.PRIVATE_MODE)
        run.note_recall(plugin.recall_on_prompt)
        run.report.add("config", config_path)
        run.report.lines.append("  Restart the OpenClaw gateway to activate.")
        return run.finish(created_file=created_file, created_keys=created_keys, **before)

    return write


def _strip(doc: jsonc.Document, manifest: dict | None) -> None:
    if doc.node(ENTRY) is None:
        return
    doc.delete(ENTRY)
    # Containers we created go once empty; without a manifest they stay, as after the Go eject.
    drop_created(doc, (manifest or {}).get("created_keys", []))


def plan_eject(placement: Placement, options: Options) -> Step:
    manifest = read_manifest(placement.skill_dir)
    # The Go eject rewrites openclaw.json even when emptied; only a file we created goes.
    unregister = plan_unregister(_config_path(placement), manifest, json5=True, strip=_strip, go_removes_empty=False)
    return eject_step(placement, options, OWNED, GO_PARENTS, manifest, unregister)
