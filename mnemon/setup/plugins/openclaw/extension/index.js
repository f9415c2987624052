// mnemon plugin for OpenClaw. Written by `mnemon setup --target openclaw`; `mnemon setup --target
// openclaw --eject` removes it. Edits are overwritten by setup.
//
// OpenClaw calls register(api) in-process. The before_prompt_build handler returns
// {prependContext}: the memories recalled for the prompt (when recall on prompt is on), the recall
// reminder, the remember nudge and, after a compaction, a recheck notice. Its switches come from
// plugins.entries.mnemon.config in openclaw.json (api.pluginConfig), which setup writes from the
// chosen hooks; a key missing there falls back to the same choice recorded in CONFIG.
/*@MNEMON_RUNTIME@*/

export async function beforePromptBuild(event, options) {
  try {
    const parts = [];
    if (takeCompactFlag()) parts.push(MNEMON_TEXT.compaction);
    if (options.remind) {
      const memories = await recallContext(event && event.prompt);
      if (memories) parts.push(memories);
      parts.push(MNEMON_TEXT.remind);
    }
    if (options.nudge) parts.push(MNEMON_TEXT.nudge);
    return parts.length ? { prependContext: parts.join("\n\n") } : undefined;
  } catch {
    return undefined; // fail open: the prompt goes on without mnemon
  }
}

export default function register(api) {
  const config = (api && api.pluginConfig) || {};
  const pick = (key) => (typeof config[key] === "boolean" ? config[key] : Boolean(MNEMON.hooks[key]));
  const options = { remind: pick("remind"), nudge: pick("nudge"), compact: pick("compact") };
  if (options.compact) api.on("before_compaction", async () => setCompactFlag());
  api.on("before_prompt_build", async (event) => beforePromptBuild(event, options));
  api.on("agent_end", async () => undefined); // declared in openclaw.plugin.json; nothing to do
}
