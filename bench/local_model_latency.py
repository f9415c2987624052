"""Recall latency with each local embedding model on a 1k store, one-shot and through the warm server.

    python bench/local_model_latency.py DATA.json --minilm-path DIR [--runs 40] [--work /tmp/mnemon-lm-bench]

Builds one store per model from the first 1,000 dialogue turns of DATA.json (LoCoMo format) with
``import --no-diff``: ``none`` without embeddings, the others under ``MNEMON_EMBED_PROTOCOL=local``
(all-MiniLM-L6-v2 from ``--minilm-path``, multilingual-e5-small from the ``multilingual`` extra). Then
times ``recall QUESTION`` as whole processes, cycling through the data set's questions: ``in-process`` is
``MNEMON_SERVER=off`` (the process loads the model itself), ``served`` is ``MNEMON_SERVER=require``
against a warm server per model (its own runtime directory, so each keeps its own model loaded). The
models take turns call by call (A B C, then B C A, ...), so a drift of the machine's speed reaches them
alike; besides p50 and p95 each row gives the median of its ratios to the ``none`` call of the same
round. Prints the load average beside each row: on a shared machine compare rows of one run, not runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality import draft_of, turn_units  # noqa: E402

MODELS = ("none", "all-MiniLM-L6-v2", "multilingual-e5-small")


def _env(model: str, minilm_path: str, data_dir: Path, server: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
    runtime = data_dir / "run"  # one warm server per model: the server's key is per runtime directory
    runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
    env.update({"MNEMON_DATA_DIR": str(data_dir), "MNEMON_SERVER": server, "MNEMON_MAX_INSIGHTS": "0",
                "XDG_RUNTIME_DIR": str(runtime), "MNEMON_EMBED_ENDPOINT": "http://127.0.0.1:9"})  # fmt: skip
    if model != "none":
        env.update({"MNEMON_EMBED_PROTOCOL": "local", "MNEMON_EMBED_MODEL": model})
    if model == "all-MiniLM-L6-v2":
        env["MNEMON_EMBED_MODEL_PATH"] = minilm_path
    return env


def _mnemon(env: dict[str, str], *args: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mnemon", *args], capture_output=True, env=env, cwd="/")
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"mnemon {args[0]} failed: {proc.stderr.decode(errors='replace')}")
    return elapsed


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data")
    parser.add_argument("--minilm-path", required=True)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/mnemon-lm-bench"))
    args = parser.parse_args(argv)
    data = json.loads(Path(args.data).read_text(encoding="utf-8"))
    units = [u for sample in data for u in turn_units(sample)][:1000]
    questions = [str(qa["question"]) for sample in data for qa in sample["qa"]]
    print("| model | recall | store | p50 ms | p95 ms | ratio to none (median) | runs | load |\n"
          "|---|---|---|---|---|---|---|---|")  # fmt: skip
    for model in MODELS:
        data_dir = args.work / model
        if not (data_dir / "data").exists():
            data_dir.mkdir(parents=True, exist_ok=True)
            draft = args.work / f"{model}.json"
            draft.write_text(json.dumps(draft_of(units)), encoding="utf-8")
            _mnemon(_env(model, args.minilm_path, data_dir, "off"), "import", str(draft), "--no-diff")
    for server in ("off", "require"):
        envs = {model: _env(model, args.minilm_path, args.work / model, server) for model in MODELS}
        started = []
        try:
            if server == "require":
                for model, env in envs.items():
                    _mnemon({**env, "MNEMON_SERVER": "off"}, "server", "start")
                    started.append(model)
            times: dict[str, list[float]] = {model: [] for model in MODELS}
            for k in range(args.warmup + args.runs):
                question = questions[k % len(questions)]
                for j in range(len(MODELS)):  # the order rotates each round
                    model = MODELS[(k + j) % len(MODELS)]
                    elapsed = _mnemon(envs[model], "recall", question, "--limit", "10")
                    if k >= args.warmup:
                        times[model].append(elapsed)
        finally:
            for model in started:
                _mnemon({**envs[model], "MNEMON_SERVER": "off"}, "server", "stop")
        kind = "served" if server == "require" else "in-process"
        for model in MODELS:
            ratio = statistics.median(t / base for t, base in zip(times[model], times["none"], strict=True))
            print(f"| {model} | {kind} | {len(units)} | {1000 * _pct(times[model], 0.5):.0f} "
                  f"| {1000 * _pct(times[model], 0.95):.0f} | {ratio:.2f} | {len(times[model])} "
                  f"| {os.getloadavg()[0]:.1f} |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
