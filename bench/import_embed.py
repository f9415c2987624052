"""Import drafts with a local embedding server, as a whole process: wall time, the server's share, peak RSS.

Owns the "import with embeddings" figure of ``bench/README.md`` (issue 13's target: 100k drafts in
at most 10 minutes and at most 2 GB of memory beyond the vector file):

    python bench/import_embed.py --n 100000 --out /tmp/mnemon-import [--dim 768] [--edges-per-insight 35]

It generates the seeded draft (``bench/generate.py``) unless present, starts
``tests/embed_server.py`` (deterministic HashEmbedder vectors over HTTP on 127.0.0.1), runs
``mnemon import`` in a fresh data dir and prints one JSON line: wall seconds, the server
process's CPU seconds and their share of the wall time (the server is single-threaded, so that
is the time the import spent waiting for vectors, at most), the import's peak RSS, the vector
file's size and the peak RSS beyond it (file-backed pages of the memory-mapped matrix count in
RSS), and the semantic edges written.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.generate import DEFAULT_EDGES_PER_INSIGHT, generate_draft, write_draft  # noqa: E402


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a live process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _edge_counts(db: Path) -> dict[str, int]:
    import apsw

    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return {str(t): int(n) for t, n in conn.execute("SELECT edge_type, COUNT(*) FROM edges GROUP BY edge_type")}
    finally:
        conn.close()


def _vector_file(data_dir: Path) -> Path | None:
    found = sorted(data_dir.rglob("mnemon.db.vec")) or sorted(data_dir.rglob("vec"))
    return found[0] if found else None


def run(n: int, out: Path, dim: int, edges_per_insight: float) -> dict[str, object]:
    from tests.embed_server import EmbedServerProcess

    out.mkdir(parents=True, exist_ok=True)
    draft = out / f"drafts-{n}-e{edges_per_insight:g}.json"
    if not draft.exists():
        write_draft(generate_draft(n, seed=1, edges_per_insight=edges_per_insight), draft)
    data_dir = out / f"store-{n}-embed"
    if data_dir.exists():
        import shutil

        shutil.rmtree(data_dir)
    with EmbedServerProcess(dim=dim) as server:
        # MNEMON_SERVER=off: the import runs in this child, so its peak RSS and wall are the import's
        env = dict(os.environ, MNEMON_MAX_INSIGHTS="0", MNEMON_EMBED_ENDPOINT=server.url, MNEMON_SERVER="off")
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        server_pid = server._process.pid
        cpu_before = _cpu_seconds(server_pid)
        started = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "mnemon", "--data-dir", str(data_dir), "import", str(draft)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        stdout, stderr = proc.communicate()
        wall = time.perf_counter() - started
        server_cpu = _cpu_seconds(server_pid) - cpu_before
    import resource

    peak_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    if proc.returncode != 0:
        raise SystemExit(f"import failed: {stderr.decode('utf-8', 'replace')[-2000:]}")
    report = json.loads(stdout)
    vec = _vector_file(data_dir)
    vec_bytes = vec.stat().st_size if vec else 0
    db = next(data_dir.rglob("mnemon.db"))
    return {
        "n": n, "dim": dim, "imported": report["imported"], "wall_s": round(wall, 1),
        "insights_per_s": round(report["imported"] / wall, 1),
        "server_cpu_s": round(server_cpu, 1), "server_share": round(server_cpu / wall, 3),
        "peak_rss_mb": round(peak_rss / 2**20), "vector_file_mb": round(vec_bytes / 2**20),
        "peak_rss_beyond_vectors_mb": round((peak_rss - vec_bytes) / 2**20),
        "edges": _edge_counts(db),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="mnemon import with a local embedding server")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--edges-per-insight", type=float, default=DEFAULT_EDGES_PER_INSIGHT)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.n, args.out, args.dim, args.edges_per_insight)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
