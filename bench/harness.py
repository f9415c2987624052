"""Whole-process benchmark harness: stores of 10k, 100k (and opt-in 1M) insights, built by ``import``.

Owns the one documented benchmark command (see ``bench/README.md``):

    python bench/harness.py --sizes 10k,100k [--with-1m] [--runs 5] [--embed] [--out bench/out]

For each size it generates a seeded draft (``bench/generate.py``), imports it into a fresh data
dir as a whole process (import rate = insights / wall seconds), then times whole CLI processes,
as an agent hook starts them, and reports the median of ``--runs``: ``remember``, ``recall``,
``search``, ``status``. With ``--embed`` a local embedding server (``tests/embed_server.py``,
768-dim) serves the import and the recall query. A command the CLI does not have yet (e.g.
``recall`` while it is being built) is reported as ``missing``, never a crash. The machine's
memory bandwidth comes from ``bench/bandwidth.py`` when present. Output: ``results.md`` (a
Markdown table) and ``latency.png`` (latency against store size; needs the ``bench`` extra,
matplotlib) in ``--out`` (gitignored ``bench/out/`` by default).
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

from bench.generate import generate_draft, write_draft  # noqa: E402

COMMANDS = ("remember", "recall", "search", "status")
QUERIES = ("why did we choose Qdrant for the billing service", "Kafka retries in PaymentGateway")


def _size(text: str) -> int:
    text = text.strip().lower()
    factor = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("km")) * factor)


def _run(args: list[str], env: dict[str, str], timeout: float = 3600) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mnemon", *args], capture_output=True, env=env, timeout=timeout)
    return time.perf_counter() - start, proc


def _available(env: dict[str, str]) -> set[str]:
    _, proc = _run(["--help"], env)
    text = proc.stdout.decode("utf-8", "replace")
    return {c for c in COMMANDS if f" {c} " in text or f"│ {c}" in text or f"\n  {c}" in text}


def _median_ms(args_for_run: Any, env: dict[str, str], runs: int) -> tuple[float | None, str]:
    times: list[float] = []
    for k in range(runs):
        seconds, proc = _run(args_for_run(k), env)
        if proc.returncode != 0:
            return None, proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:][0] if proc.stderr else "failed"
        times.append(seconds * 1000)
    return statistics.median(times), ""


def bench_size(n: int, out: Path, runs: int, embed_url: str | None) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["MNEMON_MAX_INSIGHTS"] = "0"  # measure the store as built, no pruning
    env.setdefault("MNEMON_SERVER", "off")  # whole in-process runs; bench/served.py measures the warm server
    env["MNEMON_EMBED_ENDPOINT"] = embed_url or "http://127.0.0.1:9"  # closed port: embedding-free
    tag = f"{n}{'-embed' if embed_url else ''}"
    draft_path = out / f"drafts-{n}.json"
    if not draft_path.exists():
        write_draft(generate_draft(n, seed=1), draft_path)
    data_dir = out / f"store-{tag}"
    if data_dir.exists():
        import shutil

        shutil.rmtree(data_dir)
    seconds, proc = _run(["--data-dir", str(data_dir), "import", str(draft_path)], env)
    if proc.returncode != 0:
        raise SystemExit(f"import of {n} failed: {proc.stderr.decode()}")
    report = json.loads(proc.stdout)
    row: dict[str, Any] = {"size": n, "embed": bool(embed_url), "import_s": seconds,
                           "import_rate": report["imported"] / seconds}
    _, status = _run(["--data-dir", str(data_dir), "status"], env)
    row["edges"] = json.loads(status.stdout)["edge_count"]
    base = ["--data-dir", str(data_dir)]
    have = _available(env)
    plans = {
        "remember": lambda k: [*base, "remember", "--no-diff", f"Bench note {k} {time.time_ns()} about Kafka in OrderService"],
        "recall": lambda k: [*base, "recall", QUERIES[k % len(QUERIES)]],
        "search": lambda k: [*base, "search", QUERIES[k % len(QUERIES)]],
        "status": lambda k: [*base, "status"],
    }
    for name in COMMANDS:
        if name not in have:
            row[name] = None
            row[f"{name}_note"] = "missing"
            continue
        _median_ms(plans[name], env, 1)  # warm the page cache and numba's cache once
        row[name], row[f"{name}_note"] = _median_ms(plans[name], env, runs)
    return row


def _bandwidth() -> str:
    try:
        from bench.bandwidth import measure_bandwidth
    except ImportError:
        return "not measured (bench/bandwidth.py missing)"
    result = measure_bandwidth(mib=512, repeats=7)
    return ", ".join(f"{k} {v:.1f}" for k, v in result.items())


def _cell(row: dict[str, Any], name: str) -> str:
    value = row.get(name)
    return row.get(f"{name}_note") or "?" if value is None else f"{value:.0f}"


def write_report(rows: list[dict[str, Any]], out: Path, bandwidth: str) -> Path:
    lines = [
        "# mnemon whole-process benchmark",
        "",
        f"Machine memory bandwidth (bench/bandwidth.py): {bandwidth}",
        "",
        "| insights | embeddings | edge rows | import s | import insights/s | remember ms | recall ms | search ms | status ms |",
        "|---:|:---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['size']:,} | {'yes' if r['embed'] else 'no'} | {r['edges']:,} | {r['import_s']:.1f} | "
            f"{r['import_rate']:.0f} | {_cell(r, 'remember')} | {_cell(r, 'recall')} | {_cell(r, 'search')} | "
            f"{_cell(r, 'status')} |"
        )
    path = out / "results.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def plot(rows: list[dict[str, Any]], out: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: pip install -e '.[bench]' for the plot", file=sys.stderr)
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for embed in (False, True):
        subset = [r for r in rows if r["embed"] == embed]
        for name in COMMANDS:
            points = [(r["size"], r[name]) for r in subset if r.get(name) is not None]
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, ys, marker="o", label=f"{name}{' (embed)' if embed else ''}")
    ax.set_xscale("log")
    ax.set_xlabel("insights in store")
    ax.set_ylabel("whole-process latency, median ms")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    path = out / "latency.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="mnemon whole-process benchmark")
    parser.add_argument("--sizes", default="10k,100k")
    parser.add_argument("--with-1m", action="store_true", help="also build and measure a 1M store (slow)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--embed", action="store_true", help="also measure with a local 768-dim embedding server")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args(argv)
    sizes = [_size(s) for s in args.sizes.split(",") if s.strip()] + ([1_000_000] if args.with_1m else [])
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for n in sizes:
        rows.append(bench_size(n, args.out, args.runs, None))
        print(json.dumps(rows[-1]), file=sys.stderr)
    if args.embed:
        from tests.embed_server import EmbedServerProcess

        server = EmbedServerProcess(dim=768)
        try:
            for n in sizes:
                rows.append(bench_size(n, args.out, args.runs, server.url))
                print(json.dumps(rows[-1]), file=sys.stderr)
        finally:
            server.close()
    report = write_report(rows, args.out, _bandwidth())
    plot(rows, args.out)
    print(report.read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
