"""Scale on Redis: 8 processes x 50 asyncio tasks sharing one RedisCoordinator.

The load: 2,000 GETs against the sandbox provider (a child process on loopback) whose fixed
window admits 50 requests per 1 s, spread over ``processes`` processes of ``tasks`` asyncio
tasks each; every process has its own ``RedisCoordinator`` on one shared redis-server (a unix
socket). The same load then runs through a ``MemoryCoordinator`` on one process (the same
number of tasks), for comparison.

Reported per backend: windows over the limit (must be 0), wall time against the ideal (the end
of the window in which a provider serving 50 per window from the first request's window would
serve the last operation), Redis round trips per attempt (each process's coordinator counts
them in its ``stats()``: the async calls its tasks make in one turn of the event loop share one
pipeline, one round trip), the scripts Redis ran per attempt (client commands counted with
``INFO commandstats``: EVAL/EVALSHA/SCRIPT and connection set-up, one per script however it was
sent; the commands the scripts run inside Redis are counted apart as "Redis operations"), the
scripts split by operation (counted in the client: operations admitted at once, operations held
by a wait, and all), the waits the coordinator answered per held operation, and the time spent
in coordinator calls per operation (p50/p99; attempts per operation beside it), which is what
coordination adds. ``--no-pipeline`` sends every call on its own; ``--dump FILE`` writes every
admit and acquire answer of the Redis run and the provider's request log, to see which
windows were booked and how (how the empty windows of an earlier version were found).

Bounded: every operation has a 120 s deadline and 3 attempts, every process a time limit.

Usage::

    python benchmarks/redis_scale.py [--processes 8] [--tasks 50] [--ops 2000]
                                     [--backends both|redis] [--no-pipeline] [--json OUT]
                                     [--dump FILE] [--check]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
import os
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import redis

from retrybudget import Policy, Retrier
from retrybudget.coordination import Coordinator, MemoryCoordinator, RedisCoordinator
from retrybudget.integrations.httpx import AsyncRetryTransport
from retrybudget.sandbox import RUN_HEADER
from storm import Sizes, ideal_wall
from storm_services import redis_server, sandbox

LIMIT, WINDOW = 50, 1
CLIENT_COMMANDS = ("cmdstat_eval", "cmdstat_evalsha", "cmdstat_script", "cmdstat_client",
                   "cmdstat_hello", "cmdstat_ping", "cmdstat_select")
"""Commands a client sends itself (one each per script call, pipelined or not)."""


class Counted(RedisCoordinator):
    """A RedisCoordinator that counts the scripts it runs, per task."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trips: Counter[object] = Counter()

    async def _arun(self, call: Any) -> Any:
        if call.script is not None:
            self.trips[asyncio.current_task()] += 1
        return await super()._arun(call)


class Timed(Coordinator):
    """A coordinator wrapper that times every flow action it performs, summed per operation
    (one asyncio task runs one operation's actions one after the other), and records per
    operation its attempts, its round trips (with a :class:`Counted` inner) and the waits it
    was answered."""

    def __init__(self, inner: Coordinator) -> None:
        self.inner = inner
        self.spent: list[float] = []  # per operation
        self.ops: list[tuple[int, int, int]] = []  # per operation: attempts, round trips, waits
        self.answers: list[tuple[float, str, str, float, str, bool]] = []  # for --dump
        self._current: dict[object, list[float]] = {}

    async def ahandle(self, action: Any) -> object:
        """Time ``inner.ahandle``; a Finish closes the operation's sums."""
        task = asyncio.current_task()
        start = time.perf_counter()
        answer: object = None
        try:
            answer = await self.inner.ahandle(action)
            return answer
        finally:
            sums = self._current.setdefault(task, [0.0, 0, 0])
            sums[0] += time.perf_counter() - start
            name = type(action).__name__
            if name in ("Admit", "Acquire"):  # wall instant, task, action, wait, reason, lease
                self.answers.append((round(time.time(), 6), f"{os.getpid()}:{id(task)}", name,
                                     float(getattr(answer, "wait", 0.0)),
                                     str(getattr(answer, "reason", "")),
                                     bool(getattr(answer, "lease", None))))
            if name == "Acquire" and getattr(answer, "wait", 0) > 0:
                sums[2] += 1
            elif name == "Acquire":
                sums[1] += 1
            if name == "Finish":
                self.spent.append(sums[0])
                trips = self.inner.trips.pop(task, 0) if isinstance(self.inner, Counted) else 0
                self.ops.append((int(sums[1]), trips, int(sums[2])))
                self._current.pop(task, None)


async def _tasks(base_url: str, run_id: str, make: Any, tags: Sequence[int], tasks: int,
                 ) -> tuple[list[float], list[bool], list[tuple[int, int, int]], int, list[Any]]:
    coordinator = make()
    timed = Timed(coordinator)
    policy = Policy(name="scale", max_attempts=3, deadline=120.0)
    transport = AsyncRetryTransport(retrier=Retrier(policy=policy, coordinator=timed))
    limits = httpx.Limits(max_connections=tasks + 4, max_keepalive_connections=tasks + 4)
    queue = list(reversed(tags))
    oks: list[bool] = []
    failures: Counter[str] = Counter()
    trips_before = 0
    if isinstance(coordinator, RedisCoordinator):
        await coordinator.aadmit("scale-warm-up")  # connect and load the scripts first
        trips_before = coordinator.stats().round_trips
        if isinstance(coordinator, Counted):
            coordinator.trips.clear()
    async with httpx.AsyncClient(transport=transport, timeout=10.0, limits=limits) as client:

        async def worker() -> None:
            while queue:
                tag = queue.pop()
                try:
                    answer = await client.get(f"{base_url}/rentals/{tag}/availability",
                                              headers={RUN_HEADER: run_id})
                except httpx.HTTPError as exc:  # an operation that ended otherwise than ok
                    failures[type(exc).__name__] += 1
                    oks.append(False)
                    continue
                oks.append(answer.status_code == 200)

        await asyncio.gather(*(worker() for _ in range(tasks)))
    trips = coordinator.stats().round_trips - trips_before
    if isinstance(coordinator, RedisCoordinator):
        await coordinator.aclose()
        coordinator.close()
    if failures:
        print(f"operations that did not end ok: {dict(failures)}", flush=True)
    return timed.spent, oks, timed.ops, trips, timed.answers


def _process(base_url: str, run_id: str, redis_url: str, tags: list[int], tasks: int,
             pipeline: bool, barrier: Any, results: Any) -> None:
    def make() -> Coordinator:
        return Counted(redis_url, prefix=f"scale:{run_id}:", socket_timeout=2.0,
                       pipeline=pipeline)

    barrier.wait(60)
    results.put(asyncio.run(_tasks(base_url, run_id, make, tags, tasks)))


def _commands(url: str) -> tuple[int, int]:
    """(client commands, all commands) the server has answered so far."""
    with redis.Redis.from_url(url, socket_timeout=5.0) as client:
        stats = client.info("commandstats")
    own = sum(int(v["calls"]) for k, v in stats.items() if k.split("|")[0] in CLIENT_COMMANDS)
    return own, sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(backend: str, processes: int, tasks: int, ops: int, pipeline: bool = True,
        dump: Path | None = None) -> dict[str, Any]:
    """One backend's figures against its own fresh sandbox (and redis-server)."""
    run_id = f"scale-{backend}"
    options = ["--limit", str(LIMIT), "--window", str(WINDOW), "--rentals", "10000000",
               "--style", "github"]
    with sandbox(options) as provider, redis_server() as url:
        before = _commands(url)
        started = time.monotonic()
        if backend == "memory":
            spent, oks, ops_seen, trips, answers = asyncio.run(_tasks(
                provider.base_url, run_id, MemoryCoordinator, list(range(1, ops + 1)),
                processes * tasks))
        else:
            context = multiprocessing.get_context("spawn")
            barrier = context.Barrier(processes + 1)
            results = context.Queue()
            share = ops // processes
            children = [context.Process(
                target=_process, daemon=True,
                args=(provider.base_url, run_id, url,
                      list(range(p * share + 1, (p + 1) * share + 1)), tasks, pipeline,
                      barrier, results))
                for p in range(processes)]
            for child in children:
                child.start()
            barrier.wait(60)
            started = time.monotonic()
            spent, oks, ops_seen, trips, answers = [], [], [], 0, []
            for _ in children:
                child = results.get(timeout=600)
                spent += child[0]
                oks += child[1]
                ops_seen += child[2]
                trips += child[3]
                answers += child[4]
            for child in children:
                child.join(30)
        ended = time.monotonic()
        after = _commands(url)
        stats = provider.stats(run_id)
    records = stats["requests"]
    if dump is not None:
        dump.write_text(json.dumps({
            "answers": sorted(answers),  # [wall, task, action, wait, reason, lease]
            "requests": [[r["arrival"], r["status"]] for r in records],
        }) + "\n", encoding="utf-8")
    windows = Counter(math.floor(r["arrival"] / WINDOW) for r in records)
    first = min(r["arrival"] for r in records)
    ideal = ideal_wall(first, ops, Sizes(limit=LIMIT, window=WINDOW)) - (
        started + (time.time() - time.monotonic()))
    attempts = len(records)
    scripts = after[0] - before[0]
    inside = (after[1] - before[1]) - scripts
    per_op = spent  # coordination time per operation; attempts/op is reported beside it
    at_once = [o for o in ops_seen if o[2] == 0]
    held = [o for o in ops_seen if o[2] > 0]

    def scripts_per_attempt(group: list[tuple[int, int, int]]) -> float:
        tried = sum(o[0] for o in group)
        return round(sum(o[1] for o in group) / tried, 3) if tried else 0.0
    return {
        "backend": backend, "processes": 1 if backend == "memory" else processes,
        "tasks": tasks if backend != "memory" else processes * tasks,
        "ops": ops, "ok": sum(oks), "attempts": attempts,
        "over_limit_windows": sum(1 for n in windows.values() if n > LIMIT),
        "over_limit_at": sorted(w - min(windows) for w, n in windows.items() if n > LIMIT),
        "per_window": [windows.get(w, 0) for w in range(min(windows), max(windows) + 1)],
        "busiest": max(windows.values()), "rejections": sum(
            1 for r in records if r["status"] in (403, 429)),
        "wall": round(ended - started, 3), "ideal": round(ideal, 3),
        "wall_ratio": round((ended - started) / ideal, 4),
        "round_trips_per_attempt": round(trips / attempts, 3),
        "scripts_per_attempt": round(scripts / attempts, 3),
        "held_ops": len(held),
        "scripts_at_once": scripts_per_attempt(at_once),
        "scripts_held": scripts_per_attempt(held),
        "scripts_all": scripts_per_attempt(ops_seen),
        "waits_per_held_op": round(sum(o[2] for o in held) / len(held), 2) if held else 0.0,
        "redis_ops_per_attempt": round(inside / attempts, 2),
        "attempts_per_op": round(attempts / ops, 3),
        "added_p50_ms": round(1000 * _quantile(per_op, 0.5), 3),
        "added_p99_ms": round(1000 * _quantile(per_op, 0.99), 3),
        "added_mean_ms": round(1000 * statistics.fmean(per_op), 3) if per_op else 0,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run both backends, print the table, write what was asked."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--tasks", type=int, default=50, help="asyncio tasks per process")
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--backends", choices=("both", "redis"), default="both",
                        help="redis: leave out the memory comparison")
    parser.add_argument("--no-pipeline", action="store_true",
                        help="every Redis call on its own round trip (RedisCoordinator(pipeline=False))")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--dump", type=Path, help=(
        "write the Redis run's every admit and acquire answer (wall instant, task, action, "
        "wait, reason, lease) and the provider's request log (arrival, status) to this file"))
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a Redis target is missed")
    args = parser.parse_args(argv)
    if args.processes < 1 or args.tasks < 1 or args.ops < args.processes:
        parser.error("processes and tasks must be positive, ops at least processes")
    rows = [run("redis", args.processes, args.tasks, args.ops, not args.no_pipeline, args.dump)]
    if args.backends == "both":
        rows.append(run("memory", args.processes, args.tasks, args.ops))
    columns = ("backend", "processes", "tasks", "ok", "attempts", "over_limit_windows",
               "busiest", "rejections", "wall", "ideal", "wall_ratio",
               "attempts_per_op", "round_trips_per_attempt", "scripts_per_attempt",
               "held_ops", "scripts_at_once",
               "scripts_held", "scripts_all", "waits_per_held_op", "redis_ops_per_attempt",
               "added_p50_ms", "added_p99_ms")
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("---" for _ in columns) + "|")
    for r in rows:
        print("| " + " | ".join(str(r[c]) for c in columns) + " |")
    redis_row = rows[0]
    targets = {
        "0 windows over the limit": redis_row["over_limit_windows"] == 0,
        "wall <= 1.10 x ideal": redis_row["wall_ratio"] <= 1.10,
        "<= 2 round trips per attempt": redis_row["round_trips_per_attempt"] <= 2.0,
    }
    for r in rows:
        print(f"- {r['backend']}: windows over the limit (0 = the first): {r['over_limit_at']}")
    for label, ok in targets.items():
        print(f"- {label}: {'met' if ok else 'NOT MET'}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "targets": targets}, indent=2) + "\n",
                             encoding="utf-8")
    return 1 if args.check and not all(targets.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
