"""``retrybudget fetch INPUT``: a durable, resumable, coordinated batch of GET requests."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from .._clock import SYSTEM_CLOCK, Clock
from .._cmdline import EXIT_FAILED, EXIT_LEFT_TO_DO, EXIT_OK, CliError, check_new_file, check_sqlite_file
from ..coordination import Coordinator, MemoryCoordinator
from ..core.policy import Policy
from ..integrations import json_object
from ..observe import AuditHook, JsonlAuditSink
from ..queue import QueueConfig, worker_name
from ._inputs import Op, parse_header, read_ops, resolve_headers
from ._job import JobSettings, run_job
from ._jobfile import JobFile, load_job_file, write_job_sidecar
from ._policy import load_policy, with_overrides
from ._progress import LiveTally, ProgressView, queue_waits
from ._state import TABLES, JobState, Reopened

__all__ = ["JobPaths", "JobReport", "build_policy", "execute", "exit_status", "print_outcome",
           "queue_options", "redis_coordinator", "run", "supervise"]


@dataclass(frozen=True, slots=True)
class JobPaths:
    """Where a job's files go."""

    results: Path
    audit: Path
    state: Path


@dataclass(frozen=True, slots=True)
class JobReport:
    """What a run did.

    Attributes:
        reopened: what the run found in the state when it started.
        counts: state rows by status and done rows by reason.
        lines: every result line of the job (earlier runs included), in recording order.
        ran: operations this run finished.
        elapsed: this run's wall-clock seconds.
        run: this run's number over the state (1 for the first).
    """

    reopened: Reopened
    counts: dict[str, int]
    lines: list[dict[str, Any]]
    ran: int
    elapsed: float
    run: int = 0


def redis_coordinator(url: str, option: str = "--redis") -> Coordinator:
    """A :class:`RedisCoordinator` for ``url``, after checking the server answers.

    Raises:
        CliError: the URL is invalid or Redis does not answer a PING within a second.
    """
    from ..coordination import RedisCoordinator  # noqa: PLC0415 - the redis extra
    from ..queue import QueueError, check_reachable  # noqa: PLC0415

    try:
        check_reachable(url)
    except QueueError as exc:
        raise CliError(f"{option} {exc}") from None
    coordinator: Coordinator = RedisCoordinator(url)
    return coordinator


def execute(
    ops: Sequence[Op],
    *,
    input_name: str,
    settings: JobSettings,
    paths: JobPaths,
    retry_failed: bool,
    console: Console | None,
    title: str,
    queue: str | None = None,
    job: str = "fetch",
    queue_config: QueueConfig | None = None,
) -> JobReport:
    """Open the state, resume it, run what is pending and report (the state is closed after).

    ``queue`` (a Redis URL) shares the job, named ``job``, with other fetch processes.

    Raises:
        CliError: the state belongs to another input, or cannot be opened.
    """
    clock = settings.clock
    state = JobState(paths.state, input_name, queue=queue, job=job, config=queue_config,
                     clock=clock)
    try:
        state.sync(ops, pid=os.getpid(), now=clock.wall())
        reopened = state.reopen(clock.wall(), retry_failed=retry_failed)
        state.open_results(paths.results)
        pending = state.queue.pending()
        tally = LiveTally(clock)
        sink = JsonlAuditSink(paths.audit, secrets=settings.secrets)
        hooks = (*settings.hooks, tally, AuditHook(sink, policy=settings.policy, clock=clock))
        run_settings = JobSettings(settings.policy, settings.workers, settings.coordinator, hooks,
                                   settings.secrets, settings.timeout, clock, settings.seed,
                                   settings.refuse)
        started = clock.monotonic()
        try:
            if console is None:
                run_job(ops, state, run_settings, on_result=tally,
                        on_interrupt=lambda n: _interrupted(None, n))
            else:
                own = worker_name(0).removesuffix("0")
                with ProgressView(console, tally, pending, title, clock,
                                  waits=lambda: queue_waits(state.queue, own)) as view:
                    run_job(ops, state, run_settings, on_result=tally, on_tick=view.tick,
                            on_interrupt=lambda n: _interrupted(console, n))
        finally:
            sink.close()
        elapsed = clock.monotonic() - started
        return JobReport(reopened, state.counts(), state.results(), tally.done, elapsed, state.run)
    finally:
        state.close()


LEASE = 30.0
"""Seconds a fetch worker's lease lasts unless renewed (every 10 s while it runs)."""


def queue_options(args: argparse.Namespace) -> tuple[str | None, str, QueueConfig]:
    """``--queue``, ``--job`` and the queue's rules: a lease lasts :data:`LEASE` seconds
    whatever the deadline (a live worker renews it, a dead one's lapses); deferrals get no
    jitter: the ``retry_at`` a coordinated outcome names is the slot the coordinator booked
    for it, spaced from the fleet's others (jitter moved a request off its slot and next to
    another's, a 21st into a provider window). Only an outcome that names a
    time (``retry_at``: a rate limit, an open breaker) is deferred; one that names none
    (attempts or deadline spent on an unreachable host, say) is a recorded failure:
    ``--attempts`` and ``--deadline`` bound the operation, the queue adds no runs.

    Raises:
        CliError: ``--queue`` is not a Redis URL, or ``--job`` is not a usable name.
    """
    queue: str | None = args.queue
    if queue is not None and not queue.startswith(("redis://", "rediss://", "unix://")):
        raise CliError(f"--queue {queue.rsplit('@', 1)[-1]}: expected a redis://, rediss:// or "
                       "unix:// URL (without --queue the job's queue is the --state file)")
    job = args.job or Path(args.input).stem or "fetch"
    if not job.isprintable() or len(job) > 200:
        raise CliError("--job: expected a printable name of at most 200 characters")
    config = QueueConfig(visibility_timeout=LEASE, max_deferrals=args.max_deferrals,
                         jitter=0.0, backoff=0.5, max_backoff=30.0, own_deferrals=False)
    return queue, job, config


def _default(path: str | None, stem: str, suffix: str) -> Path:
    return Path(path) if path else Path("out") / f"{stem}{suffix}"


def _when(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _interrupted(console: Console | None, in_flight: int) -> None:
    message = (f"stopping: {in_flight} operation(s) in flight are finishing (Ctrl-C again to stop "
               "at once; nothing is lost, the same command resumes)")
    if console is None:
        print(message, file=sys.stderr, flush=True)
    else:
        console.print(message, highlight=False)


FAILED_SHOWN = 5
"""How many failed operations the end of a run names (the rest are in the results file)."""


def print_outcome(console: Console, report: JobReport, paths: JobPaths, now: float) -> None:
    """The lines printed after a job: what happened, what failed and why, what is left to do.

    Every count comes from the same result lines, so the totals and the details agree.
    """
    r = report.reopened
    if r.orphans or r.rate_limited or r.failed:
        console.print(f"resumed: {r.orphans} interrupted, {r.rate_limited} rate-limited now due, "
                      f"{r.failed} failed re-opened", highlight=False)
    by_reason: dict[str, int] = {}
    for line in report.lines:
        by_reason[line["outcome"]] = by_reason.get(line["outcome"], 0) + 1
    parts = ", ".join(f"{reason} {n}" for reason, n in sorted(by_reason.items(), key=lambda kv: -kv[1]))
    console.print(f"{len(report.lines)} operations recorded ({parts or 'none'}); "
                  f"{report.ran} finished in this run in {report.elapsed:.1f} s", highlight=False)
    failed = [line for line in report.lines if not line["ok"] and line["outcome"] != "rate_limited"]
    if failed:
        console.print(f"{len(failed)} failed:", highlight=False)
        for line in failed[:FAILED_SHOWN]:
            status = (f"HTTP {line['status']}" if line.get("status")
                      else f"no response ({line['error']})" if line.get("error") else "no response")
            console.print(f"  {line['id']}  {line['outcome']}  {status}: {line.get('detail', '')}",
                          highlight=False, markup=False)
        if len(failed) > FAILED_SHOWN:
            console.print(f"  … and {len(failed) - FAILED_SHOWN} more: the lines with \"ok\": false "
                          f"in {paths.results}", highlight=False, markup=False)
    limited = [line for line in report.lines if line["outcome"] == "rate_limited"]
    if limited:
        times = [line["retry_at"] for line in limited if line.get("retry_at")]
        later = [t for t in times if t > now]
        if later:
            when = _when(min(later)) + (f" (all by {_when(max(later))})" if max(later) > min(later) else "")
            console.print(f"{len(limited)} rate-limited, left to do: run the same command again "
                          f"after {when}", highlight=False)
        else:
            console.print(f"{len(limited)} rate-limited, left to do: run the same command again "
                          "now to pick them up", highlight=False)
    console.print(f"results: {paths.results}\naudit:   {paths.audit}\nstate:   {paths.state}",
                  highlight=False)


def exit_status(report: JobReport) -> int:
    """3 when operations are left to do, else 1 when this run recorded a failure, else 0.

    A permanent failure (a 404, a rejection) is finished, not left to do: the run that
    recorded it exits 1; a later run with nothing to do exits 0.
    """
    if any(line["outcome"] == "rate_limited" for line in report.lines):
        return EXIT_LEFT_TO_DO
    if any(not line["ok"] and line.get("run") == report.run for line in report.lines):
        return EXIT_FAILED
    return EXIT_OK


def _distinct(source: Path, paths: JobPaths) -> None:
    """Refuse a results, audit or state file that is the input or one of the others."""
    seen: dict[Path, str] = {source.resolve(): "INPUT"}
    for option, path in (("--out", paths.results), ("--audit", paths.audit), ("--state", paths.state)):
        other = seen.setdefault(path.resolve(), option)
        if other != option:
            raise CliError(f"{option} {path}: the same file as {other}")


def build_policy(args: argparse.Namespace) -> Policy:
    """The policy the options describe (``--policy`` with the overriding options applied)."""
    user = with_overrides(load_policy(args.policy), profile=args.profile, deadline=args.deadline,
                          attempts=args.attempts)
    policy = user.policy
    if args.expect_json:
        policy = policy.replace(validator=json_object())
    return queued(policy)


QUEUED_ATTEMPT_TIME = 1.0
"""Seconds of its deadline (half of it, if that is less) an operation of a fetch job keeps
for its attempt after a coordinator wait, at the least."""


def queued(policy: Policy) -> Policy:
    """The policy of an operation that runs on the job's queue.

    A wait that would leave its attempt less than :data:`QUEUED_ATTEMPT_TIME` (or half the
    deadline) ends the operation ``rate_limited`` instead, and the queue runs it at the slot
    the coordinator offered: the worker is free for other work meanwhile, and no attempt is
    sent with a timeout cut to the last milliseconds of its deadline (one that then times out
    under load would count against a healthy provider's breaker).
    """
    if policy.deadline is None:
        return policy
    floor = min(QUEUED_ATTEMPT_TIME, policy.deadline / 2)
    if policy.min_attempt_time >= floor:
        return policy
    return policy.replace(min_attempt_time=floor)


def supervise(args: argparse.Namespace) -> JobFile | None:
    """Read ``--job-file`` and let it supply the policy, profile and output paths."""
    if not args.job_file:
        return None
    job = load_job_file(args.job_file)
    args.policy = job.policy or args.policy
    args.profile = job.profile or args.profile
    args.out = args.out or job.outputs.get("results")
    args.audit = args.audit or job.outputs.get("audit")
    args.state = args.state or job.outputs.get("state")
    return job


def run(args: argparse.Namespace, console: Console, *, clock: Clock = SYSTEM_CLOCK) -> int:
    """Run ``fetch``; every input is checked before the state is touched."""
    job_file = supervise(args)
    policy = build_policy(args)
    secrets: set[str] = set()
    pairs = [parse_header(h, "--header") for h in args.header]
    headers = resolve_headers(pairs, os.environ, "--header", secrets)
    ops = read_ops(args.input, env=os.environ, headers=headers, secrets=secrets)
    queue, job, queue_config = queue_options(args)
    shared, option = (args.redis, "--redis") if args.redis else (queue, "--queue")
    coordinator = redis_coordinator(shared, option) if shared else MemoryCoordinator(clock=clock)
    stem = Path(args.input).stem or "fetch"
    paths = JobPaths(_default(args.out, stem, ".results.jsonl"),
                     _default(args.audit, stem, ".audit.jsonl"),
                     _default(args.state, stem, ".sqlite"))
    for option, path in (("--out", paths.results), ("--audit", paths.audit), ("--state", paths.state)):
        check_new_file(path, option, create_dirs=True)
    check_sqlite_file(paths.state, "--state", "a retrybudget state file", TABLES)
    _distinct(Path(args.input), paths)
    refused = [] if job_file is None else [
        (op, why) for op in ops if (why := job_file.refusal(op)) is not None]
    if job_file is not None:
        write_job_sidecar(paths.audit, job_file, refused)
    if job_file is not None and refused:
        console.print(f"refused {len(refused)} operation(s) outside {job_file.path}'s allowed "
                      f"inputs before any attempt (first: {refused[0][0].id}: {refused[0][1]})",
                      highlight=False)
    settings = JobSettings(policy, args.workers, coordinator, secrets=tuple(sorted(secrets)),
                           timeout=args.timeout, clock=clock,
                           refuse=None if job_file is None else job_file.refusal)
    try:
        report = execute(ops, input_name=str(Path(args.input).resolve()), settings=settings,
                         paths=paths, retry_failed=args.retry_failed,
                         console=None if args.quiet else console, title=f"fetch {args.input}",
                         queue=queue, job=job, queue_config=queue_config)
    finally:
        close = getattr(coordinator, "close", None)
        if close is not None:
            close()
    print_outcome(console, report, paths, clock.wall())
    return exit_status(report)
