"""``crabrec serve`` under load: dynamic batching against one request per ranker call, in one run.

    python benchmarks/bench_serve.py [--run runs/office-quick] [--method mor] [--requests 600] [--concurrency 1 8 32]
                                     [--rounds 3]

Starts the server on a free loopback port, as a separate process each time (``crabrec serve``): batched
(``--max-batch 64 --max-wait-ms 5``, the defaults) and unbatched (``--max-batch 1 --max-wait-ms 0``: every history is
its own beam search). At each concurrency, that many keep-alive connections (one asyncio load generator) send
single-history requests, the test histories of the run in order, until ``--requests`` have been answered (after a
warm-up of 32). A round runs both servers one after the other; ``--rounds`` repeats it, so that both see the same
drift of a shared machine. Prints each cell's median requests/s and p50/p99 latency over the rounds, and the median
of the rounds' throughput ratios with their range. Stops by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(port: int, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise SystemExit(f"bench_serve: the server exited with code {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.3)
    raise SystemExit("bench_serve: the server did not start")


async def _client(port: int, bodies: list[bytes], next_index, latencies: list[float], errors: list[bytes]) -> None:
    """One keep-alive connection sending requests (raw HTTP/1.1: the load generator stays light on the CPU)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while (i := next(next_index, None)) is not None:
            body = bodies[i % len(bodies)]
            head = "POST /recommend HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            start = time.perf_counter()
            writer.write(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
            status = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"(?i)content-length: *(\d+)", status).group(1))
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - start)
            if not status.startswith(b"HTTP/1.1 200"):
                errors.append(status.split(b"\r\n", 1)[0])
    finally:
        writer.close()


def load(port: int, bodies: list[bytes], concurrency: int, total: int) -> dict[str, float]:
    """``total`` requests over ``concurrency`` connections; requests/s and latency percentiles (ms)."""
    latencies: list[float] = []
    errors: list[bytes] = []

    async def run() -> float:
        counter = iter(range(total))
        start = time.perf_counter()
        await asyncio.gather(*(_client(port, bodies, counter, latencies, errors) for _ in range(concurrency)))
        return time.perf_counter() - start

    seconds = asyncio.run(run())
    if errors:
        raise SystemExit(f"bench_serve: {len(errors)} requests failed ({errors[0].decode(errors='replace')})")
    ms = np.asarray(latencies) * 1000
    return {"rps": total / seconds, "p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99))}


def batch_stats(port: int) -> dict[str, int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/stats")
    return next(iter(json.loads(conn.getresponse().read()).values()))


def serve(run: Path, method: str, extra: list[str], bodies: list[bytes], levels: list[int], total: int) -> list[dict]:
    port = free_port()
    cmd = [sys.executable, "-m", "crabrec", "serve", str(run), "--method", method, "--port", str(port), *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port, proc)
        load(port, bodies, 4, 32)  # warm-up
        out = []
        for c in levels:
            before = batch_stats(port)
            out.append(load(port, bodies, c, total))
            after = batch_stats(port)
            calls = max(after["calls"] - before["calls"], 1)
            out[-1]["batch"] = (after["histories"] - before["histories"]) / calls
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", type=Path, default=Path("runs/office-quick"))
    ap.add_argument("--method", default="mor")
    ap.add_argument("--requests", type=int, default=600)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3, help="batched + unbatched, this many times, interleaved")
    args = ap.parse_args()
    if not (args.run / "config.yaml").is_file():
        raise SystemExit(f"bench_serve: {args.run}: not a run directory; run `make run` first")
    from crabrec.runfiles import RunFiles

    files = RunFiles(args.run)
    ids = files.load_items()["item_ids"]
    test = files.load_splits().test
    bodies = [json.dumps({"history": [ids[i] for i in row], "k": args.k}).encode() for row in test.rows()[:2000]]
    forms = {
        "batched (max-batch 64, wait 5 ms)": [],
        "unbatched (max-batch 1)": ["--max-batch", "1", "--max-wait-ms", "0"],
    }
    rounds: dict[str, list[list[dict]]] = {name: [] for name in forms}
    for r in range(args.rounds):
        for name, extra in forms.items():
            rounds[name].append(serve(args.run, args.method, extra, bodies, args.concurrency, args.requests))
            print(f"round {r + 1}/{args.rounds}, {name}: " + ", ".join(
                f"c={c} {cell['rps']:.0f} req/s" for c, cell in zip(args.concurrency, rounds[name][-1])
            ), file=sys.stderr)  # fmt: skip
    cpus = os.cpu_count()
    print(
        f"{args.method} of {args.run}, the run's beam, k={args.k}, {args.requests} requests per cell, {cpus} CPUs, "
        f"median of {args.rounds} interleaved rounds"
    )
    print("| server | concurrency | requests/s | p50 ms | p99 ms | histories per ranker call |")
    print("|---|---|---|---|---|---|")
    for name, runs in rounds.items():
        for j, c in enumerate(args.concurrency):
            med = {key: float(np.median([run[j][key] for run in runs])) for key in ("rps", "p50", "p99", "batch")}
            print(f"| {name} | {c} | {med['rps']:.1f} | {med['p50']:.1f} | {med['p99']:.1f} | {med['batch']:.1f} |")
    batched, single = rounds.values()
    for j, c in enumerate(args.concurrency):
        ratios = [b[j]["rps"] / s[j]["rps"] for b, s in zip(batched, single)]
        print(
            f"concurrency {c}: batched / unbatched requests/s = {np.median(ratios):.2f}x "
            f"(rounds: {', '.join(f'{x:.2f}' for x in ratios)})"
        )


if __name__ == "__main__":
    main()
