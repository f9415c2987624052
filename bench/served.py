"""Whole-process latency of ``mnemon`` through the warm server against the in-process run (issue 10).

For each store size (insights made by ``bench/generate.py`` and imported once; kept in ``--dir``
for the next run) and each command (``--help``, ``status``, ``show``, ``remember --no-diff``,
``recall``, ``search``), runs alternating pairs of fresh processes: A = served
(``MNEMON_SERVER=require``, a server started for this benchmark in a private runtime directory),
B = in-process (``MNEMON_SERVER=off``), and, when ``MNEMON_BENCH_GO`` (or ``--go``) names the Go
binary, C = the Go program on the same store (A and C paired the same way). Timing is
``time.perf_counter`` around ``subprocess.run``; the table gives medians and the median of the
per-pair ratios (pairing keeps a ratio honest while a shared machine's speed drifts). No embedding
server (a closed port), warm page cache, one untimed warm-up pair per row. Then the hooks
(``prime``, ``remind``: the scripts ``mnemon setup --target claude-code`` installs) on the 1k
store, served against in-process. Prints Markdown and the load average.

    python bench/served.py [--sizes 30,1000,10000,100000] [--runs 15] [--dir /tmp/mnemon-served-bench]
        [--go /path/to/go/mnemon] [--no-hooks] [--entry script|module]

The timed command is the ``mnemon`` console script beside the interpreter (what a user and an
agent run), or ``python -m mnemon`` with ``--entry module`` (which pays for runpy's imports,
about 5 ms, before any mnemon code runs) or when no script is installed.

Targets (issue 10): served ``--help``, ``status``, ``show`` <= 20 ms; ``remember`` and ``recall``
<= 30 ms at 1k and <= 60 ms at 100k; within 1.5x of the Go binary at 30 insights, faster from 1k.
Building the 100k store takes a minute or two the first time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.generate import generate_draft, write_draft  # noqa: E402

CLOSED = "http://127.0.0.1:9"
TARGETS = {  # command -> {size: ms}; sizes between use the nearer bound
    "--help": {0: 20}, "status": {0: 20}, "show": {0: 20},
    "remember": {1000: 30, 100000: 60}, "recall": {1000: 30, 100000: 60},
}


def base_env(runtime: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
    env.update(XDG_RUNTIME_DIR=str(runtime), MNEMON_EMBED_ENDPOINT=CLOSED, MNEMON_MAX_INSIGHTS="10000000")
    return env


def entry_command(kind: str) -> list[str]:
    """How the timed processes start mnemon: the console script when installed, else ``-m``."""
    script = Path(sys.executable).with_name("mnemon")
    if kind == "script" and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "mnemon"]


def mnemon(env: dict[str, str], mode: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "mnemon", *args], capture_output=True,
                          env={**env, "MNEMON_SERVER": mode}, cwd=REPO)


def build(root: Path, n: int, env: dict[str, str]) -> Path:
    """A store of ``n`` generated insights under ``root/<n>`` (reused when already there)."""
    data = root / str(n)
    db = data / "data" / "default" / "mnemon.db"
    if db.exists():
        return data
    data.mkdir(parents=True, exist_ok=True)
    draft = root / f"draft-{n}.json"
    write_draft(generate_draft(n), draft)
    t0 = time.perf_counter()
    proc = mnemon(env, "off", "--data-dir", str(data), "import", str(draft))
    if proc.returncode != 0:
        raise SystemExit(f"import of {n} failed: {proc.stderr.decode(errors='replace')}")
    draft.unlink()
    print(f"built the {n}-insight store in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return data


def any_id(data: Path, env: dict[str, str]) -> str:
    out = mnemon(env, "off", "--data-dir", str(data), "search", "decision", "--limit", "1")
    rows = json.loads(out.stdout)
    results = rows if isinstance(rows, list) else rows.get("results", [])
    if not results:
        out = mnemon(env, "off", "--data-dir", str(data), "remember", "A decision to look up by id", "--no-diff")
        return json.loads(out.stdout)["id"]
    return results[0]["id"]


def commands(insight_id: str) -> list[tuple[str, callable]]:  # type: ignore[valid-type]
    return [
        ("--help", lambda i: ["--help"]),
        ("status", lambda i: ["status"]),
        ("show", lambda i: ["show", insight_id]),
        ("remember", lambda i: ["remember", "--no-diff", f"Benchmark note {time.time_ns()} {i} about caching"]),
        ("recall", lambda i: ["recall", "why did we choose the cache"]),
        ("search", lambda i: ["search", "cache latency"]),
    ]


def timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO)
    elapsed = (time.perf_counter() - t0) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.decode(errors='replace')}")
    return elapsed


def pairs(a: tuple[list[str], dict[str, str]], b: tuple[list[str], dict[str, str]], args_for, runs: int) -> tuple[
        list[float], list[float]]:
    """``runs`` alternating A/B runs after one untimed warm-up pair."""
    ta, tb = [], []
    for i in range(runs + 1):
        x = timed([*a[0], *args_for(2 * i)], a[1])
        y = timed([*b[0], *args_for(2 * i + 1)], b[1])
        if i:
            ta.append(x)
            tb.append(y)
    return ta, tb


def target(name: str, size: int) -> str:
    bounds = TARGETS.get(name)
    if not bounds:
        return ""
    key = min(bounds, key=lambda s: abs(s - size)) if len(bounds) > 1 else next(iter(bounds))
    return f"<= {bounds[key]}"


def fmt_ratio(ta: list[float], tb: list[float]) -> str:
    return f"{statistics.median(x / y for x, y in zip(ta, tb)):.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="30,1000,10000,100000", help="store sizes (comma-separated)")
    parser.add_argument("--runs", type=int, default=15, help="timed pairs per row")
    parser.add_argument("--dir", default=str(Path(tempfile.gettempdir()) / "mnemon-served-bench"),
                        help="where the stores are kept between runs")
    parser.add_argument("--go", default=os.environ.get("MNEMON_BENCH_GO", ""), help="the Go mnemon binary")
    parser.add_argument("--no-hooks", action="store_true", help="skip the hooks' timing")
    parser.add_argument("--entry", choices=("script", "module"), default="script",
                        help="time the console script (default) or python -m mnemon")
    opts = parser.parse_args()
    root = Path(opts.dir)
    root.mkdir(parents=True, exist_ok=True)
    runtime = Path(tempfile.mkdtemp(prefix="mnemon-bench-rt-"))
    runtime.chmod(0o700)
    env = base_env(runtime)
    sizes = [int(s) for s in opts.sizes.split(",") if s.strip()]
    go = opts.go if opts.go and os.access(opts.go, os.X_OK) else ""
    python = entry_command(opts.entry)
    served_env, off_env = {**env, "MNEMON_SERVER": "require"}, {**env, "MNEMON_SERVER": "off"}
    try:
        stores = {n: build(root, n, env) for n in sizes}
        started = mnemon(env, "off", "server", "start")
        if started.returncode != 0:
            raise SystemExit(f"server start failed: {started.stderr.decode(errors='replace')}")
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; python {sys.version.split()[0]}; "
              f"{opts.runs} pairs per row; entry: {' '.join(python)}; Go binary: {go or 'none (set MNEMON_BENCH_GO)'}\n")
        head = "| insights | command | served ms | in-process ms | served/in-process | target ms |"
        rule = "|---:|---|---:|---:|---:|---:|"
        if go:
            head += " Go ms | served/Go |"
            rule += "---:|---:|"
        print(head)
        print(rule)
        # the floor under every served figure: a bare interpreter start (site and .pth files included)
        ta, tb = pairs(([sys.executable, "-c", "pass"], env), ([sys.executable, "-c", "pass"], env), lambda i: [],
                       opts.runs)
        print(f"| - | python -c pass | {statistics.median(ta):.1f} | {statistics.median(tb):.1f} | "
              f"{fmt_ratio(ta, tb)} | |")
        for n, data in stores.items():
            insight_id = any_id(data, env)
            for name, args_for in commands(insight_id):
                with_dir = lambda i, f=args_for, d=data: ["--data-dir", str(d), *f(i)]  # noqa: E731
                ta, tb = pairs((python, served_env), (python, off_env), with_dir, opts.runs)
                row = (f"| {n} | {name} | {statistics.median(ta):.1f} | {statistics.median(tb):.1f} | "
                       f"{fmt_ratio(ta, tb)} | {target(name, n)} |")
                if go:
                    ga, gc = pairs((python, served_env), ([go], env), with_dir, opts.runs)
                    row += f" {statistics.median(gc):.1f} | {fmt_ratio(ga, gc)} |"
                print(row, flush=True)
        if not opts.no_hooks:
            hooks(root, env, opts.runs)
        print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        mnemon(env, "off", "server", "stop")
        shutil.rmtree(runtime, ignore_errors=True)
    return 0


def hooks(root: Path, env: dict[str, str], runs: int) -> None:
    """The session-start and prompt-submit hooks on the 1k store, served against in-process."""
    data = build(root, 1000, env)
    home = Path(tempfile.mkdtemp(prefix="mnemon-bench-home-"))
    try:
        project = home / "project"
        project.mkdir()
        setup_env = {**env, "HOME": str(home), "MNEMON_SERVER": "off"}
        proc = subprocess.run([sys.executable, "-m", "mnemon", "--data-dir", str(data), "setup", "--target",
                               "claude-code", "--yes"], capture_output=True, env=setup_env, cwd=project)
        if proc.returncode != 0:
            raise SystemExit(f"setup failed: {proc.stderr.decode(errors='replace')}")
        scripts = {p.stem: p for p in project.rglob("*.sh") if p.stem in ("prime", "user_prompt", "remind")}
        print("\n| hook (1k store) | served ms | in-process ms | served/in-process |\n|---|---:|---:|---:|")
        for name, script in sorted(scripts.items()):
            hook_env = {"PATH": env.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
                        "XDG_RUNTIME_DIR": env["XDG_RUNTIME_DIR"]}
            ta, tb = [], []
            for i in range(runs + 1):
                for mode, out in (("require", ta), ("off", tb)):
                    t0 = time.perf_counter()
                    subprocess.run([str(script)], input=b'{"session_id":"bench"}', capture_output=True,
                                   env={**hook_env, "MNEMON_SERVER": mode}, cwd="/")
                    if i:
                        out.append((time.perf_counter() - t0) * 1000)
            print(f"| {name} | {statistics.median(ta):.1f} | {statistics.median(tb):.1f} | {fmt_ratio(ta, tb)} |")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
