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
from pathlib import Path

from rich.console import Console

from .._clock import SYSTEM_CLOCK, Clock
from ..coordination import MemoryCoordinator
from ..core.policy import Backoff, Jitter, background
from ..integrations import json_object
from ..sandbox import Faults, RateLimit, SandboxConfig, serve_in_thread
from ._chart import render_chart
from ._errors import EXIT_OK, CliError
from ._fetch import JobPaths, execute
from ._hints import program
from ._inputs import read_ops
from ._job import JobSettings
from ._paths import os_reason
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


def run(args: argparse.Namespace, console: Console, *, clock: Clock = SYSTEM_CLOCK) -> int:
    """Run the demo; 0 when it ran (failed lookups are part of the story, not an error)."""
    out = Path(args.out)
    paths = JobPaths(out / "demo-results.jsonl", out / "demo-audit.jsonl", out / "demo-state.sqlite")
    chart = out / "demo-requests.html"
    urls_file = out / "demo-urls.txt"
    config = _config(args)
    blocker = next((p for p in (out, *out.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        shown = "not a directory" if blocker == out else f"{blocker} is not a directory"
        raise CliError(f"--out {out}: {shown}")
    try:
        out.mkdir(parents=True, exist_ok=True)
        for stale in (paths.results, paths.audit, paths.state, chart, urls_file):
            stale.unlink(missing_ok=True)
    except OSError as exc:
        raise CliError(f"--out {out}: cannot write there: {os_reason(exc)}") from None
    policy = background(
        profile="github", max_attempts=5, deadline=args.deadline,
        backoff=Backoff(base=0.25, cap=4.0, multiplier=2.0, jitter=Jitter.FULL),
        validator=json_object(["rental_id", "available"]),
    )
    console.print(f"[bold]retrybudget demo[/bold]: {args.size} rental availability lookups, "
                  f"{args.workers} workers sharing one gate; the provider allows {args.limit} "
                  f"requests per {args.window} s ({args.style} style) and injects faults "
                  f"(seed {args.seed})")
    with serve_in_thread(config) as sandbox:
        urls_file.write_text("".join(sandbox.url(f"/rentals/{i}/availability") + "\n"
                                     for i in _rental_ids(args.size, args.missing)), "utf-8")
        ops = read_ops(urls_file, env={}, secrets=set())
        console.print(f"sandbox provider at {sandbox.base_url}; policy: {policy.name}, "
                      f"{policy.max_attempts} attempts in {policy.deadline:g} s per lookup, "
                      f"profile {policy.profile.name}")
        settings = JobSettings(policy, args.workers, MemoryCoordinator(clock=clock), clock=clock,
                               timeout=10.0, seed=args.seed)
        started_wall = clock.wall()
        report = execute(ops, input_name=str(urls_file.resolve()), settings=settings, paths=paths,
                         retry_failed=False, console=console, title="lookups")
        provider = sandbox.stats()
    capacity = Capacity(args.limit, float(args.window), started_wall)
    summary = summarize(report.lines, elapsed=report.elapsed, provider=provider, capacity=capacity)
    render_summary(console, summary, "What happened")
    notes = [f"{summary['logical_operations']} lookups, {summary['attempts']} attempts, "
             f"{summary['retries']} retries; outcomes: "
             + ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items()),
             f"{args.workers} workers shared one gate; the job took {report.elapsed:.1f} s against "
             f"an ideal of {capacity.ideal_seconds(summary['logical_operations']):.1f} s (the least "
             f"any client could take: the first window's {args.limit} requests at once, then "
             f"{args.limit} per {args.window} s window)."]
    html = render_chart(provider["requests"], start=started_wall, limit=args.limit,
                        window_s=float(args.window), title="Requests the provider saw", notes=notes)
    chart.write_text(html, "utf-8")
    (out / "demo-summary.json").write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
    console.print(f"\nresults: {paths.results}\naudit:   {paths.audit}\nchart:   {chart}\n"
                  f"summary: {out / 'demo-summary.json'}\n"
                  f"review the audit with: {program()} report {paths.audit}")
    return EXIT_OK
