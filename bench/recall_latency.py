"""Whole-process latency of ``recall`` and ``search`` on generated stores (issue 4, targets.md).

Builds stores of the requested sizes from ``bench/generate.py``'s seeded corpus straight through
the store API (insert, backbone edges per source, the draft's explicit edges, entity edges), with
about 35 edge rows per insight; the "vectors" variant also stores the contents' 768-dim
HashEmbedder vectors, and the query is embedded by ``tests/embed_server.py`` run as a
subprocess (same vectors). Each measured command is ``python -m mnemon ...`` in a fresh process,
as an agent hook runs it; the table shows the median of ``--runs`` runs after one warm-up run
(which builds the hot index and fills the OS page cache).

    python bench/recall_latency.py --sizes 1000 10000 100000 --runs 7 [--work /tmp/mnemon-bench]

Stores are cached in ``--work`` (rebuilt with ``--rebuild``); nothing is written to the repo.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict, deque
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

QUERIES = (
    "why did we choose Qdrant for vector search",
    "when did the PaymentService outage happen",
    "Redis cache eviction latency",
    "what is the BillingGateway",
    "Kubernetes deploy rollback",
)
TARGETS_MS = {  # targets.md: recall whole process
    (1_000, False): 150, (1_000, True): 150, (10_000, False): 250, (10_000, True): 250,
    (100_000, False): 400, (100_000, True): 500,
}  # fmt: skip
CLOSED_ENDPOINT = "http://127.0.0.1:9"
ENTITY_NEIGHBOURS = 5


def build_store(data_dir: Path, n: int, *, vectors: bool, edges_per_insight: float = 35.0) -> dict[str, int]:
    """Write a store of ``n`` insights (and about ``edges_per_insight`` edge rows each)."""
    import random

    from generate import draft_vectors, generate_draft

    from mnemon.config import resolve
    from mnemon.engine.core import format_ts
    from mnemon.records import Edge, Insight
    from mnemon.store import Store, blob, edges, insights

    draft = generate_draft(n, edges_per_insight=edges_per_insight)
    items = draft["insights"]
    settings = resolve(data_dir=str(data_dir), store=None, readonly=False, embed_model=None, environ={})
    store = Store.open(settings.db_path, readonly=False, now=format_ts(__import__("datetime").datetime.now()))
    ids = [f"{random.Random(i).getrandbits(128):032x}" for i in range(n)]
    ids = [f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:]}" for h in ids]
    order = sorted(range(n), key=lambda i: items[i]["created_at"])
    rows: list[Edge] = []
    last_by_source: dict[str, int] = {}
    recent_by_entity: dict[str, deque[int]] = defaultdict(lambda: deque(maxlen=ENTITY_NEIGHBOURS))
    for i in order:
        item = items[i]
        stamp = item["created_at"]
        prev = last_by_source.get(item["source"])
        if prev is not None:
            meta = {"sub_type": "backbone", "direction": "precedes"}
            rows.append(Edge(ids[prev], ids[i], "temporal", 1.0, meta, stamp))
            rows.append(Edge(ids[i], ids[prev], "temporal", 1.0, {**meta, "direction": "succeeds"}, stamp))
        last_by_source[item["source"]] = i
        for entity in item["entities"]:
            for other in recent_by_entity[entity]:
                rows.append(Edge(ids[i], ids[other], "entity", 1.0, {"entity": entity}, stamp))
                rows.append(Edge(ids[other], ids[i], "entity", 1.0, {"entity": entity}, stamp))
            recent_by_entity[entity].append(i)
    for e in draft["edges"]:
        rows.append(Edge(ids[e["source_index"]], ids[e["target_index"]], e["edge_type"], e["weight"], {}, items[0]["created_at"]))
    matrix = draft_vectors(draft) if vectors else None
    with store.transaction("bench") as conn:
        for i in order:
            item = items[i]
            ins = Insight(
                id=ids[i], content=item["content"], category=item["category"], importance=item["importance"],
                tags=item["tags"], entities=item["entities"], source=item["source"],
                created_at=item["created_at"], updated_at=item["created_at"],
            )  # fmt: skip
            insights.insert(conn, ins, item["created_at"])
        if matrix is not None:
            conn.executemany(
                "UPDATE insights SET embedding = ? WHERE id = ?",
                [(blob.encode(matrix[i], store.embedding_format), ids[i]) for i in range(n)],
            )
            try:
                from mnemon.store import vectors as vector_store

                vector_store.set_vector_meta(conn, "nomic-embed-text", matrix.shape[1])
            except ImportError:
                pass
        edges.upsert_many(conn, rows)
    count = edges.count_all(store.conn)
    store.close()
    return {"insights": n, "edges": count}


def run_cli(data_dir: Path, args: list[str], endpoint: str) -> tuple[float, float]:
    """(wall ms, CPU ms of the child): on a shared, loaded machine CPU time is the steadier figure."""
    env = dict(os.environ)
    env.setdefault("MNEMON_SERVER", "off")  # whole in-process runs; bench/served.py measures the warm server
    env.update({"MNEMON_EMBED_ENDPOINT": endpoint, "PYTHONPATH": str(ROOT)})
    env.pop("MNEMON_STORE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mnemon", "--data-dir", str(data_dir), *args], capture_output=True, env=env, check=False
    )
    elapsed = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    if proc.returncode != 0:
        raise RuntimeError(f"mnemon {args} failed: {proc.stderr.decode()}")
    return elapsed, cpu


def measure(data_dir: Path, command: str, runs: int, endpoint: str) -> tuple[float, float, float]:
    """(first run incl. any index build, median wall, median CPU of ``runs`` further runs) in ms."""
    first, _ = run_cli(data_dir, [command, QUERIES[0]], endpoint)
    times = [run_cli(data_dir, [command, QUERIES[i % len(QUERIES)]], endpoint) for i in range(runs)]
    return first, statistics.median(t[0] for t in times), statistics.median(t[1] for t in times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--work", type=Path, default=Path("/tmp/mnemon-bench"))
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--no-vectors", action="store_true", help="skip the 768-dim variant")
    args = parser.parse_args(argv)

    from embed_server import EmbedServerProcess

    rows = []
    with EmbedServerProcess(dim=768) as server:
        for n in args.sizes:
            for vectors in (False,) if args.no_vectors else (False, True):
                data_dir = args.work / f"n{n}{'-vec' if vectors else ''}"
                marker = data_dir / "built"
                if args.rebuild or not marker.exists():
                    import shutil

                    shutil.rmtree(data_dir, ignore_errors=True)
                    t0 = time.perf_counter()
                    info = build_store(data_dir, n, vectors=vectors)
                    marker.write_text(f"{info['insights']} {info['edges']}\n")
                    print(f"built {data_dir} in {time.perf_counter() - t0:.1f}s: {info}", file=sys.stderr)
                n_ins, n_edges = (int(v) for v in marker.read_text().split())
                endpoint = server.url if vectors else CLOSED_ENDPOINT
                r_first, r_med, r_cpu = measure(data_dir, "recall", args.runs, endpoint)
                s_first, s_med, s_cpu = measure(data_dir, "search", args.runs, endpoint)
                target = TARGETS_MS.get((n, vectors))
                rows.append((n, n_edges / n_ins, vectors, r_first, r_med, r_cpu, s_first, s_med, s_cpu, target))
                print(f"n={n} vectors={vectors}: recall {r_med:.0f} ms, search {s_med:.0f} ms", file=sys.stderr)
    print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("| insights | edges/insight | 768-d vectors | recall first (ms) | recall median wall (ms) | recall median CPU (ms)"
          " | target (ms) | search first (ms) | search median wall (ms) | search median CPU (ms) |")  # fmt: skip
    print("|---:|---:|:---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, epi, vec, r_first, r_med, r_cpu, s_first, s_med, s_cpu, target in rows:
        ok = "" if target is None else (" ✓" if r_med <= target else " ✗")
        print(f"| {n:,} | {epi:.1f} | {'yes' if vec else 'no'} | {r_first:.0f} | {r_med:.0f}{ok} | {r_cpu:.0f} | "
              f"{target if target else '-'} | {s_first:.0f} | {s_med:.0f} | {s_cpu:.0f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
