"""Load through the reference gateway: its overhead over the provider, and an outage.

Runs the sandbox provider and the gateway as their own processes (``python -m
retrybudget.sandbox`` / ``python -m retrybudget.gateway``, loopback) and drives them from
this one with an httpx client:

1. healthy: the same number of lookups straight to the sandbox and through the gateway,
   in alternating blocks at the same concurrency, then one at a time; lookups per second,
   p50 and p99 latency, and the gateway's overhead ratios from this one run;
2. outage: a second sandbox answers every request 503 during a window; paced lookups run
   through a fresh gateway before, during and after it. Reported for the window: p99
   latency (the gateway keeps answering inside its 2 s deadline), the share of 503
   answers, lookups answered with 0 attempts (breaker open), and the provider requests.

Bounded in count and time (about 35 s). Run: python benchmarks/gateway_load.py
[--lookups 2000] [--concurrency 20] [--sequential 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from retrybudget import SYSTEM_CLOCK

CLOCK = SYSTEM_CLOCK
OUTAGE = (3.0, 8.0)
"""The outage window, in seconds after the outage sandbox started."""
OUTAGE_RUN_S = 11.0
PACE_S = 0.02
"""Each outage worker starts a lookup at most this often."""


@dataclass(frozen=True, slots=True)
class Sample:
    """One lookup: when it started (seconds since the phase began), how long, what came back."""

    start: float
    latency: float
    status: int
    attempts: int


@contextmanager
def process(args: Sequence[str], pids: list[int] | None = None,
            stderr: Path | None = None) -> Iterator[tuple[str, float]]:
    """Run ``python -m ...args`` until its "listening on URL" line; yield the URL and the time.

    ``pids``, when given, receives the process id (to watch the process from outside);
    ``stderr``, when given, receives the process's logs (else they are dropped).
    """
    with (stderr.open("w") if stderr is not None else open(os.devnull, "w")) as err:
        proc = subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.PIPE,
                                stderr=err, text=True)  # the child keeps its own descriptor
    if pids is not None:
        pids.append(proc.pid)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        started = CLOCK.monotonic()
        match = re.search(r"listening on (http://\S+)", line)
        if match is None:
            raise RuntimeError(f"{args[0]} did not start: {line!r}")
        yield match.group(1), started
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def gateway_args(provider: str, db: Path) -> list[str]:
    return ["retrybudget.gateway", "--provider", provider, "--db", str(db), "--port", "0",
            "--log-level", "warning"]


async def lookup(http: httpx.AsyncClient, url: str, origin: float) -> Sample:
    start = CLOCK.monotonic()
    response = await http.get(url)
    latency = CLOCK.monotonic() - start
    attempts = int(response.headers.get("X-Retrybudget-Attempts", "1"))
    return Sample(start - origin, latency, response.status_code, attempts)


async def closed_loop(http: httpx.AsyncClient, base: str, count: int,
                      concurrency: int) -> tuple[list[Sample], float]:
    """``count`` lookups, ``concurrency`` at a time, back to back; the samples and the wall time."""
    origin = CLOCK.monotonic()
    queue = iter(range(count))
    samples: list[Sample] = []

    async def worker() -> None:
        for i in queue:  # the workers share the queue; each records as it goes
            samples.append(await lookup(http, f"{base}/rentals/{i % 100 + 1}/availability",  # noqa: PERF401
                                        origin))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return samples, CLOCK.monotonic() - origin


async def paced(http: httpx.AsyncClient, base: str, origin: float, until: float,
                concurrency: int) -> list[Sample]:
    """Workers that each start a lookup every :data:`PACE_S` at most, until ``until``."""
    samples: list[Sample] = []

    async def worker(n: int) -> None:
        i = n
        while CLOCK.monotonic() - origin < until:
            began = CLOCK.monotonic()
            samples.append(await lookup(http, f"{base}/rentals/{i % 100 + 1}/availability", origin))
            i += concurrency
            await CLOCK.async_sleep(PACE_S - (CLOCK.monotonic() - began))

    await asyncio.gather(*(worker(n) for n in range(concurrency)))
    return samples


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def row(name: str, samples: Sequence[Sample], seconds: float | None) -> list[str]:
    latencies = [s.latency for s in samples]
    rate = f"{len(samples) / seconds:,.0f}" if seconds else "-"
    n = len(samples) or 1
    return [name, f"{len(samples):,}", rate, f"{percentile(latencies, 0.5) * 1000:.2f}",
            f"{percentile(latencies, 0.99) * 1000:.2f}",
            f"{sum(s.status == 200 for s in samples) / n:.0%}",
            f"{sum(s.status == 503 for s in samples) / n:.0%}",
            f"{sum(s.attempts for s in samples):,}"]


def table(rows: list[list[str]]) -> str:
    head = ["scenario", "lookups", "lookups/s", "p50 ms", "p99 ms", "200", "503",
            "provider requests"]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                       enumerate(zip(r, widths, strict=True))) for r in [head, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def ratios(direct: Sequence[Sample], d_s: float, through: Sequence[Sample], g_s: float) -> str:
    """The gateway's cost against the direct calls: throughput, p50 and p99 latency."""
    def p(samples: Sequence[Sample], q: float) -> float:
        return percentile([s.latency for s in samples], q)

    slower = (len(direct) / d_s) / (len(through) / g_s)
    return (f"throughput x{slower:.2f} lower, p50 x{p(through, 0.5) / p(direct, 0.5):.2f}, "
            f"p99 x{p(through, 0.99) / p(direct, 0.99):.2f}")


async def healthy(directory: Path, lookups: int, concurrency: int,
                  sequential: int) -> tuple[list[list[str]], list[str]]:
    """Direct and gateway lookups in alternating blocks; then one at a time."""
    blocks = 4
    with process(["retrybudget.sandbox", "--port", "0"]) as (sandbox, _), \
            process(gateway_args(sandbox, directory / "healthy.sqlite3")) as (gateway, _):
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(limits=limits, timeout=10.0, trust_env=False) as http:
            for base in (sandbox, gateway):  # warm up connections, imports and caches
                await closed_loop(http, base, 200, concurrency)
            results: dict[tuple[str, int], tuple[list[Sample], float]] = {}
            plan = [(concurrency, lookups // blocks)] * blocks + [(1, sequential)]
            for width, count in plan:
                for name, base in (("direct", sandbox), ("gateway", gateway)):
                    samples, seconds = await closed_loop(http, base, count, width)
                    kept, total = results.get((name, width), ([], 0.0))
                    results[(name, width)] = (kept + samples, total + seconds)
    rows, notes = [], []
    for width in (concurrency, 1):
        direct, d_s = results[("direct", width)]
        through, g_s = results[("gateway", width)]
        rows += [row(f"direct, concurrency {width}", direct, d_s),
                 row(f"gateway, concurrency {width}", through, g_s)]
        notes.append(f"gateway / direct at concurrency {width}: {ratios(direct, d_s, through, g_s)}")
    return rows, notes


async def outage(directory: Path, concurrency: int) -> tuple[list[list[str]], str]:
    start, end = OUTAGE
    with process(["retrybudget.sandbox", "--port", "0", "--outage", f"{start}:{end}"]) as (
            sandbox, origin), process(gateway_args(sandbox, directory / "outage.sqlite3")) as (
            gateway, _):
        async with httpx.AsyncClient(timeout=10.0, trust_env=False) as http:
            samples = await paced(http, gateway, origin, OUTAGE_RUN_S, concurrency)
            health = (await http.get(f"{gateway}/healthz")).json()
            stats = (await http.get(f"{sandbox}/_stats/default")).json()
    margin = 0.1
    during = [s for s in samples if start + margin <= s.start <= end - margin]
    before = [s for s in samples if s.start < start]
    after = [s for s in samples if s.start > end + 2.0]
    rows = [row("outage: before", before, None), row("outage: during", during, None),
            row("outage: after (+2 s)", after, None)]
    open_answers = sum(s.attempts == 0 for s in during)
    note = (f"during the outage: {len(during):,} lookups, {open_answers:,} answered with 0 "
            f"attempts (breaker open), p99 {percentile([s.latency for s in during], 0.99) * 1000:.0f} ms "
            f"(deadline 2000 ms), max {max((s.latency for s in during), default=0) * 1000:.0f} ms; "
            f"breaker opened {health['breaker']['opened']} time(s); the provider answered "
            f"{stats['by_status'].get('503', 0):,} requests 503 in all, "
            f"{stats['count']:,} requests in all = {sum(s.attempts for s in samples):,} attempts "
            f"counted by the gateway")
    return rows, note


async def main_async(lookups: int, concurrency: int, sequential: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        rows, ratios_ = await healthy(directory, lookups, concurrency, sequential)
        outage_rows, note = await outage(directory, concurrency)
    print(f"gateway load on {os.cpu_count()} CPU(s), client, sandbox and gateway in 3 processes: "
          f"{lookups} lookups each way at concurrency {concurrency} (4 alternating blocks), "
          f"{sequential} one at a time; outage {OUTAGE[0]:g}-{OUTAGE[1]:g} s with paced lookups "
          f"({concurrency} workers, one lookup per {PACE_S * 1000:g} ms at most)")
    print(table(rows + outage_rows))
    for line in [*ratios_, note]:
        print(line)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lookups", type=int, default=2000, help="lookups each way (default 2000)")
    parser.add_argument("--concurrency", type=int, default=20, help="concurrent lookups (default 20)")
    parser.add_argument("--sequential", type=int, default=300,
                        help="lookups each way one at a time (default 300)")
    args = parser.parse_args(argv)
    asyncio.run(main_async(args.lookups, args.concurrency, args.sequential))
    return 0


if __name__ == "__main__":
    sys.exit(main())
