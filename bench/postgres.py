"""PostgreSQL stores beside SQLite, whole process (issue 11).

    python bench/postgres.py --sizes 10k,100k [--runs 5] [--url postgresql://...] [--out bench/out]
        [--edges-per-insight E] [--import-only]

For each size: a seeded draft (``bench/generate.py``) is imported as a whole process into a SQLite
store and into a PostgreSQL store (the import rate: insights / wall seconds), then ``remember``,
``recall``, ``search`` and ``status`` are timed as whole processes on both (median of ``--runs``,
after one warm-up run). Then the catch-up: a second data directory (another "machine") imports
1, 100 and 10,000 insights into the same PostgreSQL store, then runs 1 and 10 ``remember``s, and
after each step the first directory's next ``recall`` (which catches its local hot index up with
the foreign writes) is timed against the ``recall`` after it (current). Without ``--url`` a private throwaway cluster is started from the
server binaries (``tests/pg_cluster.py``: Unix socket in a temp dir, fsync off, as ``nobody`` when
run as root) and stopped at the end. No embedding server: token mode, as in the hooks' default.
``--edges-per-insight`` sets the draft's explicit edges (the generator's default, 35 per insight, makes
the dense graphs of the recall benchmarks; agents' drafts carry few); ``--import-only`` measures the
two import rates and nothing else.
Output: Markdown tables (each time "wall ms / CPU ms", medians; CPU = user + system of the
process, steadier than wall time on a shared machine) on stdout and in ``--out/postgres.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.generate import DEFAULT_EDGES_PER_INSIGHT, generate_draft, write_draft  # noqa: E402

QUERIES = ("why did we choose Qdrant for the billing service", "Kafka retries in PaymentGateway")
FOREIGN = (1, 100, 10_000)
FOREIGN_REMEMBERS = (1, 10)


def _size(text: str) -> int:
    text = text.strip().lower()
    return int(float(text.rstrip("km")) * {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1))


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
    env.update(PYTHONPATH=str(ROOT), MNEMON_MAX_INSIGHTS="0", MNEMON_SERVER="off",
               MNEMON_EMBED_ENDPOINT="http://127.0.0.1:9")
    return env


LAST_CPU = [0.0]  # user + system seconds of the last run (steadier than wall time on a busy machine)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(args: list[str], timeout: float = 7200) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mnemon", *args], capture_output=True, env=_env(), timeout=timeout)
    seconds = time.perf_counter() - start
    LAST_CPU[0] = _children_cpu() - cpu
    if proc.returncode != 0:
        raise SystemExit(f"mnemon {' '.join(args[:4])} failed: {proc.stderr.decode()[-2000:]}")
    return seconds, proc


def _median_ms(plan: Any, runs: int) -> tuple[float, float]:
    """Median wall and median CPU (user + system) milliseconds of ``runs`` whole-process runs."""
    _run(plan(-1))  # warm the page cache (and the server's) once
    walls, cpus = [], []
    for k in range(runs):
        walls.append(_run(plan(k))[0] * 1000)
        cpus.append(LAST_CPU[0] * 1000)
    return statistics.median(walls), statistics.median(cpus)


def _commands(base: list[str], runs: int) -> dict[str, tuple[float, float]]:
    plans = {
        "remember": lambda k: [*base, "remember", "--no-diff", f"Bench note {k} {time.time_ns()} about Kafka in OrderService"],
        "recall": lambda k: [*base, "recall", QUERIES[k % len(QUERIES)]],
        "search": lambda k: [*base, "search", QUERIES[k % len(QUERIES)]],
        "status": lambda k: [*base, "status"],
    }
    return {name: _median_ms(plan, runs) for name, plan in plans.items()}


def _import(base: list[str], draft: Path) -> float:
    seconds, proc = _run([*base, "import", str(draft)])
    return json.loads(proc.stdout)["imported"] / seconds


def _catch_up(url_db: str, machine_a: Path, work: Path, size: int) -> dict[tuple[str, int], tuple[float, float, float, float]]:
    """(wall, CPU) ms of the first recall after k foreign writes (imports of k insights, then k
    ``remember``s) and (wall, CPU) of the recalls after it."""
    machine_b = work / f"machine-b-{size}"  # one per size: a run of several sizes creates each once
    _run(["--data-dir", str(machine_b), "store", "create", "team", "--postgres", url_db])
    base = ["--data-dir", str(machine_a), "--store", "team", "recall", QUERIES[0]]
    other = ["--data-dir", str(machine_b), "--store", "team"]
    out: dict[tuple[str, int], tuple[float, float, float, float]] = {}

    def timed(key: tuple[str, int]) -> None:
        first = _run(base)[0] * 1000
        first_cpu = LAST_CPU[0] * 1000
        after, after_cpu = _median_ms(lambda _k, argv=base: argv, 3)  # (its warm-up run is one more recall)
        out[key] = (first, first_cpu, after, after_cpu)

    for k, count in enumerate(FOREIGN):
        draft = work / f"foreign-{count}.json"
        write_draft(generate_draft(count, seed=100 + k + size), draft)  # other seeds: other contents
        _run([*other, "import", str(draft)])
        timed(("import", count))
    for count in FOREIGN_REMEMBERS:
        for j in range(count):
            _run([*other, "remember", f"Foreign note {count}-{j} {time.time_ns()} about Kafka in OrderService"])
        timed(("remember", count))
    return out


def _database(admin_url: str) -> str:
    import psycopg
    from psycopg import sql

    name = f"bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return psycopg.conninfo.make_conninfo(admin_url, dbname=name)


def bench_size(n: int, admin_url: str, work: Path, runs: int, edges_per_insight: float = DEFAULT_EDGES_PER_INSIGHT,
               import_only: bool = False) -> dict[str, Any]:  # fmt: skip
    draft = work / f"draft-{n}.json"
    write_draft(generate_draft(n, seed=1, edges_per_insight=edges_per_insight), draft)
    lite, pg = work / f"sqlite-{n}", work / f"pg-{n}"
    url = _database(admin_url)
    _run(["--data-dir", str(pg), "store", "create", "team", "--postgres", url])
    row: dict[str, Any] = {"size": n}
    row["import_sqlite"] = _import(["--data-dir", str(lite)], draft)
    row["import_pg"] = _import(["--data-dir", str(pg), "--store", "team"], draft)
    if import_only:
        return row
    row["sqlite"] = _commands(["--data-dir", str(lite)], runs)
    row["pg"] = _commands(["--data-dir", str(pg), "--store", "team"], runs)
    row["catch_up"] = _catch_up(url, pg, work, n)
    return row


def report(rows: list[dict[str, Any]]) -> str:
    """Markdown tables; each time cell is "wall ms / CPU ms" (medians)."""
    if all("sqlite" not in r for r in rows):  # --import-only
        lines = ["| store | SQLite import (insights/s) | PostgreSQL import (insights/s) |", "|---|---:|---:|"]
        lines += [f"| {r['size']:,} | {r['import_sqlite']:,.0f} | {r['import_pg']:,.0f} |" for r in rows]
        return "\n".join(lines)
    lines = [
        "| store | backend | import (insights/s) | remember | recall | search | status |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        for key, label in (("sqlite", "SQLite"), ("pg", "PostgreSQL")):
            t = r[key]
            cells = " | ".join(f"{t[c][0]:.0f} / {t[c][1]:.0f}" for c in ("remember", "recall", "search", "status"))
            lines.append(f"| {r['size']:,} | {label} | {r['import_' + key]:,.0f} | {cells} |")
    lines += [
        "",
        "| store | foreign writes | first recall (catch-up) | next recall | catch-up cost (wall / CPU) |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        for (kind, count), (first, first_cpu, after, after_cpu) in r["catch_up"].items():
            what = f"import of {count:,}" if kind == "import" else f"{count:,} remember" + ("s" if count > 1 else "")
            lines.append(
                f"| {r['size']:,} | {what} | {first:.0f} / {first_cpu:.0f} | {after:.0f} / {after_cpu:.0f} "
                f"| {first - after:+.0f} / {first_cpu - after_cpu:+.0f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10k,100k")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--url", default="", help="a PostgreSQL server that may create databases (default: a private cluster)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--edges-per-insight", type=float, default=DEFAULT_EDGES_PER_INSIGHT)
    parser.add_argument("--import-only", action="store_true", help="the two import rates only")
    args = parser.parse_args(argv)
    cluster = None
    admin_url = args.url
    if not admin_url:
        from tests.pg_cluster import Cluster, find_binaries

        bindir = find_binaries()
        if bindir is None:
            raise SystemExit("no PostgreSQL server binaries (initdb, pg_ctl): pass --url")
        cluster = Cluster(bindir)
        cluster.start()
        admin_url = cluster.url
    work = Path(tempfile.mkdtemp(prefix="mnemon-bench-pg-"))
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    try:
        for size in args.sizes.split(","):
            rows.append(bench_size(_size(size), admin_url, work, args.runs, args.edges_per_insight, args.import_only))
            text = report(rows)  # written after every size: a long run keeps what it measured
            (args.out / "postgres.md").write_text(text + "\n", encoding="utf-8")
            print(text, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if cluster is not None:
            cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
