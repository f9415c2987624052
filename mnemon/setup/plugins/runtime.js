// ---- mnemon plugin runtime: the part every mnemon plugin shares (inlined by `mnemon setup`). ----
// Rules for everything below: fail open (any error ⇒ nothing injected, nothing thrown), a time
// budget on every mnemon call (the child is killed with SIGKILL at the budget), absolute paths
// only, and nothing written to stdout or stderr (hosts may read either).
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

// Written by `mnemon setup`: the interpreter command, data and prompt dirs, switches and budgets.
const CONFIG = /*@MNEMON_CONFIG@*/null;

const MNEMON = {
  command: ["mnemon"], // argv prefix; setup writes [<console script>] or [<absolute python>, "-m", "mnemon"]
  env: {}, // extra environment, e.g. PYTHONPATH for a source checkout
  dataDir: join(homedir(), ".mnemon"),
  promptDir: join(homedir(), ".mnemon", "prompt"),
  promptSubdir: "", // "pi" for Pi, which keeps its own guide (setup-targets §2)
  skillsDir: "", // where setup wrote skills/mnemon (Pi's resources_discover)
  hooks: { prime: true, remind: true, nudge: true, compact: false },
  recall: { enabled: false, limit: 3, minRelevance: 0.3, budgetMs: 1500, maxPromptChars: 500 },
  primeBudgetMs: 3000,
  outputCap: 262144, // bytes of mnemon output kept; the rest is dropped
  ...(CONFIG || {}),
};

// MNEMON_DATA_DIR at run time wins over the install-time data dir, as in the shell hooks.
function mnemonDataDir() {
  return process.env.MNEMON_DATA_DIR || MNEMON.dataDir;
}

function mnemonPromptDir() {
  const base = process.env.MNEMON_DATA_DIR ? join(process.env.MNEMON_DATA_DIR, "prompt") : MNEMON.promptDir;
  return MNEMON.promptSubdir ? join(base, MNEMON.promptSubdir) : base;
}

function childEnv() {
  const env = { ...process.env };
  for (const [key, value] of Object.entries(MNEMON.env || {})) {
    // A PYTHONPATH the user already has is kept behind ours.
    env[key] = key === "PYTHONPATH" && env.PYTHONPATH ? `${value}:${env.PYTHONPATH}` : String(value);
  }
  return env;
}

// A budget as a setTimeout delay: Node turns a delay past 2^31-1 ms into 1 ms and writes a
// TimeoutOverflowWarning to stderr (MNEMON_RECALL_BUDGET=3000000 did both), so it is capped there.
const MAX_TIMER_MS = 2147483647;
function timerMs(ms) {
  return Math.min(MAX_TIMER_MS, Math.max(1, Number(ms) || 1));
}

// Run `mnemon --data-dir <dir> <args…>`; resolve its stdout, or "" on any failure, a non-zero exit
// or when the budget runs out (then the child is killed). Never rejects.
function runMnemon(args, budgetMs) {
  return new Promise((resolve) => {
    let settled = false;
    let child;
    let timer;
    const chunks = [];
    let size = 0;
    const finish = (text) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(text);
    };
    try {
      const [exe, ...prefix] = MNEMON.command;
      child = spawn(exe, [...prefix, "--data-dir", mnemonDataDir(), ...args], {
        stdio: ["ignore", "pipe", "ignore"],
        env: childEnv(),
        detached: process.platform !== "win32", // its own process group: the budget kills helpers too
        windowsHide: true,
      });
    } catch {
      finish("");
      return;
    }
    timer = setTimeout(() => {
      try {
        if (process.platform !== "win32" && child.pid) process.kill(-child.pid, "SIGKILL");
        else child.kill("SIGKILL");
      } catch {
        try {
          child.kill("SIGKILL");
        } catch {
          // already gone
        }
      }
      finish("");
    }, timerMs(budgetMs));
    child.on("error", () => finish(""));
    child.stdout.on("data", (chunk) => {
      if (size < MNEMON.outputCap) chunks.push(chunk);
      size += chunk.length;
    });
    child.on("close", (code) => finish(code === 0 ? Buffer.concat(chunks).toString("utf8") : ""));
  });
}

// The promise's value, or `fallback` once `ms` have passed (the timer does not outlive the race).
function withinBudget(promise, ms, fallback = "") {
  let timer;
  const late = new Promise((resolve) => {
    timer = setTimeout(() => resolve(fallback), timerMs(ms));
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

function readPrompt(name) {
  try {
    return readFileSync(join(mnemonPromptDir(), name), "utf8");
  } catch {
    return "";
  }
}

// "[mnemon] Memory active (N insights, M edges)." from `mnemon status`, or "" when mnemon fails.
async function statusLine(budgetMs = MNEMON.primeBudgetMs) {
  try {
    const status = JSON.parse(String(await runMnemon(["status"], budgetMs)));
    if (!Number.isInteger(status.total_insights)) return "";
    return `[mnemon] Memory active (${status.total_insights} insights, ${status.edge_count || 0} edges).`;
  } catch {
    return "";
  }
}

// The first `max` code points of the prompt, whitespace collapsed: the recall query. It scans only
// as far as the query reaches: collapsing and splitting the whole prompt first took 1.5 s and 600 MB
// of the host's process for a 26 MB prompt, before any budget applied.
const WHITESPACE_RUN = /\s+/y;
function boundedQuery(text, max) {
  if (typeof text !== "string") return "";
  const out = [];
  let i = 0;
  while (i < text.length && out.length < max) {
    WHITESPACE_RUN.lastIndex = i;
    if (WHITESPACE_RUN.test(text)) {
      i = WHITESPACE_RUN.lastIndex;
      if (out.length > 0 && i < text.length) out.push(" ");
      continue;
    }
    const ch = String.fromCodePoint(text.codePointAt(i));
    out.push(ch);
    i += ch.length;
  }
  return out.join("").trim();
}

// The install-time recall settings; MNEMON_RECALL_LIMIT, MNEMON_RECALL_FLOOR and MNEMON_RECALL_BUDGET
// (seconds) override them at run time, as for the shell hooks. Invalid values are ignored.
function recallSettings() {
  const recall = MNEMON.recall;
  const env = (name, valid) => {
    const value = Number(process.env[name]);
    return process.env[name] && Number.isFinite(value) && valid(value) ? value : undefined;
  };
  const budget = env("MNEMON_RECALL_BUDGET", (v) => v > 0);
  return {
    enabled: Boolean(recall.enabled),
    limit: env("MNEMON_RECALL_LIMIT", (v) => Number.isInteger(v) && v >= 1) ?? (recall.limit || 5),
    minRelevance: env("MNEMON_RECALL_FLOOR", (v) => v >= 0) ?? (Number(recall.minRelevance) || 0),
    budgetMs: budget !== undefined ? budget * 1000 : recall.budgetMs || 1500,
    maxPromptChars: recall.maxPromptChars || 500,
  };
}

// Python's "%.2f": like toFixed(2), except that an exact binary tie (0.125, 0.375…) goes to even.
function twoDecimals(x) {
  const scaled = x * 100;
  if (Number.isInteger(x * 8) && scaled % 1 === 0.5) {
    const down = Math.floor(scaled);
    return ((down % 2 === 0 ? down : down + 1) / 100).toFixed(2);
  }
  return x.toFixed(2);
}

// Recall on prompt: `mnemon recall --brief --limit K -- <prompt>` within the recall budget; only
// hits whose absolute relevance is at or above the floor, not superseded. "" when off, empty, unrelated or failed.
async function recallContext(prompt) {
  const recall = recallSettings();
  if (!recall.enabled) return "";
  const query = boundedQuery(prompt, recall.maxPromptChars);
  if (!query) return "";
  try {
    const args = ["recall", "--brief", "--limit", String(recall.limit), "--", query];
    const reply = JSON.parse(String(await runMnemon(args, recall.budgetMs)));
    const floor = recall.minRelevance;
    const hits = (Array.isArray(reply.results) ? reply.results : []).filter(
      (hit) => hit && typeof hit.excerpt === "string" && typeof hit.relevance === "number" && hit.relevance >= floor && !hit.superseded,
    );
    if (hits.length === 0) return "";
    // The same text as the shell hooks' recall on prompt (mnemon/setup/templates/helper.py).
    const lines = hits.map((hit) => `- [${hit.category || "general"} relevance=${twoDecimals(hit.relevance)}] ${hit.excerpt}`);
    return ["[mnemon] Relevant memories for this prompt (from mnemon recall):", ...lines].join("\n");
  } catch {
    return "";
  }
}

// The compaction flag: set by a pre-compaction hook, consumed by the next prompt.
function compactFlagPath() {
  return join(mnemonDataDir(), ".compact-pending");
}

function setCompactFlag() {
  try {
    mkdirSync(mnemonDataDir(), { recursive: true });
    writeFileSync(compactFlagPath(), new Date().toISOString() + "\n");
  } catch {
    // fail open
  }
}

function takeCompactFlag() {
  try {
    if (!existsSync(compactFlagPath())) return false;
    unlinkSync(compactFlagPath());
    return true;
  } catch {
    return false;
  }
}

const MNEMON_TEXT = {
  remind:
    "[mnemon] Evaluate: recall needed? If this request may depend on earlier decisions, preferences or project facts, run `mnemon recall \"<topic>\"` first.",
  nudge:
    "[mnemon] Consider: does this exchange warrant a remember sub-agent? Store durable decisions, preferences, facts or lessons with `mnemon remember` (never secrets).",
  compaction:
    "[mnemon] Context compaction starting or just happened. Insights not yet stored with `mnemon remember` are lost from this session; recheck with `mnemon recall \"<topic>\"` what was stored.",
};
// ---- end of the mnemon plugin runtime ----
