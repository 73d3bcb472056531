"""``retrybudget demo``: the main job, end to end, against a rate-limited sandbox provider.

The sandbox serves synthetic rentals behind a fixed-window rate limit (GitHub style by
default) with seeded faults; the fetch job looks up each rental's availability with
several workers that share one :class:`~retrybudget.coordination.MemoryCoordinator`, so
one worker's 429 (or exhausted quota) holds every worker at the same gate. The job is the
same durable job ``fetch`` runs; the demo starts it afresh each time.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console

from .._clock import SYSTEM_CLOCK, Clock
from .._cmdline import EXIT_OK, CliError, check_new_file, os_reason
from ..coordination import MemoryCoordinator
from ..core.policy import Backoff, Jitter, Policy, background
from ..integrations import json_object
from ..observe import load_audit
from ..sandbox import Faults, RateLimit, SandboxConfig, serve_in_thread
from ._chart import render_chart
from ._fetch import JobPaths, JobReport, execute
from ._hints import program
from ._inputs import read_ops
from ._job import JobSettings
from ._summary import Capacity, render_summary, summarize

__all__ = ["run"]


def _config(args: argparse.Namespace) -> SandboxConfig:
    rest = 1.0 - args.fault_reset - args.fault_malformed
    if args.fault_5xx > rest:
        raise CliError("--fault-5xx, --fault-reset and --fault-malformed add up to more than 1")
    faults = Faults(seed=args.seed, error_rate=args.fault_5xx, error_statuses=(502, 503, 504),
                    reset_rate=args.fault_reset, malformed_rate=args.fault_malformed,
                    latency_s=args.latency, latency_jitter_s=args.latency)
    limit = RateLimit(limit=args.limit, window_s=args.window, style=args.style,
                      github_403=args.github_403)
    return SandboxConfig(rentals=args.size, rate_limit=limit, faults=faults)


def _rental_ids(size: int, missing: float) -> list[int]:
    """1..size, with every n-th lookup pointing past the last rental (a 404)."""
    every = round(1 / missing) if missing > 0 else 0
    return [size + i if every and i % every == 0 else i for i in range(1, size + 1)]


OTHER_PATH = "/rentals"
"""What the other client of the same account asks for (its requests count against the quota)."""


class _OtherClient:
    """Another client of the same quota: after ``delay``, as a window opens, it spends the window."""

    def __init__(self, url: str, limit: int, window: float, *, delay: float, clock: Clock) -> None:
        self.url = url
        self.limit = limit
        self.window = window
        self.delay = delay
        self.clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="retrybudget-demo-other", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10.0)

    def _run(self) -> None:
        if self._stop.wait(self.delay):
            return
        if self._stop.wait(self.window - self.clock.wall() % self.window):  # the next window opens
            return
        with httpx.Client(timeout=5.0) as client:
            for _ in range(self.limit + 1):  # bounded: one window's quota and the answer that says so
                if self._stop.is_set():
                    return
                try:
                    status = client.get(self.url, params={"limit": 1}).status_code
                except httpx.HTTPError:
                    continue
                if status in (403, 429):
                    return


def _gate_waits(records: Sequence[Mapping[str, Any]]) -> list[tuple[float, float]]:
    """``(start epoch seconds, seconds)`` of every gate wait in the audit records.

    A wait ends when the attempt after it starts (or the operation ends); waits after the
    same attempt follow one another.
    """
    out = []
    for record in records:
        started = float(record.get("started_at") or 0.0)
        history = list(record.get("history") or ())
        end_of_op = started + float(record.get("elapsed") or 0.0)
        for after, group in _by_attempt(record.get("waits") or ()).items():
            nxt = next((a for a in history if int(a.get("number") or 0) == after + 1), None)
            end = started + float(nxt["started"]) if nxt else end_of_op
            t = end - sum(float(w.get("seconds") or 0.0) for w in group)
            for w in group:
                seconds = float(w.get("seconds") or 0.0)
                if w.get("reason") == "gate":
                    out.append((t, seconds))
                t += seconds
    return out


def _story(stats: Mapping[str, Any], records: Sequence[Mapping[str, Any]]
           ) -> tuple[dict[str, Any], dict[str, int]]:
    """The provider's view of the job alone, and how the other client's spend played out."""
    ours = [r for r in stats["requests"] if r.get("path") != OTHER_PATH]
    provider = {**stats, "count": len(ours), "requests": ours,
                "by_status": dict(Counter(str(r.get("status")) for r in ours))}
    throttled = [sum(1 for a in r.get("history") or () if a.get("classification") == "rate_limited")
                 for r in records]
    theirs = [r for r in stats["requests"] if r.get("path") == OTHER_PATH]
    story = {"other_client_requests": len(theirs),
             "other_client_throttled": sum(1 for r in theirs if r.get("status") in (403, 429)),
             "operations_throttled": sum(1 for n in throttled if n),
             "operations_throttled_twice": sum(1 for n in throttled if n > 1)}
    return provider, story


def _by_attempt(waits: Any) -> dict[int, list[dict[str, Any]]]:
    groups: dict[int, list[dict[str, Any]]] = {}
    for w in waits:
        groups.setdefault(int(w.get("after_attempt") or 0), []).append(w)
    return groups


def _fresh(out: Path, files: Sequence[Path]) -> None:
    """Create ``out`` if needed and remove an earlier demo's ``files`` (bad input: CliError)."""
    for file in files:
        check_new_file(file, "--out", create_dirs=True)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for stale in files:
            stale.unlink(missing_ok=True)
    except OSError as exc:
        raise CliError(f"--out {out}: cannot write there: {os_reason(exc)}") from None


@dataclass(frozen=True, slots=True)
class _Outputs:
    """The files a demo writes in its folder."""

    paths: JobPaths
    chart: Path
    urls: Path
    summary: Path

    @classmethod
    def under(cls, out: Path) -> _Outputs:
        """The demo's files in the folder ``out``."""
        paths = JobPaths(out / "demo-results.jsonl", out / "demo-audit.jsonl",
                         out / "demo-state.sqlite")
        return cls(paths, out / "demo-requests.html", out / "demo-urls.txt",
                   out / "demo-summary.json")

    def every_file(self) -> list[Path]:
        """Each file a run may leave, the state database's companions included."""
        state = self.paths.state
        companions = [state.with_name(state.name + end) for end in (".lock", "-wal", "-shm")]
        return [self.paths.results, self.paths.audit, state, self.chart, self.urls, self.summary,
                *companions]


def run(args: argparse.Namespace, console: Console, *, clock: Clock = SYSTEM_CLOCK) -> int:
    """Run the demo; 0 when it ran (failed lookups are part of the story, not an error)."""
    out = Path(args.out)
    files = _Outputs.under(out)
    config = _config(args)
    _fresh(out, files.every_file())
    policy = background(
        profile="github", max_attempts=5, deadline=args.deadline,
        backoff=Backoff(base=0.25, cap=4.0, multiplier=2.0, jitter=Jitter.FULL),
        validator=json_object(["rental_id", "available"]),
    )
    console.print(f"[bold]retrybudget demo[/bold]: {args.size} rental availability lookups, "
                  f"{args.workers} workers sharing one gate; the provider allows {args.limit} "
                  f"requests per {args.window} s ({args.style} style) and injects faults "
                  f"(seed {args.seed})")
    report, stats, started_wall = _run_lookups(args, console, clock, config, policy, files)
    capacity = Capacity(args.limit, float(args.window), started_wall)
    records = load_audit(files.paths.audit).records
    provider, story = _story(stats, records)
    summary = summarize(report.lines, elapsed=report.elapsed, provider=provider, capacity=capacity)
    summary["story"] = story
    render_summary(console, summary, "What happened")
    html = render_chart(stats["requests"], start=started_wall, limit=args.limit,
                        window_s=float(args.window), title="Requests the provider saw",
                        notes=_notes(args, summary, report.elapsed, capacity),
                        gate_waits=_gate_waits(records), other_path=OTHER_PATH)
    files.chart.write_text(html, "utf-8")
    files.summary.write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
    if story["other_client_requests"]:
        console.print(f"another client spent the quota ({story['other_client_requests']} requests): "
                      f"{story['operations_throttled']} lookups met a throttled answer, "
                      f"{story['operations_throttled_twice']} of them twice; the gate held every "
                      "worker until the provider's reset")
    console.print(f"\nresults: {files.paths.results}\naudit:   {files.paths.audit}\n"
                  f"state:   {files.paths.state}\nchart:   {files.chart}\n"
                  f"summary: {files.summary}\nurls:    {files.urls}\n"
                  f"review the audit with: {program()} report {files.paths.audit}")
    return EXIT_OK


def _run_lookups(args: argparse.Namespace, console: Console, clock: Clock, config: SandboxConfig,
                 policy: Policy, files: _Outputs) -> tuple[JobReport, dict[str, Any], float]:
    """Serve the sandbox, let the other client of the account in (unless told not to) and run
    the lookups against it: the job's report, the provider's stats and the wall instant the
    job started."""
    ideal = Capacity(args.limit, float(args.window), clock.wall()).ideal_seconds(args.size)
    with serve_in_thread(config) as sandbox:
        other = None if args.no_other_client else _OtherClient(
            sandbox.url(OTHER_PATH), args.limit, float(args.window),
            delay=max(1.0, ideal / 3), clock=clock)
        if other is not None:
            console.print(f"another client of the same account will spend the quota about "
                          f"{other.delay:.0f} s in: watch the gate close and every worker wait")
        files.urls.write_text("".join(sandbox.url(f"/rentals/{i}/availability") + "\n"
                                      for i in _rental_ids(args.size, args.missing)), "utf-8")
        ops = read_ops(files.urls, env={}, secrets=set())
        console.print(f"sandbox provider at {sandbox.base_url}; policy: {policy.name}, "
                      f"{policy.max_attempts} attempts in {policy.deadline:g} s per lookup, "
                      f"profile {policy.profile.name}")
        settings = JobSettings(policy, args.workers, MemoryCoordinator(clock=clock), clock=clock,
                               timeout=10.0, seed=args.seed)
        started_wall = clock.wall()
        if other is not None:
            other.start()
        try:
            report = execute(ops, input_name=str(files.urls.resolve()), settings=settings,
                             paths=files.paths, retry_failed=False, console=console,
                             title="lookups")
        finally:
            if other is not None:
                other.stop()
        return report, sandbox.stats(), started_wall


def _notes(args: argparse.Namespace, summary: Mapping[str, Any], elapsed: float,
           capacity: Capacity) -> list[str]:
    """The chart's notes: what the job did against the least time any client could take, and
    what the other client's spending did to it."""
    notes = [f"{summary['logical_operations']} lookups, {summary['attempts']} attempts, "
             f"{summary['retries']} retries; outcomes: "
             + ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items()),
             f"{args.workers} workers shared one gate; the job took {elapsed:.1f} s against "
             f"an ideal of {capacity.ideal_seconds(summary['logical_operations']):.1f} s (the least "
             f"any client could take: the first window's {args.limit} requests at once, then "
             f"{args.limit} per {args.window} s window)."]
    story = summary["story"]
    if story["other_client_requests"]:
        notes.append(f"Another client spent the quota with {story['other_client_requests']} requests; "
                     f"{story['operations_throttled']} lookups met a throttled answer, "
                     f"{story['operations_throttled_twice']} met one twice: after the first, every "
                     "worker waited at the gate for the provider's reset.")
    return notes
