// Time recall on prompt inside the installed plugins, the way their hosts call them (see
// bench/plugin_recall.py, which installs the plugins and runs this). For each host: `runs` prompts,
// each a new message so no cache applies; wall milliseconds per handler call and the text injected
// by the last call. Prints one JSON object.
//   node plugin_recall.mjs <openclaw config dir> <opencode plugin> <pi extension|-> <jiti module|-> <runs> <prompt>
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [openclawDir, opencodePlugin, piExtension, jitiPath, runsArg, prompt] = process.argv.slice(2);
const runs = Number(runsArg);
const results = {};

async function timed(name, call) {
  const ms = [];
  let injected = "";
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    injected = await call(i);
    ms.push(performance.now() - started);
  }
  results[name] = { ms, injected };
}

const handlers = {};
const register = (await import(pathToFileURL(join(openclawDir, "extensions/mnemon/index.js")).href)).default;
register({ pluginConfig: { nudge: false }, on: (name, fn) => { handlers[name] = fn; } });
await timed("openclaw before_prompt_build", async () => {
  const result = await handlers.before_prompt_build({ prompt, messages: [] }, {});
  return result ? result.prependContext : "";
});

const hooks = await (await import(pathToFileURL(opencodePlugin).href)).default.server({});
await timed("opencode messages.transform", async (i) => {
  const output = { messages: [{ info: { id: `msg_${i}`, sessionID: "ses_bench", role: "user" }, parts: [{ type: "text", text: prompt }] }] };
  await hooks["experimental.chat.messages.transform"]({}, output);
  return output.messages[0].parts.length > 1 ? output.messages[0].parts[0].text : "";
});

if (piExtension !== "-" && jitiPath !== "-") {
  const { createJiti } = await import(pathToFileURL(jitiPath).href);
  const factory = await createJiti(import.meta.url, { moduleCache: false }).import(piExtension, { default: true });
  const pi = {};
  factory({ on: (name, fn) => { pi[name] = fn; } });
  const ctx = { ui: { notify() {}, setStatus() {} } };
  await pi.session_start({ type: "session_start", reason: "startup" }, ctx);
  await timed("pi before_agent_start", async () => {
    const result = await pi.before_agent_start({ type: "before_agent_start", prompt, systemPrompt: "", systemPromptOptions: {} }, ctx);
    return result ? result.systemPrompt.trim() : "";
  });
}
process.stdout.write(JSON.stringify(results) + "\n");
