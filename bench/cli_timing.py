"""Whole-process CLI timing (targets.md: ``remember`` on 10k ≤ 200 ms; ``--help``, ``--version``,
``store list`` ≤ 100 ms and numpy-free).

Builds a 1k and a 10k store directly through the store API (realistic rows: sentences from a
seeded vocabulary with dictionary entities, five sources, timestamps spread over a year, the
edges remember would have left: temporal backbone pairs per source, entity pairs to up to five
earlier insights per entity, occasional causal edges), then times each command as an agent hook
starts it: a fresh ``python -m mnemon`` process, embedding server unreachable (closed port), warm
page cache. One untimed run per command first (it also lets the derived indexes catch up), then
the median of N runs. Prints a Markdown table.

    python bench/cli_timing.py [--sizes 1000,10000] [--runs 15] [--dir /tmp/mnemon-bench]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mnemon.records import Edge, Insight  # noqa: E402
from mnemon.store import Store, edges, insights  # noqa: E402

WORDS = (
    "cache latency index query schema deploy rollback service cluster replica token session user account billing "
    "invoice payment retry timeout queue worker batch stream event metric alert dashboard incident review design "
    "decision migration backup restore storage bucket vector search ranking model prompt agent memory context "
    "budget release version branch merge review test fixture coverage lint build pipeline container image node "
    "region zone network proxy gateway router handler endpoint request response header payload error warning "
    "config secret key rotation policy audit log trace span sample profile memory leak thread lock contention"
).split()
ENTITIES = ("Rust", "Python", "PostgreSQL", "Redis", "Kafka", "Docker", "Kubernetes", "Qdrant", "SQLite", "React",
            "FastAPI", "Terraform", "AWS", "GitHub", "Ollama")
CATEGORIES = ("preference", "decision", "fact", "insight", "context", "general")
SOURCES = ("user", "claude", "codex", "cursor", "import")
CAUSAL = ("because", "so that", "due to", "in order to")
ENV_EXTRA = {
    "MNEMON_EMBED_ENDPOINT": "http://127.0.0.1:9",  # closed port: embedding-free mode, as without Ollama
    "MNEMON_MAX_INSIGHTS": "1000000",  # measure the write path, not a prune of the 10k store on every call
    "MNEMON_SERVER": "off",  # whole in-process start-up; bench/served.py measures the warm server
}


def build_store(data_dir: Path, n: int, seed: int = 7) -> tuple[str, int]:
    """Create ``data_dir``'s default store with ``n`` insights and their edges; return (an id, edge rows)."""
    rng = random.Random(seed)
    start = datetime(2025, 6, 1, tzinfo=timezone.utc)
    path = data_dir / "data" / "default" / "mnemon.db"
    store = Store.open(path, readonly=False, now="2026-01-01T00:00:00Z")
    rows: list[Insight] = []
    by_entity: dict[str, list[str]] = {}
    last_by_source: dict[str, str] = {}
    edge_rows: list[Edge] = []
    for i in range(n):
        moment = start + timedelta(seconds=i * (365 * 86400 // max(n, 1)))
        stamp = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
        ents = rng.sample(ENTITIES, rng.choice((0, 1, 1, 2)))
        words = rng.choices(WORDS, k=rng.randint(8, 20))
        for e in ents:
            words.insert(rng.randrange(len(words) + 1), e)
        if rng.random() < 0.2:
            words.insert(len(words) // 2, rng.choice(CAUSAL))
        source = rng.choice(SOURCES)
        row = Insight(
            id=f"{i:08x}-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}-8{rng.getrandbits(12):03x}-"
            f"{rng.getrandbits(48):012x}",
            content=" ".join(words).capitalize() + f" (note {i}).",
            category=rng.choice(CATEGORIES), importance=rng.choice((1, 2, 3, 3, 3, 4, 5)),
            tags=rng.sample(WORDS, rng.randint(0, 3)), entities=ents, source=source,
            created_at=stamp, updated_at=stamp,
        )
        rows.append(row)
        prev = last_by_source.get(source)
        if prev is not None:
            edge_rows.append(Edge(prev, row.id, "temporal", 1.0, {"sub_type": "backbone", "direction": "precedes"}, stamp))
            edge_rows.append(Edge(row.id, prev, "temporal", 1.0, {"sub_type": "backbone", "direction": "succeeds"}, stamp))
            if "because" in row.content or "due to" in row.content:
                edge_rows.append(Edge(prev, row.id, "causal", 0.2, {"overlap": "0.2000", "sub_type": "causes"}, stamp))
        last_by_source[source] = row.id
        for e in ents:
            for other in by_entity.get(e, [])[-5:]:
                edge_rows.append(Edge(row.id, other, "entity", 1.0, {"entity": e}, stamp))
                edge_rows.append(Edge(other, row.id, "entity", 1.0, {"entity": e}, stamp))
            by_entity.setdefault(e, []).append(row.id)
    with store.transaction("bench") as conn:
        for row in rows:
            insights.insert(conn, row, row.created_at)
        edges.upsert_many(conn, edge_rows)
    store.close()
    return rows[n // 2].id, len(edge_rows)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_command(data_dir: Path, argv_for_run, runs: int) -> tuple[float, float]:
    """Median wall-clock and CPU (user + sys) milliseconds of ``runs`` fresh processes, after one
    untimed warm-up. CPU time is what a shared, noisy machine distorts least."""
    env = dict(os.environ)
    env.update(ENV_EXTRA)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    walls, cpus = [], []
    for i in range(runs + 1):
        argv = [sys.executable, "-m", "mnemon", "--data-dir", str(data_dir), *argv_for_run(i)]
        cpu0, t0 = _children_cpu(), time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, env=env)
        wall, cpu = (time.perf_counter() - t0) * 1000, (_children_cpu() - cpu0) * 1000
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.decode(errors='replace')}")
        if i:  # the first run is the warm-up
            walls.append(wall)
            cpus.append(cpu)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--dir", default="")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    base = Path(args.dir or tempfile.mkdtemp(prefix="mnemon-bench-"))

    commands = {
        "remember": lambda i, tag: ["remember", f"Bench memory {tag}-{i}: chose Redis because latency matters",
                                    "--source", "bench"],
        "show": None,
        "--help": lambda i, tag: ["--help"],
        "--version": lambda i, tag: ["--version"],
        "store list": lambda i, tag: ["store", "list"],
    }
    table: dict[str, dict[int, tuple[float, float]]] = {name: {} for name in commands}
    built: dict[int, str] = {}
    for n in sizes:
        data_dir = base / f"store-{n}"
        t0 = time.perf_counter()
        some_id, n_edges = build_store(data_dir, n)
        built[n] = f"{n} insights, {n_edges} edge rows, built in {time.perf_counter() - t0:.1f} s"
        for name, make in commands.items():
            if name == "show":
                run = lambda i, _id=some_id: ["show", _id]  # noqa: E731
            else:
                run = lambda i, _make=make, _n=n: _make(i, f"{_n}-{time.time_ns()}")  # noqa: E731
            table[name][n] = time_command(data_dir, run, args.runs)

    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    print(f"Python {platform.python_version()}, {os.cpu_count()} CPUs, load average {load[0]:.2f} at the end; "
          f"median of {args.runs} whole-process runs after one warm-up; embedding server unreachable.")
    for n in sizes:
        print(f"- store {built[n]}")
    print()
    print("| command | " + " | ".join(f"{n:,} store: wall ms | CPU ms" for n in sizes) + " |")
    print("|---|" + "---:|---:|" * len(sizes))
    for name in commands:
        cells = " | ".join(f"{table[name][n][0]:.0f} | {table[name][n][1]:.0f}" for n in sizes)
        print(f"| `{name}` | {cells} |")


if __name__ == "__main__":
    main()
