"""Recall latency with each local embedding model on a 1k store, one-shot and through the warm server.

    python bench/local_model_latency.py DATA.json --minilm-path DIR [--runs 40] [--work /tmp/mnemon-lm-bench]

Builds one store per model from the first 1,000 dialogue turns of DATA.json (LoCoMo format) with
``import --no-diff`` under ``MNEMON_EMBED_PROTOCOL=local`` (all-MiniLM-L6-v2 from ``--minilm-path``,
multilingual-e5-small from the ``multilingual`` extra), then times ``recall QUESTION`` as whole
processes, cycling through the data set's questions: ``in-process`` is ``MNEMON_SERVER=off`` (the
process loads the model itself), ``served`` is ``MNEMON_SERVER=require`` against a warm server
started for that store's settings (it keeps the model loaded). Prints p50 and p95 per row, after
``--warmup`` untimed calls. The machine's load average is printed beside each row: on a shared
machine compare rows of one run, not runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality import draft_of, turn_units  # noqa: E402

MODELS = ("all-MiniLM-L6-v2", "multilingual-e5-small")


def _env(model: str, minilm_path: str, data_dir: Path, server: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
    env.update({"MNEMON_DATA_DIR": str(data_dir), "MNEMON_EMBED_PROTOCOL": "local", "MNEMON_SERVER": server,
                "MNEMON_MAX_INSIGHTS": "0", "MNEMON_EMBED_MODEL": model})  # fmt: skip
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
    print("| model | recall | store | p50 ms | p95 ms | runs | load |\n|---|---|---|---|---|---|---|")
    for model in MODELS:
        data_dir = args.work / model
        if not (data_dir / "data").exists():
            data_dir.mkdir(parents=True, exist_ok=True)
            draft = args.work / f"{model}.json"
            draft.write_text(json.dumps(draft_of(units)), encoding="utf-8")
            _mnemon(_env(model, args.minilm_path, data_dir, "off"), "import", str(draft), "--no-diff")
        for server in ("off", "require"):
            env = _env(model, args.minilm_path, data_dir, server)
            if server == "require":
                _mnemon({**env, "MNEMON_SERVER": "off"}, "server", "start")
            try:
                times = []
                for k in range(args.warmup + args.runs):
                    elapsed = _mnemon(env, "recall", questions[k % len(questions)], "--limit", "10")
                    if k >= args.warmup:
                        times.append(elapsed)
            finally:
                if server == "require":
                    _mnemon({**env, "MNEMON_SERVER": "off"}, "server", "stop")
            kind = "served" if server == "require" else "in-process"
            print(f"| {model} | {kind} | {len(units)} | {1000 * _pct(times, 0.5):.0f} | {1000 * _pct(times, 0.95):.0f} "
                  f"| {len(times)} | {os.getloadavg()[0]:.1f} |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
