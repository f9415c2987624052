"""Wall time of the prompt hook with recall on prompt, on a generated store, against a bare ``mnemon recall``.

Builds a store of ``--n`` generated insights (bench/generate.py) plus two memories about Qdrant's port, installs
the CodeBuddy hooks (Claude-shaped ``hookSpecificOutput``) into a temporary HOME twice (recall on, recall off),
then times whole processes with ``time.perf_counter``, interleaved so machine drift hits all variants alike:

- ``hook, recall on``: ``user_prompt.sh`` with a UserPromptSubmit event whose prompt has relevant memories;
- ``hook, unrelated``: the same hook, a prompt with no matching memory (nothing is injected);
- ``hook, recall off``: the reminder-only hook (a shell start, no mnemon call);
- ``mnemon recall --brief``: the bare CLI call the hook makes.

    python bench/hook_timing.py [--n 1000] [--runs 9]

With the warm command server in place (resident mode), run it again: the hook calls ``python -m mnemon``
and benefits without change.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RELEVANT = "Which port does our Qdrant instance listen on?"
UNRELATED = "Please summarise the plot of Moby Dick in three sentences"


def mnemon(data: Path, *args: str, env: dict[str, str], home: Path | None = None) -> None:
    run_env = {**env, "HOME": str(home)} if home else env
    subprocess.run([sys.executable, "-m", "mnemon", "--data-dir", str(data), *args], check=True,
                   capture_output=True, env=run_env, cwd=home or REPO)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": str(REPO), "MNEMON_MAX_INSIGHTS": "0",
           "MNEMON_EMBED_ENDPOINT": os.environ.get("MNEMON_EMBED_ENDPOINT", "http://127.0.0.1:9")}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data, draft = root / "data", root / "draft.json"
        subprocess.run([sys.executable, str(REPO / "bench/generate.py"), "--n", str(args.n), "--out", str(draft),
                        "--edges-per-insight", "5"], check=True, capture_output=True, env=env)
        mnemon(data, "import", str(draft), env=env)
        mnemon(data, "remember", "Qdrant runs in Docker on port 6333 for the search service", "--cat", "fact", env=env)
        homes = {"on": root / "home-on", "off": root / "home-off"}
        for flag, home in homes.items():
            home.mkdir()
            mnemon(data, "setup", "--target", "codebuddy", "--global", f"--{'' if flag == 'on' else 'no-'}recall-on-prompt",
                   env=env, home=home)
        hook = {k: str(h / ".codebuddy/hooks/mnemon/user_prompt.sh") for k, h in homes.items()}
        event = {q: json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": q}) for q in (RELEVANT, UNRELATED)}
        variants = {
            "hook, recall on": ([hook["on"]], event[RELEVANT]),
            "hook, unrelated": ([hook["on"]], event[UNRELATED]),
            "hook, recall off": ([hook["off"]], event[RELEVANT]),
            "mnemon recall --brief": ([sys.executable, "-m", "mnemon", "--data-dir", str(data), "recall", "--brief",
                                       "--limit", "5", "--", RELEVANT], ""),
        }
        samples: dict[str, list[float]] = {k: [] for k in variants}
        for run in range(args.runs + 1):  # the first round warms the page cache and is not counted
            for name, (argv_, stdin) in variants.items():
                start = time.perf_counter()
                out = subprocess.run(argv_, input=stdin, capture_output=True, text=True, env=env).stdout
                if run:
                    samples[name].append(time.perf_counter() - start)
                if run == 1 and name == "hook, recall on":
                    assert "Qdrant runs in Docker" in out, out
        load = os.getloadavg()[0]
        print(f"{args.n} insights, median of {args.runs} (load average {load:.2f}):")
        for name, values in samples.items():
            print(f"  {name:<24}{statistics.median(values) * 1000:7.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
