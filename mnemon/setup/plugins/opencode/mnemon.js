// mnemon plugin for OpenCode. Written by `mnemon setup --target opencode`; `mnemon setup --target
// opencode --eject` removes it. Updating mnemon does not refresh this file: rerun setup.
//
// OpenCode loads plugins/*.js in-process. Before each model call the latest user message gets a
// <mnemon_context> part: the store's status line, the memories recalled for the message (recall on
// prompt) and a one-line write reminder. The block is built once per user message and cached per
// session (at most 128 sessions), so the agent's tool loop does not rerun mnemon.
/*@MNEMON_RUNTIME@*/

const MARKER = "<mnemon_context>";
const MAX_SESSIONS = 128;
const PART_CAP = 4000; // characters kept of each piece of mnemon output
const QUERY_CAP = 8000; // characters of the message considered before recall bounds the query
const WRITE_REMINDER =
  "[mnemon] When this exchange produces a durable decision, preference, fact or lesson, store it with `mnemon remember` (never secrets).";
const COMPACTION_GUIDANCE = [
  "## Mnemon Memory",
  "This session uses mnemon for persistent memory. In the summary, keep the ids of insights that were recalled or",
  "stored, and list decisions, preferences and facts that were agreed but not yet stored with `mnemon remember`,",
  "so they can be stored after compaction. After compaction, `mnemon recall \"<topic>\"` brings back what was stored.",
].join("\n");

function cap(text, limit) {
  return text.length > limit ? text.slice(0, limit) : text;
}

function latestUserMessage(messages) {
  if (!Array.isArray(messages)) return undefined;
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (message && message.info && message.info.role === "user" && Array.isArray(message.parts)) return message;
  }
  return undefined;
}

function userText(parts) {
  const texts = parts.filter((part) => part && part.type === "text" && !part.synthetic && typeof part.text === "string");
  return cap(texts.map((part) => part.text).join("\n"), QUERY_CAP);
}

function createHooks(client) {
  const sessions = new Map(); // sessionID → { status: Promise<string>, key, block }; oldest first

  function sessionState(id) {
    let state = sessions.get(id);
    if (state) sessions.delete(id); // re-inserted below: most recently used last
    else state = { status: undefined, key: undefined, block: undefined };
    sessions.set(id, state);
    while (sessions.size > MAX_SESSIONS) sessions.delete(sessions.keys().next().value);
    return state;
  }

  async function contextBlock(sessionID, messageID, query) {
    const state = sessionState(sessionID);
    const key = `${messageID}\u0000${query}`;
    if (state.key === key) return state.block;
    // The prompt waits for this: status (once per session) and recall run side by side, each
    // within the recall budget, so the whole block costs at most one budget.
    if (!state.status) state.status = statusLine(recallSettings().budgetMs);
    const [status, memories] = await Promise.all([state.status, recallContext(query)]);
    if (!status) state.status = undefined; // a failed status is retried with the next message
    const pieces = [status, memories, WRITE_REMINDER].filter(Boolean).map((piece) => cap(piece, PART_CAP));
    const block = `${MARKER}\n${pieces.join("\n\n")}\n</mnemon_context>`;
    Object.assign(state, { key, block });
    return block;
  }

  return {
    "shell.env": async (_input, output) => {
      try {
        if (output && output.env) output.env.MNEMON_OPENCODE = "1";
      } catch {
        // fail open
      }
    },
    "experimental.chat.messages.transform": async (_input, output) => {
      try {
        const message = latestUserMessage(output && output.messages);
        if (!message) return;
        if (message.parts.some((part) => part && typeof part.text === "string" && part.text.includes(MARKER))) return;
        const { id, sessionID } = message.info;
        const block = await contextBlock(sessionID, id, userText(message.parts));
        message.parts.unshift({ id: `prt_mnemon_${id}`, sessionID, messageID: id, type: "text", text: block, synthetic: true });
      } catch {
        // fail open: the message goes to the model unchanged
      }
    },
    "experimental.session.compacting": async (_input, output) => {
      try {
        if (output && Array.isArray(output.context)) output.context.push(COMPACTION_GUIDANCE);
      } catch {
        // fail open
      }
    },
    event: async ({ event } = {}) => {
      try {
        if (!event || event.type !== "session.idle") return;
        const id = event.properties && event.properties.sessionID;
        if (id && sessions.has(id)) sessions.get(id).status = undefined; // counts may have changed
        // OpenCode's log endpoint, not stdout: the TUI owns the terminal.
        const log = client && client.app && client.app.log;
        if (typeof log === "function") {
          await Promise.resolve(log.call(client.app, { body: { service: "mnemon", level: "info", message: MNEMON_TEXT.nudge } })).catch(() => {});
        }
      } catch {
        // fail open
      }
    },
    dispose: async () => {
      sessions.clear();
    },
  };
}

// OpenCode ≥ 1.18.29: server(input) returns the hooks.
async function server(input) {
  return createHooks(input && input.client);
}

// OpenCode 2 registers the same behaviours through ctx.shell / ctx.session hooks. That API is not in
// the published plugin SDK yet [unconfirmed]: each hook is registered only where the function exists.
async function setup(ctx) {
  try {
    const hooks = createHooks(ctx && ctx.client);
    const register = (domain, name, handler) => {
      if (domain && typeof domain.hook === "function") domain.hook(name, handler);
    };
    register(ctx && ctx.shell, "create.before", hooks["shell.env"]);
    register(ctx && ctx.session, "context", hooks["experimental.chat.messages.transform"]);
    register(ctx && ctx.session, "compaction", hooks["experimental.session.compacting"]);
  } catch {
    // fail open
  }
}

export default { id: "mnemon", server, setup };
