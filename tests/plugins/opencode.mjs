// Drive the installed OpenCode plugin the way OpenCode does: import plugins/mnemon.js, call the
// default export's server(input) for the hooks, then fire them with OpenCode-shaped inputs/outputs
// (@opencode-ai/plugin Hooks). Prints one JSON object.
//   node opencode.mjs <plugin file> <prompt>
import { pathToFileURL } from "node:url";

const [pluginFile, prompt] = process.argv.slice(2);
const plugin = (await import(pathToFileURL(pluginFile).href)).default;
const logs = [];
const client = { app: { log: async (options) => { logs.push(options); return true; } } };
const hooks = await plugin.server({ client, directory: "/tmp", worktree: "/tmp" });

const env = { env: { PATH: "/usr/bin" } };
await hooks["shell.env"]({ cwd: "/tmp", sessionID: "ses_1" }, env);

const text = (id, messageID, body) => ({ id, sessionID: "ses_1", messageID, type: "text", text: body });
const conversation = () => ({
  messages: [
    { info: { id: "msg_1", sessionID: "ses_1", role: "user" }, parts: [text("prt_1", "msg_1", "hello")] },
    { info: { id: "msg_2", sessionID: "ses_1", role: "assistant" }, parts: [text("prt_2", "msg_2", "hi, how can I help?")] },
    { info: { id: "msg_3", sessionID: "ses_1", role: "user" }, parts: [text("prt_3", "msg_3", prompt)] },
  ],
});
const first = conversation();
let started = performance.now();
await hooks["experimental.chat.messages.transform"]({}, first);
const transformMs = performance.now() - started;
const again = conversation(); // the agent's next model call in the same turn: served from the cache
started = performance.now();
await hooks["experimental.chat.messages.transform"]({}, again);
const cachedMs = performance.now() - started;
const marked = conversation();
marked.messages[2].parts.unshift(text("prt_0", "msg_3", "<mnemon_context>\nalready here\n</mnemon_context>"));
const markedBefore = JSON.stringify(marked);
await hooks["experimental.chat.messages.transform"]({}, marked);

const compacting = { context: [] };
await hooks["experimental.session.compacting"]({ sessionID: "ses_1" }, compacting);
await hooks.event({ event: { type: "session.idle", properties: { sessionID: "ses_1" } } });
await hooks.event({ event: { type: "message.updated", properties: {} } });
await hooks.dispose();

const registered = [];
await plugin.setup({
  shell: { hook: (name, fn) => registered.push(["shell", name, typeof fn]) },
  session: { hook: (name, fn) => registered.push(["session", name, typeof fn]) },
});
await plugin.setup({}); // an OpenCode without these domains: nothing registered, nothing thrown

process.stdout.write(JSON.stringify({
  id: plugin.id,
  exports: Object.keys(plugin).sort(),
  hooks: Object.keys(hooks).sort(),
  env: env.env,
  latestUser: first.messages[2].parts,
  others: [first.messages[0].parts, first.messages[1].parts],
  cachedSame: JSON.stringify(again) === JSON.stringify(first),
  markedUnchanged: JSON.stringify(marked) === markedBefore,
  compacting: compacting.context,
  logs,
  registered,
  transformMs,
  cachedMs,
}) + "\n");
