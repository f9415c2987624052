// mnemon extension for Pi. Written by `mnemon setup --target pi`; `mnemon setup --target pi --eject`
// removes it. Edits are overwritten by setup.
//
// Pi loads extensions/*.ts in-process with jiti (no build step). Before each agent run the system
// prompt gets mnemon's status line, Pi's guide (<data-dir>/prompt/pi/guide.md) and, when recall on
// prompt is on, the memories recalled for the prompt; nothing is persisted as a message. The status
// is fetched when the session starts and after each run, off the prompt's path.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
/*@MNEMON_RUNTIME@*/

const VERIFY_LINE =
  "[mnemon] Recall before answering when earlier decisions, preferences or project facts may matter (`mnemon recall \"<topic>\"`), and verify recalled facts that could be stale.";
const END_NOTICE = "[mnemon] Consider whether this exchange warrants durable memory.";
const COMPACTED_NOTICE =
  "[mnemon] Context was compacted. Recheck with `mnemon recall \"<topic>\"` what was stored before, and store durable insights from before the compaction that are not yet remembered.";

export default function mnemonExtension(pi: ExtensionAPI) {
  let status: Promise<string> | undefined; // the latest `mnemon status` line, fetched in the background
  let compacted = false;

  pi.on("resources_discover", async () => {
    // The skills dir setup wrote SKILL.md into (absolute). Pi also finds it by itself and skips the
    // same file seen twice; the Go extension named the global dir even for a local install, which
    // Pi reports as a missing path when it does not exist.
    return MNEMON.skillsDir ? { skillPaths: [MNEMON.skillsDir] } : undefined;
  });

  pi.on("session_start", async (_event, ctx) => {
    compacted = false;
    status = statusLine(MNEMON.primeBudgetMs);
    try {
      ctx.ui.setStatus("mnemon", "mnemon");
    } catch {
      // no UI (print mode)
    }
  });

  pi.on("before_agent_start", async (event) => {
    try {
      // The result replaces the system prompt: without the host's own text to extend, returning one
      // would put "undefined" and our block in place of Pi's whole prompt.
      if (!event || typeof event.systemPrompt !== "string") return undefined;
      // The prompt waits for at most one recall budget: a status still running past it is dropped.
      const budget = recallSettings().budgetMs;
      if (!status) status = statusLine(budget);
      const [line, memories] = await Promise.all([withinBudget(status, budget), recallContext(event.prompt)]);
      if (!line) {
        status = undefined; // retried on the next prompt
        return undefined;
      }
      const guide = readPrompt("guide.md").trim();
      const content = [line, guide, memories, VERIFY_LINE].filter(Boolean).join("\n\n");
      return { systemPrompt: `${event.systemPrompt}\n\n${content}` };
    } catch {
      return undefined; // fail open: the system prompt stays as it is
    }
  });

  pi.on("context", async (event) => {
    try {
      const messages = event.messages.filter(
        (message: any) => !(message && message.role === "custom" && message.customType === "mnemon"),
      );
      if (compacted) {
        compacted = false;
        messages.push({ role: "custom", customType: "mnemon-compaction", content: COMPACTED_NOTICE, display: false, timestamp: Date.now() });
      }
      return { messages };
    } catch {
      return undefined;
    }
  });

  pi.on("agent_end", async (_event, ctx) => {
    status = statusLine(MNEMON.primeBudgetMs); // memories may have been added during the run
    try {
      ctx.ui.notify(END_NOTICE, "info");
    } catch {
      // no UI
    }
  });

  pi.on("session_compact", async () => {
    compacted = true;
  });
}
