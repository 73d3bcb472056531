"""LLM pacing: 4 processes x 50 asyncio tasks against request and token quotas.

The provider is the sandbox in LLM mode (``POST /v1/chat/completions``, OpenAI's dialect) with a
requests window and a tokens window of ``--window`` seconds (a minute's quotas, scaled down).
The load is ``--ops`` chat completions of mixed cost, 100 to 4,000 tokens (seeded, the same
for every contender): a quarter of each cost is prompt (words the sandbox counts one token
each, ``estimate_tokens`` a little more), the rest ``max_tokens``, all of it produced.

Each contender runs the same load in its own run (its own windows), one after the other:

- ``tenacity``: every call retried on 429 the way OpenAI's cookbook shows
  (``wait_random_exponential(min=1, max=60)``, ``stop_after_attempt(6)``).
- ``aiolimiter``: a leaky bucket per process for requests and one for tokens (each call takes
  its estimate), each set to a quarter of the true limits; a 429 retried as with tenacity.
- ``cookbook``: the OpenAI cookbook's parallel processor, per process: request and token
  capacity refilled continuously from a quarter of the configured limits, each call's estimate
  taken before it is sent, and after a 429 every task pauses (15 s a minute, scaled to the
  window) and the call is retried (5 attempts).
- ``retrybudget``: ``AsyncRetryTransport`` with the openai profile and token pacing (each
  call's cost estimated from its body by the transport, charged against the requests and
  tokens quotas the headers publish, reconciled with every answer's), with a
  ``MemoryCoordinator`` per process (each process paces alone: it learns of the others only
  from the headers), then a ``RedisCoordinator`` shared by the four (a private redis-server
  on a unix socket).

Reported per contender: 429s the provider sent, operations that failed, token throughput (the
tokens admitted in each full window after the first, against the limit: the mean and the
lowest), and the wall time (first request sent to last answer) against the ideal: the start of
the window in which a provider admitting the full token (and request) limit in every window,
from the first request's window on, would admit the load's last token (the earliest the last
call can be admitted: a lower bound no client can beat, short of an answer's own latency).

Bounded: every process stops at ``--deadline`` seconds, every call has a 30 s timeout; the
sandbox and redis-server are stopped at the end.

Usage::

    python benchmarks/llm_pacing.py [--processes 4] [--tasks 50] [--ops 200] [--rpm 40]
                                    [--tpm 40000] [--window 2] [--only NAME] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import multiprocessing
import random
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiolimiter
import httpx
import tenacity

from retrybudget import Policy, Retrier, estimate_tokens
from retrybudget.coordination import MemoryCoordinator, RedisCoordinator
from retrybudget.integrations.httpx import AsyncRetryTransport
from retrybudget.sandbox import RUN_HEADER
from storm_services import redis_server, sandbox

CONTENDERS = ("tenacity", "aiolimiter", "cookbook", "retrybudget-memory", "retrybudget-redis")
LABELS = {"tenacity": "tenacity, retrying 429s (cookbook settings)",
          "aiolimiter": "aiolimiter bucket per process (true limits / 4) + tenacity",
          "cookbook": "OpenAI cookbook parallel processor per process (limits / 4)",
          "retrybudget-memory": "retrybudget token pacing, MemoryCoordinator per process",
          "retrybudget-redis": "retrybudget token pacing, shared RedisCoordinator"}


@dataclass(frozen=True)
class Load:
    """What every process of one contender needs."""

    name: str
    base_url: str
    run_id: str
    bodies: tuple[dict[str, Any], ...]
    tasks: int
    processes: int
    rpm: int
    tpm: int
    window: int
    start_at: float
    deadline: float
    redis_url: str | None


def bodies(ops: int, seed: int = 7) -> list[dict[str, Any]]:
    """``ops`` chat-completion bodies costing 100 to 4,000 tokens in the sandbox's count."""
    draw = random.Random(seed)
    out = []
    for _ in range(ops):
        cost = draw.randint(100, 4000)
        prompt = cost // 4 - 6  # the message and the reply add 3 tokens each in the sandbox's count
        out.append({"model": "gpt-4o-mini", "max_tokens": cost - cost // 4,
                    "messages": [{"role": "user", "content": "abcd " * prompt}]})
    return out


def true_cost(body: dict[str, Any]) -> int:
    """What the sandbox charges the call: one token a word, 6 for the message and the reply,
    and ``max_tokens``, all produced."""
    return int(body["messages"][0]["content"].count("abcd")) + 6 + int(body["max_tokens"])


def cost(body: dict[str, Any]) -> int:
    """A call's estimate, as a client makes it (stdlib, four characters a token)."""
    return estimate_tokens(body).total


class Rejected(Exception):
    """A 429, to retry."""


async def _post(client: httpx.AsyncClient, load: Load, body: dict[str, Any]) -> httpx.Response:
    return await client.post(f"{load.base_url}/v1/chat/completions", json=body,
                             headers={RUN_HEADER: load.run_id})


def _tenacious(send: Callable[[], Awaitable[httpx.Response]]) -> Callable[[], Awaitable[int]]:
    @tenacity.retry(wait=tenacity.wait_random_exponential(min=1, max=60),
                    stop=tenacity.stop_after_attempt(6), retry=tenacity.retry_if_exception_type(Rejected))
    async def call() -> int:
        answer = await send()
        if answer.status_code == 429:
            raise Rejected
        return answer.status_code

    return call


class Cookbook:
    """The cookbook's capacity accounting (api_request_parallel_processor.py), per process."""

    def __init__(self, load: Load) -> None:
        self.max_requests = load.rpm / load.processes
        self.max_tokens = load.tpm / load.processes
        self.requests = self.max_requests
        self.tokens = self.max_tokens
        self.window = load.window
        self.updated = time.monotonic()
        self.paused_until = 0.0
        self.pause = 15.0 * load.window / 60.0  # 15 s after a 429, per minute of window

    async def take(self, tokens: int) -> None:
        while True:
            now = time.monotonic()
            if now < self.paused_until:
                await asyncio.sleep(self.paused_until - now)
                continue
            elapsed = now - self.updated
            self.requests = min(self.requests + self.max_requests * elapsed / self.window,
                                self.max_requests)
            self.tokens = min(self.tokens + self.max_tokens * elapsed / self.window, self.max_tokens)
            self.updated = now
            if self.requests >= 1 and self.tokens >= tokens:
                self.requests -= 1
                self.tokens -= tokens
                return
            await asyncio.sleep(0.001)


async def _process(load: Load, share: Sequence[dict[str, Any]]) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=load.tasks + 4, max_keepalive_connections=load.tasks + 4)
    transport: httpx.AsyncBaseTransport | None = None
    coordinator: Any = None
    if load.name.startswith("retrybudget"):
        coordinator = (MemoryCoordinator() if load.redis_url is None
                       else RedisCoordinator(load.redis_url, prefix=f"llm:{load.run_id}:"))
        policy = Policy(profile="openai", deadline=load.deadline, max_attempts=6,
                        retry_writes_with_key=True)
        transport = AsyncRetryTransport(retrier=Retrier(policy=policy, coordinator=coordinator),
                                        generate_idempotency_keys=True)
    bucket_requests = aiolimiter.AsyncLimiter(load.rpm / load.processes, load.window)
    bucket_tokens = aiolimiter.AsyncLimiter(load.tpm / load.processes, load.window)
    cookbook = Cookbook(load)
    queue = list(reversed(share))
    failures: Counter[str] = Counter()
    oks = done = 0
    first = math.inf
    last = 0.0
    async with httpx.AsyncClient(transport=transport, timeout=30.0, limits=limits) as client:
        if isinstance(coordinator, RedisCoordinator):
            await coordinator.aadmit("llm-warm-up")  # connect and load the scripts first
        await asyncio.sleep(max(0.0, load.start_at - time.time()))

        async def one(body: dict[str, Any]) -> int:
            nonlocal first
            estimate = cost(body)
            first = min(first, time.time())
            if load.name == "tenacity":
                return await _tenacious(lambda: _post(client, load, body))()
            if load.name == "aiolimiter":
                async def limited() -> httpx.Response:
                    async with bucket_requests:
                        await bucket_tokens.acquire(estimate)
                        return await _post(client, load, body)
                return await _tenacious(limited)()
            if load.name == "cookbook":
                for _ in range(5):
                    await cookbook.take(estimate)
                    answer = await _post(client, load, body)
                    if answer.status_code != 429:
                        break
                    cookbook.paused_until = time.monotonic() + cookbook.pause
                return answer.status_code
            return (await _post(client, load, body)).status_code

        async def worker() -> None:
            nonlocal oks, done, last
            while queue:
                body = queue.pop()
                try:
                    status = await one(body)
                    ok = status == 200
                    if not ok:
                        failures[f"HTTP {status}"] += 1
                except Exception as error:  # a call that raised counts as failed
                    failures[type(error).__name__] += 1
                    ok = False
                oks += ok
                done += 1
                last = max(last, time.time())

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(load.tasks))),
                                   timeout=load.deadline)
    if done < len(share):
        failures["unfinished at the deadline"] += len(share) - done
    if isinstance(coordinator, RedisCoordinator):
        await coordinator.aclose()
    return {"ok": oks, "ops": len(share), "first": first, "last": last, "failures": failures}


def _child(load: Load, index: int, results: Any) -> None:
    share = load.bodies[index::load.processes]
    results.put(asyncio.run(_process(load, share)))


def run_contender(load: Load) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    children = [context.Process(target=_child, args=(load, i, results)) for i in range(load.processes)]
    for child in children:
        child.start()
    parts = [results.get(timeout=load.deadline + 60) for _ in children]
    for child in children:
        child.join(timeout=10)
        if child.is_alive():
            child.kill()
    report = httpx.get(f"{load.base_url}/_llm/{load.run_id}", timeout=10).json()
    first = min(p["first"] for p in parts)
    last = max(p["last"] for p in parts)
    stats = httpx.get(f"{load.base_url}/_stats/{load.run_id}", timeout=10).json()
    windows = [w for w in report["windows"] if w["tokens"] > 0 or w["requests"] > 0]
    charged = sum(w["tokens"] for w in windows)
    full = windows[1:-1]  # after the first window, before the last (partial) one
    shares = [w["tokens"] / load.tpm for w in full]
    windows_needed = max(math.ceil(sum(map(true_cost, load.bodies)) / load.tpm),
                         math.ceil(len(load.bodies) / load.rpm))
    ideal = math.floor(first / load.window) * load.window + (windows_needed - 1) * load.window - first
    return {
        "name": load.name,
        "label": LABELS[load.name],
        "ok": sum(p["ok"] for p in parts),
        "ops": len(load.bodies),
        "rejections": report["rejected"],
        "requests": stats["count"],
        "tokens": charged,
        "throughput_mean": sum(shares) / len(shares) if shares else None,
        "throughput_min": min(shares) if shares else None,
        "wall": last - first,
        "ideal": ideal,
        "failures": dict(sum((Counter(p["failures"]) for p in parts), Counter())),
        "over_limit_windows": sum(1 for w in windows if w["tokens"] > load.tpm or w["requests"] > load.rpm),
    }


def _row(result: dict[str, Any]) -> str:
    mean = result["throughput_mean"]
    low = result["throughput_min"]
    through = "n/a" if mean is None else f"{mean:.0%} (min {low:.0%})"
    failed = result["ops"] - result["ok"]
    ratio = f"{result['wall'] / result['ideal']:.2f}" if not failed else "n/a (calls failed)"
    return (f"| {result['label']} | {result['rejections']} | {failed} | "
            f"{through} | {result['wall']:.1f} s | {ratio} |")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--rpm", type=int, default=40, help="requests per window")
    parser.add_argument("--tpm", type=int, default=40_000, help="tokens per window")
    parser.add_argument("--window", type=int, default=2, help="window in seconds")
    parser.add_argument("--deadline", type=float, default=90.0, help="seconds per contender")
    parser.add_argument("--only", choices=CONTENDERS, action="append")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    load_bodies = tuple(bodies(args.ops))
    results = []
    options = ["--llm-rpm", str(args.rpm), "--llm-tpm", str(args.tpm), "--llm-window", str(args.window)]
    names = args.only or CONTENDERS
    redis = redis_server() if "retrybudget-redis" in names else contextlib.nullcontext()
    with sandbox(options) as provider, redis as redis_url:
        for name in names:
            load = Load(name=name, base_url=provider.base_url, run_id=f"llm-{name}", bodies=load_bodies,
                        tasks=args.tasks, processes=args.processes, rpm=args.rpm, tpm=args.tpm,
                        window=args.window, start_at=time.time() + 3.0, deadline=args.deadline,
                        redis_url=redis_url if name == "retrybudget-redis" else None)
            result = run_contender(load)
            results.append(result)
            print(_row(result), flush=True)
    print(f"\n{args.processes} processes x {args.tasks} tasks, {args.ops} calls of 100-4,000 tokens; "
          f"limits {args.rpm} requests and {args.tpm} tokens per {args.window} s window\n")
    print("| contender | 429s | failed | tokens/window after the first (vs limit) | wall | wall / ideal |")
    print("|---|---|---|---|---|---|")
    for result in results:
        print(_row(result))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
