// Drive the installed OpenClaw hook and plugin the way the OpenClaw gateway does: import the modules
// in-process, call the hook's default handler with agent events and register(api) with a plugin API,
// then fire the registered handlers. Prints one JSON object; nothing else goes to stdout.
//   node openclaw.mjs <config dir> <prompt> [pluginConfig JSON]
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [configDir, prompt, pluginConfig = "{}"] = process.argv.slice(2);
const load = async (path) => (await import(pathToFileURL(join(configDir, path)).href)).default;

const prime = await load("hooks/mnemon-prime/handler.js");
const foreign = { name: "AGENTS.md", path: "AGENTS.md", content: "project rules", missing: false };
const bootstrap = {
  type: "agent", action: "bootstrap", sessionKey: "agent:main:main", timestamp: new Date(), messages: [],
  context: { workspaceDir: "/tmp", bootstrapFiles: [foreign], agentId: "main" },
};
let started = performance.now();
await prime(bootstrap);
const primeMs = performance.now() - started;
await prime(bootstrap); // a second bootstrap of the same context must not add a second guide
const other = { type: "command", action: "new", context: { bootstrapFiles: [] } };
await prime(other);

const handlers = {};
const register = await load("extensions/mnemon/index.js");
register({ id: "mnemon", pluginConfig: JSON.parse(pluginConfig), on: (name, fn) => { handlers[name] = fn; } });
const promptEvent = { prompt, messages: [{ role: "user", content: prompt }] };
const hookCtx = { agentId: "main", sessionKey: "agent:main:main" };
started = performance.now();
const first = await handlers.before_prompt_build(promptEvent, hookCtx);
const promptMs = performance.now() - started;
let afterCompaction = null;
if (handlers.before_compaction) {
  await handlers.before_compaction({ messageCount: 12 }, hookCtx);
  afterCompaction = await handlers.before_prompt_build(promptEvent, hookCtx);
}
const agentEnd = await handlers.agent_end({ messages: [], success: true }, hookCtx);
process.stdout.write(JSON.stringify({
  bootstrapFiles: bootstrap.context.bootstrapFiles,
  otherEventFiles: other.context.bootstrapFiles,
  hooks: Object.keys(handlers).sort(),
  beforePromptBuild: first ?? null,
  afterCompaction: afterCompaction ?? null,
  agentEnd: agentEnd ?? null,
  primeMs,
  promptMs,
}) + "\n");
