"""Redis killed under load: each process paces to its share of the quota while it is away.

Four processes x four threads share one ``RedisCoordinator`` against the sandbox provider with
a GitHub-style window (``x-ratelimit-*`` headers, 403 with ``x-ratelimit-remaining: 0`` over
the limit). The run has three phases of ``--phase`` seconds: Redis up, Redis killed, Redis
restarted empty (same socket). Reported: the provider's rejections per phase as a share of the
requests it saw then, operations lost (started but never ended), and successes the provider
never served (fabricated). Targets: rejections while Redis is down at most 5 % of requests,
none lost, none fabricated.

Usage::

    python benchmarks/redis_outage.py [--processes 4] [--threads 4] [--phase 5] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import redis

from retrybudget import Policy, Retrier
from retrybudget.coordination import RedisCoordinator
from retrybudget.core.profiles import GITHUB
from retrybudget.integrations.httpx import RetryTransport
from retrybudget.sandbox import RUN_HEADER
from storm_services import sandbox

LIMIT, WINDOW = 40, 1
PROFILE = GITHUB.derive("github", reset_slack=0)  # the sandbox shares this machine's clock


def start_redis(directory: Path) -> subprocess.Popen[bytes]:
    """A redis-server on ``directory``/redis.sock, without persistence (it restarts empty)."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed")
    socket = directory / "redis.sock"
    socket.unlink(missing_ok=True)
    child = subprocess.Popen(
        [binary, "--port", "0", "--unixsocket", str(socket), "--unixsocketperm", "700",
         "--save", "", "--appendonly", "no", "--dir", str(directory)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ends = time.monotonic() + 10
    while time.monotonic() < ends:
        if _answers(socket):
            return child
        time.sleep(0.02)
    child.kill()
    raise SystemExit("redis-server did not start")


def _answers(socket: Path) -> bool:
    try:
        with redis.Redis(unix_socket_path=str(socket), socket_timeout=0.5) as client:
            return bool(client.ping())
    except redis.RedisError:
        return False


def _process(base_url: str, run_id: str, url: str, index: int, threads: int, seconds: float,
             barrier: Any, results: Any) -> None:
    coordinator = RedisCoordinator(url, prefix=f"outage:{run_id}:", socket_timeout=0.1,
                                   retry_interval=0.25)
    coordinator.admit("warm-up")
    policy = Policy(name="outage", max_attempts=3, deadline=10.0, profile=PROFILE)
    transport = RetryTransport(retrier=Retrier(policy=policy, coordinator=coordinator))
    ops: list[tuple[int, float, float, bool]] = []
    started: list[int] = []
    lock = threading.Lock()
    counter = iter(range(index * 10_000_000 + 1, (index + 1) * 10_000_000))
    limits = httpx.Limits(max_connections=threads + 2)
    with httpx.Client(transport=transport, timeout=5.0, limits=limits) as client:

        def worker() -> None:
            while time.time() < until:
                with lock:
                    tag = next(counter)
                    started.append(tag)
                start = time.time()
                answer = client.get(f"{base_url}/rentals/{tag}/availability",
                                    headers={RUN_HEADER: run_id})
                with lock:
                    ops.append((tag, start, time.time(), answer.status_code == 200))

        barrier.wait(60)
        until = time.time() + seconds  # the three phases, from when every process is ready
        pool = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join(until - time.time() + 30)
    results.put((ops, len(started), coordinator.stats().fallbacks))
    coordinator.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the three phases, print the table, write what was asked."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--phase", type=float, default=5.0, help="seconds per phase")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    run_id = "redis-outage"
    options = ["--limit", str(LIMIT), "--window", str(WINDOW), "--rentals", "100000000",
               "--style", "github", "--github-403"]
    with tempfile.TemporaryDirectory(prefix="outage-redis-") as tmp, sandbox(options) as provider:
        directory = Path(tmp)
        server = start_redis(directory)
        url = f"unix://{directory / 'redis.sock'}"
        context = multiprocessing.get_context("spawn")
        barrier = context.Barrier(args.processes + 1)
        results = context.Queue()
        children = [context.Process(target=_process, daemon=True,
                                    args=(provider.base_url, run_id, url, p, args.threads,
                                          3 * args.phase, barrier, results))
                    for p in range(args.processes)]
        for child in children:
            child.start()
        barrier.wait(60)
        begin = time.time()
        time.sleep(args.phase)
        killed = time.time()
        server.kill()
        server.wait(10)
        time.sleep(args.phase)
        restarted = time.time()
        server = start_redis(directory)
        outputs = [results.get(timeout=3 * args.phase + 120) for _ in children]
        for child in children:
            child.join(30)
        server.kill()
        server.wait(10)
        records = provider.stats(run_id)["requests"]
    ops = [op for out in outputs for op in out[0]]
    started = sum(out[1] for out in outputs)
    fallbacks = sum(out[2] for out in outputs)
    served = {r["path"] for r in records if r["status"] is not None and 200 <= r["status"] < 300}
    fabricated = sum(1 for tag, _, _, ok in ops
                     if ok and f"/rentals/{tag}/availability" not in served)
    phases = {"redis up": (begin, killed), "redis down": (killed, restarted),
              "restarted empty": (restarted, float("inf"))}
    rows = []
    for name, (low, high) in phases.items():
        seen = [r for r in records if low <= r["arrival"] < high]
        rejected = sum(1 for r in seen if r["status"] in (403, 429))
        rows.append({"phase": name, "requests": len(seen), "rejections": rejected,
                     "share": round(rejected / len(seen), 4) if seen else 0.0,
                     "rejected_at_s": [round(r["arrival"] - low, 3) for r in seen
                                       if r["status"] in (403, 429)]})
    first_window = [r for r in records if restarted <= r["arrival"] < restarted + WINDOW]
    print("| phase | requests | rejections | share |")
    print("|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row['phase']} | {row['requests']} | {row['rejections']} | "
              f"{100 * row['share']:.1f} % |")
    lost = started - len(ops)
    summary = {"operations": len(ops), "ok": sum(op[3] for op in ops), "lost": lost,
               "fabricated": fabricated, "fallbacks": fallbacks,
               "first_window_after_restart": {
                   "requests": len(first_window),
                   "rejections": sum(1 for r in first_window if r["status"] in (403, 429))}}
    print(json.dumps(summary))
    down = rows[1]
    targets = {"rejections while Redis is down <= 5 %": down["share"] <= 0.05,
               "none lost": lost == 0, "none fabricated": fabricated == 0}
    for label, ok in targets.items():
        print(f"- {label}: {'met' if ok else 'NOT MET'}")
    if args.json:
        args.json.write_text(json.dumps({"phases": rows, **summary, "targets": targets},
                                        indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
