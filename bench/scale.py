"""Latency of one large store, whole process, with a warm and a cold page cache; status in-process; RSS.

Owns the 1M (and 100k) figures of ``bench/README.md`` (issue 13). The store is built beforehand
(see bench/README.md: ``bench/generate.py`` + ``mnemon import``, and ``mnemon embed --all`` for
the store with vectors); this script only reads it, except ``remember``, which adds one insight
per run (so use a store you may write to):

    python bench/scale.py --data-dir /tmp/s1m --runs 5 [--embed-url http://127.0.0.1:PORT] [--out r.json]

For each of ``status``, ``recall``, ``search`` and ``remember`` it runs ``--runs`` whole processes
(``python -m mnemon``, time.perf_counter around subprocess.run) after one untimed warm-up and
reports the median ("warm"), then the same with the store's files evicted from the page cache
before every run ("cold"): ``posix_fadvise(POSIX_FADV_DONTNEED)`` on the database, its WAL and
every file of ``mnemon.db.index/`` (only this store's pages; the machine's other caches stay).
It also times ``Engine.status()`` in-process, and runs one recall in-process to read the resident
memory split of ``/proc/self/status``: ``RssFile`` (page-cache pages of the memory-mapped vector
matrix) against ``RssAnon`` (memory the process owns), which shows the matrix is mapped, not
copied.
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

QUERIES = ("why did we choose Qdrant for the billing service", "Kafka retries in PaymentGateway")


def store_files(data_dir: Path) -> list[Path]:
    store = data_dir / "data" / "default"
    return [p for p in sorted(store.rglob("*")) if p.is_file()]


def evict(data_dir: Path) -> int:
    """Drop this store's pages from the page cache; return the bytes covered."""
    total = 0
    for path in store_files(data_dir):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd) if path.suffix != ".lock" else None  # dirty pages cannot be dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            total += os.fstat(fd).st_size
        finally:
            os.close(fd)
    return total


def _env(embed_url: str | None, server: str = "off") -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    # off: every run is a whole in-process command (start-up, index open, query, close);
    # require: every run goes through the warm server (client start-up plus the worker's run).
    env["MNEMON_SERVER"] = server
    env["MNEMON_MAX_INSIGHTS"] = "0"
    env["MNEMON_EMBED_ENDPOINT"] = embed_url or "http://127.0.0.1:9"  # closed port: embedding-free
    return env


def _args(name: str, k: int) -> list[str]:
    if name == "remember":
        return ["remember", "--no-diff", f"Scale note {k} {time.time_ns()} about Kafka in OrderService"]
    if name in ("recall", "search"):
        return [name, QUERIES[k % len(QUERIES)]]
    return [name]


def time_command(data_dir: Path, name: str, runs: int, env: dict[str, str], cold: bool) -> dict[str, Any]:
    argv = [sys.executable, "-m", "mnemon", "--data-dir", str(data_dir)]
    subprocess.run([*argv, *_args(name, 0)], env=env, capture_output=True, check=True, timeout=600)
    times: list[float] = []
    for k in range(runs):
        if cold:
            evict(data_dir)
        started = time.perf_counter()
        proc = subprocess.run([*argv, *_args(name, k + 1)], env=env, capture_output=True, timeout=600)
        times.append((time.perf_counter() - started) * 1000)
        if proc.returncode != 0:
            raise SystemExit(f"{name} failed: {proc.stderr.decode('utf-8', 'replace')[-1000:]}")
    return {"median_ms": round(statistics.median(times)), "runs_ms": [round(t) for t in times]}


def status_in_process(data_dir: Path, runs: int) -> dict[str, Any]:
    from mnemon.config import Settings
    from mnemon.engine import Engine

    settings = Settings(data_dir=data_dir, store="default", embed_endpoint="http://127.0.0.1:9")
    times = []
    with Engine(settings) as engine:
        engine.status()
        for _ in range(runs):
            started = time.perf_counter()
            out = engine.status()
            times.append((time.perf_counter() - started) * 1000)
    return {"median_ms": round(statistics.median(times), 2), "edge_count": out["edge_count"],
            "total_insights": out["total_insights"]}  # fmt: skip


def _rss() -> dict[str, int]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            fields[key] = int(value.split()[0]) // 1024  # MiB
    return fields


def recall_memory(data_dir: Path, embed_url: str | None) -> dict[str, Any]:
    from mnemon.config import Settings
    from mnemon.engine import Engine

    settings = Settings(data_dir=data_dir, store="default", embed_endpoint=embed_url or "http://127.0.0.1:9")
    before = _rss()
    with Engine(settings) as engine:
        engine.recall(QUERIES[0])
        after = _rss()
        index = engine.vector_index()
        rows = index.rows if index is not None else 0
        matrix_mb = (index.vectors.nbytes // 2**20) if index is not None else 0
    return {"before_mb": before, "after_recall_mb": after, "vector_rows": rows, "matrix_mb": matrix_mb}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="mnemon latency on one large store")
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--embed-url", default=None, help="a local embedding server (the store has vectors)")
    parser.add_argument("--commands", default="status,recall,search,remember")
    parser.add_argument("--no-cold", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--server", choices=("off", "require"), default="off", help="MNEMON_SERVER for the runs")
    args = parser.parse_args(argv)
    env = _env(args.embed_url, args.server)
    result: dict[str, Any] = {"data_dir": str(args.data_dir), "vectors": bool(args.embed_url), "server": args.server,
                              "load_before": os.getloadavg()}  # fmt: skip
    result["status_in_process"] = status_in_process(args.data_dir, max(args.runs, 9))
    for name in args.commands.split(","):
        result[f"{name}_warm"] = time_command(args.data_dir, name, args.runs, env, cold=False)
        if not args.no_cold:
            result[f"{name}_cold"] = time_command(args.data_dir, name, args.runs, env, cold=True)
        print(json.dumps({name: {k: v for k, v in result.items() if k.startswith(name)}}), file=sys.stderr)
    result["recall_memory"] = recall_memory(args.data_dir, args.embed_url)
    result["load_after"] = os.getloadavg()
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
