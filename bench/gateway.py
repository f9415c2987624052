"""Latency of the memory gateway over loopback (issue 25) on a generated 1k store.

1. MCP ``recall`` and ``remember`` as one ``tools/call`` POST each over a keep-alive connection (what
   any Streamable HTTP client sends in stateless mode), and the same calls through the official SDK
   client session (its own overhead included): p50 / p90 in ms.
2. ``recall`` requests per second with 8 clients at once (threads, a connection each): the gateway
   with its command workers (``--workers``, default 2) against one with ``--workers 0`` (commands one at
   a time in the gateway's process, as before issue 25's concurrency work) on the same store, rounds
   alternating A B A B, medians and the median per-round ratio.
3. The remote CLI as a hook runs it: ``mnemon recall`` on a remote store through the warm server,
   paired against ``mnemon recall`` on the gateway's store itself through the warm server (A B A B,
   medians and the median per-pair ratio).

The gateway runs as its own process (``mnemon mcp serve --http --rate-limit 0``) with no embedder
(a closed port). Prints Markdown and the load average.

    python bench/gateway.py [--size 1000] [--calls 200] [--runs 15] [--rounds 7] [--workers 2] [--dir DIR]

Targets (issue 25): MCP recall p50 <= 30 ms, remember p50 <= 40 ms at 1k.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.served import CLOSED, build, entry_command, fmt_ratio, timed  # noqa: E402

QUERIES = ["why did we choose the cache", "deployment decisions last week", "who owns the billing service",
           "database migration plan", "preferences about code review"]
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "MCP-Protocol-Version": "2025-06-18"}


def env_for(runtime: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMON_")}
    env.update(XDG_RUNTIME_DIR=str(runtime), MNEMON_EMBED_ENDPOINT=CLOSED, MNEMON_MAX_INSIGHTS="10000000",
               PYTHONPATH=str(REPO))
    return env


def run(env: dict[str, str], *args: str, mode: str = "off") -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run([sys.executable, "-m", "mnemon", *args], capture_output=True,
                          env={**env, "MNEMON_SERVER": mode}, cwd=REPO)
    if proc.returncode != 0:
        raise SystemExit(f"mnemon {' '.join(args)} failed: {proc.stderr.decode(errors='replace')}")
    return proc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Client:
    def __init__(self, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = {**HEADERS, "Authorization": f"Bearer {token}"}

    def call(self, tool: str, arguments: dict[str, Any]) -> float:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": tool, "arguments": arguments}})
        t0 = time.perf_counter()
        self.conn.request("POST", "/mcp", body=body, headers=self.headers)
        response = self.conn.getresponse()
        reply = response.read()
        elapsed = (time.perf_counter() - t0) * 1000
        if response.status != 200 or json.loads(reply)["result"]["isError"]:
            raise SystemExit(f"{tool} failed: {response.status} {reply[:300]!r}")
        return elapsed


class Direct:
    """The same tool run in this process (``mnemon.mcp.run_tool`` through ``cli.run``, compiled kernels loaded)."""

    def __init__(self, data: Path) -> None:
        import kernels
        from mnemon import cli
        from mnemon.cli.state import GlobalOptions

        kernels.warmup()
        self.run = cli.run
        self.options = GlobalOptions(data_dir=str(data), store="default",
                                     environ={"MNEMON_EMBED_ENDPOINT": CLOSED, "MNEMON_MAX_INSIGHTS": "10000000"})

    def call(self, tool: str, arguments: dict[str, Any]) -> float:
        from mnemon import mcp

        t0 = time.perf_counter()
        text, is_error = mcp.run_tool(self.run, self.options, tool, arguments)
        elapsed = (time.perf_counter() - t0) * 1000
        if is_error:
            raise SystemExit(f"in-process {tool} failed: {text}")
        return elapsed


def start_gateway(data: Path, env: dict[str, str], log: Any, *flags: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mnemon", "--data-dir", str(data), "mcp", "serve", "--http",
                             "--port", str(port), "--rate-limit", "0", *flags], stdout=log, stderr=log,
                            env={**env, "MNEMON_SERVER": "off"}, cwd=REPO)
    for _ in range(1200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, port


def stop_gateway(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)


def eight_clients(port: int, token: str, per: int) -> tuple[float, list[float]]:
    """``recall`` from 8 clients at once, ``per`` calls each: (requests per second, per-call ms)."""
    done: list[float] = []

    def worker() -> None:
        c = Client(port, token)
        done.extend(c.call("recall", {"query": QUERIES[i % len(QUERIES)]}) for i in range(per))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(done) / (time.perf_counter() - t0), done


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def sdk_latency(url: str, token: str, calls: int) -> dict[str, list[float]]:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    out: dict[str, list[float]] = {"recall": [], "remember": []}
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120) as http, \
            streamable_http_client(url, http_client=http) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for i in range(calls):
            t0 = time.perf_counter()
            await session.call_tool("recall", {"query": QUERIES[i % len(QUERIES)]})
            out["recall"].append((time.perf_counter() - t0) * 1000)
        for i in range(calls // 2):
            t0 = time.perf_counter()
            await session.call_tool("remember", {"content": f"SDK benchmark note {time.time_ns()} {i} on caching"})
            out["remember"].append((time.perf_counter() - t0) * 1000)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=200, help="timed calls per tool")
    parser.add_argument("--runs", type=int, default=15, help="timed pairs of the remote CLI")
    parser.add_argument("--rounds", type=int, default=7, help="paired rounds of the 8-client recall load")
    parser.add_argument("--workers", type=int, default=2, help="the gateway's --workers")
    parser.add_argument("--dir", default=str(Path(tempfile.gettempdir()) / "mnemon-gateway-bench"))
    opts = parser.parse_args()
    root = Path(opts.dir)
    root.mkdir(parents=True, exist_ok=True)
    runtime = Path(tempfile.mkdtemp(prefix="mnemon-bench-rt-"))
    runtime.chmod(0o700)
    env = env_for(runtime)
    data = build(root, opts.size, env)
    token = json.loads(run(env, "--data-dir", str(data), "mcp", "token", "create", f"bench{time.time_ns()}",
                           "--store", "default").stdout)["token"]
    log = open(root / "gateway.log", "ab")  # noqa: SIM115
    gateway, port = start_gateway(data, env, log, "--workers", str(opts.workers))
    client_dir = root / f"client-{port}"
    serial = None
    try:
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; python "
              f"{sys.version.split()[0]}; store of {opts.size} insights; {opts.calls} calls per tool\n")
        serial, serial_port = start_gateway(data, env, log, "--workers", "0")
        client, one = Client(port, token), Client(serial_port, token)
        for q in QUERIES:  # warm-up: the engine's imports and the hot index
            client.call("recall", {"query": q})
            one.call("recall", {"query": q})
        # Each gateway call paired with the same command run in this process (cli.run, kernels loaded: the floor
        # under any transport), alternately, so the ratio holds while the shared machine's speed drifts.
        direct = Direct(data)
        recall, recall_direct, remember, remember_direct = [], [], [], []
        recall_one, remember_one = [], []  # the same through the --workers 0 gateway (no worker hop)
        for i in range(opts.calls):
            recall.append(client.call("recall", {"query": QUERIES[i % len(QUERIES)]}))
            recall_one.append(one.call("recall", {"query": QUERIES[i % len(QUERIES)]}))
            recall_direct.append(direct.call("recall", {"query": QUERIES[i % len(QUERIES)]}))
        for i in range(opts.calls // 2):
            remember.append(client.call("remember", {"content": f"Gateway benchmark note {time.time_ns()} {i}"}))
            remember_one.append(one.call("remember", {"content": f"Serial gateway note {time.time_ns()} {i}"}))
            remember_direct.append(direct.call("remember", {"content": f"In-process note {time.time_ns()} {i}"}))
        import anyio

        sdk = anyio.run(sdk_latency, f"http://127.0.0.1:{port}/mcp", token, opts.calls)
        print("| client | tool | calls | p50 ms | p90 ms | target p50 ms | gateway/in-process (median of pairs) |")
        print("|---|---|---:|---:|---:|---:|---:|")
        rows = [("one JSON POST per call", "recall", recall, 30, fmt_ratio(recall, recall_direct)),
                ("one JSON POST per call", "remember", remember, 40, fmt_ratio(remember, remember_direct)),
                ("the same, --workers 0", "recall", recall_one, 30, fmt_ratio(recall_one, recall_direct)),
                ("the same, --workers 0", "remember", remember_one, 40, fmt_ratio(remember_one, remember_direct)),
                ("MCP SDK ClientSession", "recall", sdk["recall"], 30, ""),
                ("MCP SDK ClientSession", "remember", sdk["remember"], 40, ""),
                ("in-process, no transport", "recall", recall_direct, 30, ""),
                ("in-process, no transport", "remember", remember_direct, 40, "")]
        for who, tool, values, target, ratio in rows:
            print(f"| {who} | {tool} | {len(values)} | {statistics.median(values):.1f} | {pct(values, 0.9):.1f} | "
                  f"{target} | {ratio} |")
        # 8 clients at once: the command workers against commands one at a time, rounds alternating
        per = max(10, opts.calls // 4)
        for p in (port, serial_port):  # warm-up round each
            eight_clients(p, token, 5)
        rates: dict[str, list[float]] = {"workers": [], "serial": []}
        calls: dict[str, list[float]] = {"workers": [], "serial": []}
        for _ in range(opts.rounds):
            for name, p in (("workers", port), ("serial", serial_port)):
                rate, done = eight_clients(p, token, per)
                rates[name].append(rate)
                calls[name].extend(done)
        print(f"\n| recall, 8 clients x {per} calls, {opts.rounds} rounds A B | requests/s median (min-max) | "
              "p50 ms | p90 ms | A/B (median of rounds) |")
        print("|---|---:|---:|---:|---:|")
        ratio = statistics.median(a / b for a, b in zip(rates["workers"], rates["serial"], strict=True))
        for name, label in (("workers", f"A: --workers {opts.workers}"), ("serial", "B: --workers 0 (one at a time)")):
            r, c = rates[name], calls[name]
            print(f"| {label} | {statistics.median(r):.1f} ({min(r):.1f}-{max(r):.1f}) | {statistics.median(c):.1f} | "
                  f"{pct(c, 0.9):.1f} | {f'{ratio:.2f}' if name == 'workers' else ''} |")
        print()
        # the remote CLI through the warm server, paired against the local warm CLI on the gateway's store
        run(env, "--data-dir", str(client_dir), "store", "create", "team", "--remote", f"http://127.0.0.1:{port}/mcp")
        run(env, "server", "start")
        python = entry_command("script")
        remote_env = {**env, "MNEMON_SERVER": "require", "MNEMON_TOKEN": token}
        local_env = {**env, "MNEMON_SERVER": "require"}
        remote_args = lambda i: ["--data-dir", str(client_dir), "--store", "team", "recall", QUERIES[i % 5]]  # noqa: E731
        local_args = lambda i: ["--data-dir", str(data), "recall", QUERIES[i % 5]]  # noqa: E731
        ra, rb = [], []
        for i in range(opts.runs + 1):  # A B A B ..., the first pair untimed (warms both paths)
            a = timed([*python, *remote_args(i)], remote_env)
            b = timed([*python, *local_args(i)], local_env)
            if i:
                ra.append(a)
                rb.append(b)
        print("| CLI recall through the warm server | median ms | remote/local (median of pairs) |")
        print("|---|---:|---:|")
        print(f"| remote store (through the gateway) | {statistics.median(ra):.1f} | {fmt_ratio(ra, rb)} |")
        print(f"| the gateway's store, local | {statistics.median(rb):.1f} | |")
        print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        subprocess.run([sys.executable, "-m", "mnemon", "server", "stop"], env={**env, "MNEMON_SERVER": "off"},
                       capture_output=True, cwd=REPO)
        stop_gateway(gateway)
        if serial is not None:
            stop_gateway(serial)
        log.close()
        shutil.rmtree(runtime, ignore_errors=True)
        shutil.rmtree(client_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
