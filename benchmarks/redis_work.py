"""Redis work per coordinated request on the success path.

N sequential requests through ``RetryTransport`` with ``background(profile="github")`` and a
:class:`~retrybudget.RedisCoordinator` over an inner transport that answers a canned GitHub 200
(the five quota headers, far from the quota), against a private ``redis-server`` on a unix
socket started by this script. Reported per request, from ``INFO commandstats`` deltas: round
trips (the commands the client sent: ``EVALSHA``/``EVAL``/``SCRIPT``), Redis commands (every
command the scripts ran) by name, and the wall and CPU microseconds of this process; beside
them, the same requests with a ``MemoryCoordinator`` (the peer: no network, no Redis).

Usage::

    python benchmarks/redis_work.py [--requests 2000]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import redis

from retrybudget import MemoryCoordinator, Retrier, background
from retrybudget.coordination import RedisCoordinator
from retrybudget.integrations.httpx import RetryTransport

sys.path.insert(0, str(Path(__file__).resolve().parent))
from transport_overhead import CANNED_URL, CannedTransport

CLIENT = ("eval", "evalsha", "script")
"""What a client sends itself: each is one round trip here (sequential, no pipeline)."""
CONNECTION = ("hello", "client", "ping", "select", "auth")
"""A connection's set-up: neither a round trip of a request nor run by a script."""


@contextlib.contextmanager
def private_redis() -> Iterator[Path]:
    """A redis-server on a unix socket in a temporary directory, killed at the end."""
    server = shutil.which("redis-server")
    if server is None:
        raise SystemExit("redis-server is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        sock = Path(tmp) / "redis.sock"
        proc = subprocess.Popen(
            [server, "--port", "0", "--unixsocket", str(sock), "--save", "",
             "--appendonly", "no", "--dir", tmp],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            client = redis.Redis(unix_socket_path=str(sock))
            for _ in range(250):
                with contextlib.suppress(redis.RedisError, OSError):
                    if client.ping():
                        break
                time.sleep(0.02)
            client.close()
            yield sock
        finally:
            proc.kill()
            proc.wait(5)


def stats(sock: Path) -> dict[str, int]:
    """Calls so far per command name (INFO commandstats)."""
    client = redis.Redis(unix_socket_path=str(sock))
    raw = client.info("commandstats")
    client.close()
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in raw.items()}


def timed(transport: RetryTransport, n: int) -> tuple[float, float]:
    """Microseconds of wall and CPU time per request over ``n`` sequential requests."""
    wall, cpu = time.perf_counter_ns(), time.process_time_ns()
    for _ in range(n):
        response = transport.handle_request(httpx.Request("GET", CANNED_URL))
        if response.status_code != 200:
            raise SystemExit(f"unexpected status {response.status_code}")
    return ((time.perf_counter_ns() - wall) / n / 1000,
            (time.process_time_ns() - cpu) / n / 1000)


def main(argv: list[str] | None = None) -> int:
    """Run the requests and print the figures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args(argv)
    n = args.requests
    with private_redis() as sock:
        coordinator = RedisCoordinator(f"unix://{sock}", prefix="bench:")
        transport = RetryTransport(CannedTransport(), retrier=Retrier(
            policy=background(profile="github"), coordinator=coordinator))
        for _ in range(50):  # warm up: connect, load the scripts, the key's first window
            transport.handle_request(httpx.Request("GET", CANNED_URL))
        before = stats(sock)
        wall, cpu = timed(transport, n)
        coordinator.close()
        after = stats(sock)
    peer = RetryTransport(CannedTransport(), retrier=Retrier(
        policy=background(profile="github"), coordinator=MemoryCoordinator()))
    timed(peer, 50)
    peer_wall, peer_cpu = timed(peer, n)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    delta = {k: v for k, v in delta.items()
             if v > 0 and k.split("|")[0] not in ("info", *CONNECTION)}
    trips = sum(v for k, v in delta.items() if k.split("|")[0] in CLIENT)
    inside = {k: v for k, v in delta.items() if k.split("|")[0] not in CLIENT}
    print(f"{n} sequential successful requests, github profile, RedisCoordinator")
    print(f"round trips per request:     {trips / n:.3f}")
    print(f"redis commands per request:  {sum(inside.values()) / n:.3f} (inside scripts)")
    for name, v in sorted(inside.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<24} {v / n:.3f}")
    print(f"per request, wall / CPU:     {wall:.0f} / {cpu:.0f} us"
          f" (MemoryCoordinator: {peer_wall:.0f} / {peer_cpu:.0f} us)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
