"""The job queue: operations per second through each backend, and a shared job under a limit.

1. **Throughput**: ``--ops`` operations enqueued, leased and completed (a no-op provider:
   each operation "succeeds" at once) by one process, through SQLite (a file) and through
   Redis (a redis-server this script starts on a unix socket). Reported: enqueue/s and
   lease+complete/s.
2. **Four processes against the sandbox's rate limit**: ``retrybudget fetch --queue redis://``
   run as 4 processes, each in its own working directory with its own copy of the input,
   drain one job of ``--job-ops`` GETs against the sandbox provider (fixed windows of
   ``--limit`` requests per second; ``--style github``, the sandbox's default and this
   benchmark's, sends ``x-ratelimit-*`` on every answer; ``--style retry-after`` sends no
   quota headers, only a 429 with ``Retry-After`` over the limit), sharing the
   coordinator through the same Redis. Each operation's deadline is short (``--deadline``),
   so a gate or pacing wait that does not fit ends it ``rate_limited`` at the slot the
   coordinator offered and the queue defers it to that ``retry_at``. Reported, with the
   targets:

   - job time (first provider request to last) against the provider's capacity time
     (operations / limit x window): target <= 1.10 x (``--style retry-after``: <= 1.05 x,
     with the fleet's learned rate);
   - provider requests per operation: target <= 1.02 (``--style retry-after``: <= 1.01);
   - how late each deferred operation was leased after the instant it was due
     (``retry_at`` plus jitter): target <= 100 ms (max and p95);
   - where the time goes (:func:`where_time_goes`): the provider's answers (429s, in the
     first window too), 2xx per provider window, deferrals per operation, deferred runs
     deferred again, idle time per worker, late deferred runs while a worker was idle;
   - the Redis commands the job cost (queue and coordinator together), per operation.

Bounded: every process has a time limit; the sandbox and redis-server are stopped at the end.

Usage::

    python benchmarks/queue.py [--ops N] [--job-ops N] [--limit R] [--style S]
                               [--probe-unknown-limit] [--json OUT]

``--probe-unknown-limit`` runs the shared job with ``PacingConfig(probe_unknown_limit=True)``
(off by default, as in the library): the fetch command has no option for it, so each process
is started with its Redis coordinator's default configuration set so.

``RB_BENCH_DUMP=FILE`` also writes the recorded operations (with their histories) to FILE
and the provider's request log to FILE.log.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _without_here() -> list[str]:
    return [p for p in sys.path if Path(p or ".").resolve() != _HERE]


if __name__ == "queue":
    # Another script in this directory ran, so this directory leads sys.path and its
    # ``import queue`` found this file: hand it the standard library's queue instead.
    del sys.modules["queue"]
    _saved = sys.path[:]
    sys.path[:] = _without_here()
    try:
        sys.modules["queue"] = importlib.import_module("queue")
    finally:
        sys.path[:] = _saved
    globals().update({k: v for k, v in vars(sys.modules["queue"]).items()
                      if not k.startswith("__")})
elif __name__ == "__main__":
    # Run as a script, this directory leads sys.path and this file's name would shadow the
    # standard library's queue (which redis imports): drop the directory.
    sys.path[:] = _without_here()

import argparse  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"github": (1.10, 1.02), "retry-after": (1.05, 1.01)}
PROBING_FETCH = """\
import runpy, sys
from retrybudget.coordination import CoordinationConfig, PacingConfig, RedisCoordinator
made = RedisCoordinator.__init__
def probing(self, *args, config=None, **options):
    made(self, *args, config=config or CoordinationConfig(
        pacing=PacingConfig(probe_unknown_limit=True)), **options)
RedisCoordinator.__init__ = probing
runpy.run_module("retrybudget", run_name="__main__", alter_sys=True)
"""
"""``python -m retrybudget`` with the opt-in probing of an unknown limit on (the fetch
command builds its :class:`RedisCoordinator` with the default configuration)."""
"""Per limit style: job time against capacity, and provider requests per operation."""


def start_redis(directory: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A redis-server on a unix socket in ``directory`` (no persistence); its URL."""
    server = shutil.which("redis-server")
    if server is None:
        raise SystemExit("redis-server is not installed")
    socket = directory / "redis.sock"
    proc = subprocess.Popen([server, "--port", "0", "--unixsocket", str(socket), "--save", "",
                             "--appendonly", "no", "--dir", str(directory)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import redis

    client = redis.Redis(unix_socket_path=str(socket))
    for _ in range(250):
        try:
            if client.ping():
                break
        except (redis.RedisError, OSError):
            time.sleep(0.02)
    else:
        proc.kill()
        raise SystemExit("redis-server did not start within 5 s")
    client.close()
    return proc, f"unix://{socket}"


def throughput(name: str, queue: Any, ops: int) -> dict[str, Any]:
    """Enqueue, then lease and complete, ``ops`` operations with a no-op provider."""
    from retrybudget.core.outcome import Outcome, Reason

    ok: Outcome[Any] = Outcome(Reason.OK, "op", 1, (), 0.0)
    started = time.perf_counter()
    for n in range(ops):
        queue.enqueue(f"op{n}", {"n": n})
    enqueued = time.perf_counter()
    done = 0
    while True:
        lease = queue.lease("bench")
        if lease is None:
            break
        queue.complete(lease, ok, {"n": done})
        done += 1
    finished = time.perf_counter()
    assert done == ops, (done, ops)
    return {"backend": name, "ops": ops,
            "enqueue_per_s": round(ops / (enqueued - started)),
            "lease_complete_per_s": round(ops / (finished - enqueued))}


def shared_job(url: str, directory: Path, *, ops: int, limit: int, deadline: float,
               processes: int, workers: int, style: str = "github",
               probe_unknown_limit: bool = False) -> dict[str, Any]:
    """``processes`` fetch processes drain one job through Redis against a limited sandbox
    (with ``PacingConfig.probe_unknown_limit`` on when ``probe_unknown_limit``)."""
    from retrybudget.queue import RedisQueue
    from retrybudget.sandbox import RateLimit, SandboxConfig, serve_in_thread

    config = SandboxConfig(rentals=ops, rate_limit=RateLimit(limit=limit, window_s=1,
                                                             style=style))
    import redis

    server = redis.Redis.from_url(url)
    server.config_resetstat()
    with serve_in_thread(config) as sandbox:
        urls = "".join(sandbox.url(f"/rentals/{i}/availability") + "\n"
                       for i in range(1, ops + 1))
        procs = []
        for p in range(processes):
            home = directory / f"host-{p}"
            home.mkdir()
            (home / "rentals.txt").write_text(urls, "utf-8")
            procs.append(subprocess.Popen(
                [sys.executable, *(("-c", PROBING_FETCH) if probe_unknown_limit
                                   else ("-m", "retrybudget")), "fetch", "rentals.txt", "--quiet",
                 "--queue", url, "--workers", str(workers), "--policy", "background",
                 "--profile", "generic", "--deadline", str(deadline), "--max-deferrals", "20"],
                cwd=home, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        codes = []
        for proc in procs:
            try:
                proc.communicate(timeout=max(120, 4 * ops / limit))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
            codes.append(proc.returncode)
        log = sandbox.stats()["requests"]
    commands = {name.removeprefix("cmdstat_"): int(stat["calls"])
                for name, stat in server.info("commandstats").items()}
    peaks = [float(peak) for state in server.scan_iter(match="retrybudget:*:state")
             if (peak := server.hget(state, "lr_peak")) is not None]
    server.close()
    if os.environ.get("RB_BENCH_DUMP"):
        Path(os.environ["RB_BENCH_DUMP"] + ".log").write_text(json.dumps(log), "utf-8")
    queue = RedisQueue(url, "rentals")
    exported = list(queue.export())
    queue.close()
    if os.environ.get("RB_BENCH_DUMP"):
        Path(os.environ["RB_BENCH_DUMP"]).write_text(
            json.dumps([op.as_dict() for op in exported], indent=1), "utf-8")
    arrivals = sorted(r["arrival"] for r in log)
    job_time = arrivals[-1] - arrivals[0] if arrivals else math.nan
    capacity = ops / limit
    late = []
    for op in exported:
        history = list(op.history)
        for before, after in itertools.pairwise(history):
            if before["action"] == "defer":
                late.append(after["leased_at"] - before["not_before"])
    ok = sum(1 for op in exported if op.result and op.result["ok"])
    late_ms = sorted(1000 * x for x in late)
    where = where_time_goes(log, exported, limit=limit, workers=processes * workers)
    where["learned_peak"] = round(max(peaks), 2) if peaks else None
    return {
        "style": style, "probe_unknown_limit": probe_unknown_limit, "processes": processes,
        "workers_each": workers, "ops": ops, "limit_per_s": limit,
        "exit_codes": codes, "recorded": len(exported), "ok": ok,
        "provider_requests": len(log),
        "requests_per_op": round(len(log) / ops, 4),
        "capacity_time_s": round(capacity, 3), "job_time_s": round(job_time, 3),
        "job_time_ratio": round(job_time / capacity, 4),
        "deferred_runs": len(late),
        "deferred_late_ms_max": round(max(late_ms), 1) if late_ms else None,
        "deferred_late_ms_p95": round(late_ms[int(0.95 * (len(late_ms) - 1))], 1)
        if late_ms else None,
        "deferred_late_ms_median": round(statistics.median(late_ms), 1) if late_ms else None,
        "deferred_early": sum(1 for x in late if x < 0),
        "where": where,
        "redis_commands": sum(commands.values()),
        "redis_commands_per_op": round(sum(commands.values()) / ops, 1),
        "redis_commands_top": dict(sorted(commands.items(), key=lambda kv: -kv[1])[:6]),
    }


def _runs(exported: list[Any]) -> list[dict[str, Any]]:
    """Every run of every operation: who ran it, when it was due, leased and completed."""
    return [dict(entry, op=op.op_id) for op in exported for entry in op.history]


def refusals(log: list[dict[str, Any]], successes: list[float], start: float,
             windows: int) -> dict[str, Any]:
    """Where the provider's refusals (429s) fall: per provider window from the first
    request's, and the first burst (the refusals within a second of the first, which its
    answer could not stop: they were in flight when it came back), how long after the first
    request it came, how long the fleet was held after it (to the next 2xx), and the rate of
    the 2xx from then to the last (the learned rate at work: the share of the limit it
    reached)."""
    refused = sorted(r["arrival"] for r in log if r["status"] == 429)
    per_window = [0] * windows
    for at in refused:
        per_window[math.floor(at) - math.floor(start)] += 1
    burst = [at for at in refused if at - refused[0] < 1.0]
    reopened = [at for at in successes if refused and at > refused[0]]
    after = [at for at in successes if reopened and at >= reopened[0]]
    return {
        "after_first_refusal": {  # the paced part: from the 2xx that reopened to the last
            "ops": len(after),
            "seconds": round(after[-1] - after[0], 3) if len(after) > 1 else None,
            "per_s": round((len(after) - 1) / (after[-1] - after[0]), 2)
            if len(after) > 1 and after[-1] > after[0] else None,
        },
        "refused_per_window": per_window,
        "first_refusal_s": round(refused[0] - start, 3) if refused else None,
        "first_burst_refusals": len(burst),
        "first_burst_span_ms": round(1000 * (burst[-1] - burst[0]), 1) if burst else None,
        "held_after_first_refusal_s": round(reopened[0] - refused[0], 3) if reopened else None,
    }


def where_time_goes(log: list[dict[str, Any]], exported: list[Any], *, limit: int,
                    workers: int) -> dict[str, Any]:
    """Where the job's time goes, from the provider's log and the operations' histories.

    - ``first_success_s``: first provider request to its first 2xx (start-up 429s show here);
    - ``statuses`` and ``first_window_429s``: the provider's answers (429s in the first window);
    - ``admitted_per_window``: 2xx answers per provider window, from the first request's; a
      window below the limit before the last one is capacity lost;
    - the refusals per window and the first burst of them, and the paced part after it
      (:func:`refusals`);
    - ``deferrals_per_op``: how many operations were deferred 0, 1, 2... times;
    - ``deferred_again``: deferred runs that ended deferred again (each re-entered the queue);
    - ``idle_s``: per worker, time between its runs while the job lasted (median and max);
    - ``late_with_idle_worker``: deferred runs leased late (over 20 ms after due) while some
      worker ran nothing from the due instant until 20 ms before the lease: the wake-up
      (poll), not the queueing for a worker, was late.
    """
    arrivals = sorted(r["arrival"] for r in log)
    if not arrivals:
        return {}
    start, end = arrivals[0], arrivals[-1]
    successes = sorted(r["arrival"] for r in log if r["status"] is not None
                       and 200 <= r["status"] < 300)
    statuses: dict[str, int] = {}
    for r in log:
        statuses[str(r["status"])] = statuses.get(str(r["status"]), 0) + 1
    first_window = math.floor(start) + 1
    windows = [0] * (math.floor(end) - math.floor(start) + 1)
    for at in successes:
        windows[math.floor(at) - math.floor(start)] += 1
    runs = _runs(exported)
    deferrals: dict[int, int] = {}
    for op in exported:
        deferrals[op.deferrals] = deferrals.get(op.deferrals, 0) + 1
    by_worker: dict[str, list[tuple[float, float]]] = {}
    for run in runs:
        by_worker.setdefault(run["worker"], []).append((run["leased_at"], run["at"]))
    idle = []
    for spans in by_worker.values():
        spans.sort()
        gaps = [max(0.0, b[0] - a[1]) for a, b in itertools.pairwise(spans)]
        gaps.append(max(0.0, spans[0][0] - start))
        gaps.append(max(0.0, end - spans[-1][1]))
        idle.append(sum(gaps))
    deferred_runs = [run for run in runs if run["lease"] > 1]
    late_idle = 0
    for run in deferred_runs:
        if run["leased_at"] - run["due"] <= 0.020:
            continue
        late_idle += any(not any(a < run["leased_at"] - 0.020 and b > run["due"]
                                 for a, b in spans) for spans in by_worker.values())
    return {
        "first_success_s": round(successes[0] - start, 3) if successes else None,
        "statuses": statuses,
        "first_window_429s": sum(1 for r in log if r["status"] == 429
                                 and r["arrival"] < first_window),
        "admitted_per_window": windows,
        **refusals(log, successes, start, len(windows)),
        "windows_below_limit": sum(1 for n in windows[1:-1] if n < limit),
        "deferrals_per_op": dict(sorted(deferrals.items())),
        "deferred_again": sum(1 for run in runs if run["lease"] > 1
                              and run["action"] == "defer"),
        "workers_seen": len(by_worker), "workers": workers,
        "idle_s_median": round(statistics.median(idle), 3) if idle else None,
        "idle_s_max": round(max(idle), 3) if idle else None,
        "late_with_idle_worker": late_idle,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=2000, help="throughput operations")
    parser.add_argument("--job-ops", type=int, default=160, help="operations of the shared job")
    parser.add_argument("--limit", type=int, default=20, help="provider requests per second")
    parser.add_argument("--deadline", type=float, default=1.0,
                        help="each operation's deadline (a longer gate wait defers it)")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4, help="threads per process")
    parser.add_argument("--style", default="github",
                        help="how the sandbox signals its limit: github (its default: quota "
                             "headers on every answer) or retry-after (no quota headers, a 429 "
                             "with Retry-After over it)")
    parser.add_argument("--probe-unknown-limit", action="store_true",
                        help="the shared job with PacingConfig(probe_unknown_limit=True): a key "
                             "whose first answer names no quota is probed one request at a "
                             "time for a second (default: off, as in the library)")
    parser.add_argument("--json", default=None, help="write the figures here too")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from retrybudget.queue import RedisQueue, SqliteQueue

    results: dict[str, Any] = {"python": sys.version.split()[0], "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="rb-queue-bench-") as tmp:
        directory = Path(tmp)
        redis_proc, url = start_redis(directory)
        try:
            rows = [throughput("sqlite", SqliteQueue(directory / "bench.sqlite"), args.ops),
                    throughput("redis", RedisQueue(url, "bench"), args.ops)]
            results["throughput"] = rows
            for row in rows:
                print(f"{row['backend']:7} enqueue {row['enqueue_per_s']:>7}/s   "
                      f"lease+complete {row['lease_complete_per_s']:>7}/s   ({row['ops']} ops)")
            job = shared_job(url, directory, ops=args.job_ops, limit=args.limit,
                             deadline=args.deadline, processes=args.processes,
                             workers=args.workers, style=args.style,
                             probe_unknown_limit=args.probe_unknown_limit)
            results["shared_job"] = job
        finally:
            redis_proc.kill()
            redis_proc.wait(5)
    job_target, requests_target = TARGETS.get(args.style, TARGETS["github"])
    verdict = {
        "job_time": job["job_time_ratio"] <= job_target,
        "requests_per_op": job["requests_per_op"] <= requests_target,
        "deferred_start": job["deferred_late_ms_max"] is not None
        and job["deferred_late_ms_max"] <= 100 and job["deferred_early"] == 0,
    }
    results["met"] = verdict
    print(f"shared job: {job['processes']} processes x {job['workers_each']} workers, "
          f"{job['ops']} ops at {job['limit_per_s']}/s; exit codes {job['exit_codes']}; "
          f"{job['recorded']} recorded, {job['ok']} ok; probe_unknown_limit "
          f"{'on' if job['probe_unknown_limit'] else 'off'}")
    print(f"  job time {job['job_time_s']} s vs capacity {job['capacity_time_s']} s = "
          f"{job['job_time_ratio']} x (target <= {job_target}: "
          f"{'MET' if verdict['job_time'] else 'NOT MET'})")
    print(f"  provider requests per operation {job['requests_per_op']} "
          f"(target <= {requests_target}: "
          f"{'MET' if verdict['requests_per_op'] else 'NOT MET'})")
    print(f"  deferred runs {job['deferred_runs']}: leased after due by median "
          f"{job['deferred_late_ms_median']} ms, p95 {job['deferred_late_ms_p95']} ms, max "
          f"{job['deferred_late_ms_max']} ms, early {job['deferred_early']} (target <= 100 ms: "
          f"{'MET' if verdict['deferred_start'] else 'NOT MET'})")
    where = job["where"]
    throttles = where.get("statuses", {}).get("429", 0)
    print(f"  where the time goes: first success after {where.get('first_success_s')} s; "
          f"answers {where.get('statuses')} ({where.get('first_window_429s')} 429s in the "
          f"first window, {throttles - where.get('first_window_429s', 0)} after it)")
    print(f"  admitted per window {where.get('admitted_per_window')} "
          f"({where.get('windows_below_limit')} inner windows below the limit); refused per "
          f"window {where.get('refused_per_window')}")
    print(f"  first refusal {where.get('first_refusal_s')} s after the first request; "
          f"{where.get('first_burst_refusals')} refused within 1 s of it (over "
          f"{where.get('first_burst_span_ms')} ms: in flight when it was answered); next 2xx "
          f"{where.get('held_after_first_refusal_s')} s after it; learned peak "
          f"{where.get('learned_peak')}/s")
    paced = where.get("after_first_refusal") or {}
    if paced.get("per_s"):
        print(f"  after it: {paced['ops']} ops over {paced['seconds']} s from the 2xx that "
              f"reopened, {paced['per_s']}/s = {100 * paced['per_s'] / args.limit:.1f} % of "
              f"the limit")
    print(f"  deferrals per op {where.get('deferrals_per_op')}; deferred runs deferred again "
          f"{where.get('deferred_again')}; idle per worker median {where.get('idle_s_median')} "
          f"s, max {where.get('idle_s_max')} s; late with a worker idle "
          f"{where.get('late_with_idle_worker')}")
    print(f"  redis commands {job['redis_commands']} ({job['redis_commands_per_op']} per op; "
          f"most: {job['redis_commands_top']})")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
