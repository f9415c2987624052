"""One process of one "machine" of the PostgreSQL stress test (tests/test_postgres_concurrency.py).

    python -m tests.pg_stress_worker DATA_DIR TAG OPS SEED LOG_FILE

Runs OPS real ``mnemon`` commands, one process each (``python -m mnemon``; through the warm server
when the environment says ``MNEMON_SERVER=require``), against the store ``team`` of DATA_DIR, and
appends one JSON line per command to LOG_FILE: the operation, its arguments, exit status, stdout
and stderr. The mix (seeded): remember (a distinct content, or one of the contents every process
shares), link and forget of this process's own memories, recall, search, show, gc --keep, and an
import of a small draft (three items, one of them a shared content, one explicit edge).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

WORDS = ["kafka", "billing", "latency", "replica", "schema", "backup", "cache", "deploy", "quota", "index",
         "ledger", "router", "vacuum", "shard", "token", "budget"]  # fmt: skip
SHARED = [f"shared runbook step {k}: rotate the {WORDS[k]} credentials before the {WORDS[k + 1]} audit" for k in range(8)]
MIX = [("remember", 6), ("shared", 2), ("link", 2), ("forget", 1), ("recall", 2), ("search", 1), ("show", 1),
       ("keep", 1), ("import", 1)]  # fmt: skip


def main() -> None:
    data_dir, tag, ops, seed, log_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    rng = random.Random(seed)
    kinds = [k for k, w in MIX for _ in range(w)]
    mine: list[str] = []  # this process's own active memories (only it forgets or links them)
    drafts = Path(log_path).with_suffix(".drafts")
    drafts.mkdir(exist_ok=True)
    fd = os.open(log_path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600)

    def run(op: str, *argv: str, **extra: object) -> dict[str, object]:
        proc = subprocess.run([sys.executable, "-m", "mnemon", "--data-dir", data_dir, "--store", "team", *argv],
                              capture_output=True, text=True, timeout=600)
        record = {"op": op, "argv": list(argv), "code": proc.returncode, "out": proc.stdout, "err": proc.stderr, **extra}
        os.write(fd, (json.dumps(record) + "\n").encode())
        return record

    # Two memories first, then every other kind once (in an order of this process's own), then the mix:
    # a short run covers every command.
    others = [k for k, _ in MIX if k != "remember"]
    rng.shuffle(others)
    plan = ["remember", "remember", *others]
    for i in range(ops):
        kind = plan[i] if i < len(plan) else rng.choice(kinds)
        if kind in ("link", "forget", "show", "keep") and len(mine) < 2:
            kind = "remember"
        words = rng.sample(WORDS, 3)
        if kind == "remember":
            content = f"{tag} note {i} about {words[0]} {words[1]} and {words[2]}"
            done = run(kind, "remember", content, "--source", tag, "--cat", "fact", content=content)
            if done["code"] == 0:
                mine.append(json.loads(str(done["out"]))["id"])
        elif kind == "shared":
            content = rng.choice(SHARED)
            run(kind, "remember", content, "--source", "team", content=content)
        elif kind == "link":
            a, b = rng.sample(mine, 2)
            run(kind, "link", a, b, "--type", "causal", "--weight", "0.7", source=a, target=b)
        elif kind == "forget":
            victim = mine.pop(rng.randrange(len(mine)))
            run(kind, "forget", victim, id=victim)
        elif kind == "recall":
            run(kind, "recall", f"{words[0]} {words[1]}")
        elif kind == "search":
            run(kind, "search", words[0])
        elif kind == "show":
            run(kind, "show", rng.choice(mine))
        elif kind == "keep":
            run(kind, "gc", "--keep", rng.choice(mine))
        else:
            items = [{"content": f"{tag} import {i} item {k} on {words[k]} {words[(k + 1) % 3]}"} for k in range(2)]
            items.append({"content": rng.choice(SHARED)})
            draft = {"schema_version": "1", "source": f"{tag}-import", "insights": items,
                     "edges": [{"source_index": 0, "target_index": 1, "edge_type": "causal", "weight": 0.6}]}
            path = drafts / f"draft{i}.json"
            path.write_text(json.dumps(draft), encoding="utf-8")
            run(kind, "import", str(path), contents=[item["content"] for item in items])
    os.close(fd)


if __name__ == "__main__":
    main()
