// mnemon prime hook for OpenClaw (agent:bootstrap). Written by `mnemon setup --target openclaw`;
// `mnemon setup --target openclaw --eject` removes it. Edits are overwritten by setup.
//
// OpenClaw runs managed hooks in-process: this handler adds mnemon's guide, headed by the store's
// status line, to the files the agent is bootstrapped with (event.context.bootstrapFiles).
/*@MNEMON_RUNTIME@*/

const GUIDE_FILE = "MNEMON-GUIDE.md";

export default async function mnemonPrime(event) {
  try {
    if (!event || event.type !== "agent" || event.action !== "bootstrap") return;
    const files = event.context && event.context.bootstrapFiles;
    if (!Array.isArray(files)) return;
    const status = await statusLine(MNEMON.primeBudgetMs);
    if (!status) return; // mnemon failed: inject nothing rather than a guide to a dead store
    const guide = readPrompt("guide.md").trim();
    const content = guide ? `${status}\n\n${guide}\n` : `${status}\n`;
    const entry = { name: GUIDE_FILE, path: "mnemon/guide.md", content, missing: false };
    const previous = files.findIndex((file) => file && file.name === GUIDE_FILE);
    if (previous >= 0) files[previous] = entry; // a re-run bootstrap must not add a second copy
    else files.push(entry);
  } catch {
    // fail open: the agent starts without mnemon's guide
  }
}
