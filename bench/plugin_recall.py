"""Recall on prompt inside the OpenClaw, OpenCode and Pi plugins: wall time per prompt on a 1k store.

Builds a store of ``--size`` insights (``bench/cli_timing.py``'s generator) plus three insights about
the prompt below, installs the three plugins with recall on prompt into a scratch directory, then
runs ``bench/plugin_recall.mjs`` under Node, which calls each plugin's prompt handler ``--runs``
times as its host does (a new message each time, so no cache applies) for three cases: a prompt
with relevant memories, an unrelated prompt, and a failing mnemon (the data dir is a file). Prints
the median and max wall milliseconds per handler call and the text each plugin injected.

    python bench/plugin_recall.py [--size 1000] [--runs 10] [--dir /tmp/mnemon-plugin-bench]

Pi's extension needs jiti (tests/node_host.py's cache; run the Pi tests once, or set
MNEMON_TEST_NODE_MODULES); without it Pi is left out. Each call starts ``python -m mnemon``
(recall), so with a warm command server behind ``python -m mnemon`` this measures the server.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.cli_timing import ENV_EXTRA, build_store  # noqa: E402
from mnemon import setup as installer  # noqa: E402
from tests.node_host import CACHE, NODE  # noqa: E402

RELEVANT = "Which vector database did we choose for semantic search, and why?"
UNRELATED = "Write a haiku about autumn leaves falling in the park"
FACTS = (
    "We chose Qdrant as the vector database for semantic search because its Rust core keeps p99 latency low",
    "Qdrant runs as a single Docker container on port 6333 in staging",
    "Semantic search falls back to keyword ranking when the embedding server is down",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--dir", default="")
    args = parser.parse_args()
    if NODE is None:
        raise SystemExit("node is not installed")
    base = Path(args.dir or tempfile.mkdtemp(prefix="mnemon-plugin-bench-"))
    data_dir = base / "data"
    env = {**os.environ, **ENV_EXTRA, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if not (data_dir / "data" / "default" / "mnemon.db").exists():
        build_store(data_dir, args.size)
        for fact in FACTS:
            subprocess.run([sys.executable, "-m", "mnemon", "--data-dir", str(data_dir), "remember", fact, "--cat",
                            "decision"], check=True, capture_output=True, env=env)
    installer.write_prompts(data_dir)
    options = installer.Options(data_dir, ("prime", "remind"), recall_on_prompt=True)
    dirs = []
    for name, is_global in (("openclaw", True), ("opencode", False), ("pi", False)):
        placement = installer.place(installer.TARGETS[name], is_global=is_global, home=base / "home",
                                    project=base / "project", env={})
        installer.install(placement, options)
        dirs.append(placement.config_dir)
    openclaw, opencode, pi = dirs
    jiti = CACHE / "node_modules" / "jiti" / "lib" / "jiti.mjs"
    broken = base / "not-a-data-dir"
    broken.write_text("")
    cases = (("relevant prompt", RELEVANT, {}), ("unrelated prompt", UNRELATED, {}),
             ("failing mnemon", RELEVANT, {"MNEMON_DATA_DIR": str(broken)}))
    print(f"store: {args.size} generated insights + {len(FACTS)} about the prompt, {args.runs} prompts per cell\n")
    print("| case | host handler | median ms | max ms |\n|---|---|---|---|")
    texts = []
    for label, prompt, extra in cases:
        argv = [NODE, str(REPO / "bench" / "plugin_recall.mjs"), str(openclaw), str(opencode / "plugins" / "mnemon.js"),
                str(pi / "extensions" / "mnemon.ts") if jiti.exists() else "-", str(jiti) if jiti.exists() else "-",
                str(args.runs), prompt]
        proc = subprocess.run(argv, capture_output=True, text=True, env={**env, **extra}, check=True)
        for host, result in json.loads(proc.stdout).items():
            print(f"| {label} | {host} | {statistics.median(result['ms']):.0f} | {max(result['ms']):.0f} |")
            texts.append((label, host, result["injected"]))
    for label, host, text in texts:
        print(f"\n--- {host}, {label}: injected ---\n{text or '(nothing)'}")


if __name__ == "__main__":
    main()
