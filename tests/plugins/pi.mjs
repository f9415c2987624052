// Drive the installed Pi extension the way Pi does: load extensions/mnemon.ts with jiti (Pi's loader,
// createJiti + import(default)), call the factory with an ExtensionAPI whose on() collects handlers,
// and emit events in Pi's order with Pi's event shapes and ctx.ui (Pi 0.83 needs Node 22, so its
// runner cannot run here; the event and result shapes are those of its extension types).
//   node pi.mjs <jiti module path> <extension file> <prompt> [no-system-prompt]
// (no-system-prompt: before_agent_start comes without its systemPrompt field, a malformed event)
import { pathToFileURL } from "node:url";

const [jitiPath, extensionFile, prompt, variant] = process.argv.slice(2);
const { createJiti } = await import(pathToFileURL(jitiPath).href);
const jiti = createJiti(import.meta.url, { moduleCache: false });
const factory = await jiti.import(extensionFile, { default: true });
const handlers = new Map();
await factory({ on: (name, fn) => handlers.set(name, [...(handlers.get(name) || []), fn]) });
const ui = [];
const ctx = { cwd: "/tmp", hasUI: true, ui: { notify: (message, type) => ui.push(["notify", message, type]), setStatus: (key, text) => ui.push(["setStatus", key, text]) } };
const emit = async (type, event = {}) => {
  let result;
  for (const handler of handlers.get(type) || []) result = (await handler({ type, ...event }, ctx)) ?? result;
  return result ?? null;
};

const discovered = await emit("resources_discover", { cwd: "/tmp", reason: "startup" });
await emit("session_start", { reason: "startup" });
let started = performance.now();
const startEvent = { prompt, images: [], systemPrompt: "BASE PROMPT", systemPromptOptions: {} };
if (variant === "no-system-prompt") delete startEvent.systemPrompt;
const beforeStart = await emit("before_agent_start", startEvent);
const promptMs = performance.now() - started;
const old = { role: "custom", customType: "mnemon", content: "stale mnemon note", display: false, timestamp: 1 };
const user = { role: "user", content: [{ type: "text", text: prompt }], timestamp: 2 };
const context = await emit("context", { messages: [old, user] });
await emit("session_compact", { compactionEntry: {}, fromExtension: false, reason: "manual", willRetry: false });
const afterCompact = await emit("context", { messages: [user] });
const nextContext = await emit("context", { messages: [user] });
await emit("agent_end", { messages: [] });

process.stdout.write(JSON.stringify({
  events: [...handlers.keys()].sort(),
  discovered,
  beforeStart,
  context,
  afterCompact,
  nextContext,
  ui,
  promptMs,
}) + "\n");
