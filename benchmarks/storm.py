"""Retry storms: N workers x M GETs against one provider's fixed-window rate limit.

"When 16 workers share a provider limited to 20 requests per second": every contender runs
``workers`` x ``ops`` GETs against the sandbox provider (a child process on loopback) whose
fixed window admits ``limit`` requests per ``window`` seconds, in four scenarios:

1. ``retry-after``: over the limit, a 429 with ``Retry-After`` (GitHub-style quota headers,
   ``x-ratelimit-*``, on every answer);
2. ``github-403``: over the limit, GitHub's 403 with ``x-ratelimit-remaining: 0`` and the
   reset, and no ``Retry-After``;
3. ``503``: the same limit, and 20 % of the admitted requests answered 503 (seeded), 5
   attempts per operation for every contender;
4. ``outage``: every request answered 503, one operation per worker (all concurrent), 5 s
   deadline;
5. ``sustained``: the same outage, several operations per worker (the breaker's case).

``--scenario 429-only`` adds a sixth, outside the default run: 429 + ``Retry-After`` with no
quota headers at all.

Contenders: retrybudget (``MemoryCoordinator`` on threads and on asyncio tasks,
``RedisCoordinator`` on several processes) and tenacity, urllib3 ``Retry``, stamina, backoff
and httpx-retries, configured as their documentation shows (storm_contenders.py). Each
contender runs against a fresh sandbox under the same run id, so every contender gets the
same seeded faults and windows of its own; each operation asks for its own rental id, so
the provider's log shows which operations it served.

Reported per contender: provider requests per logical operation, rate-limit rejections, the
busiest window against the limit, wall time against the ideal (the end of the window in which
a provider serving ``limit`` per window from the first request's window would serve the last
operation),
operations past their deadline, and successes the provider never served (a success claimed
for an operation whose rental id has no 2xx in the provider's log; must be 0).

Bounded: every operation has its attempts and deadline, every contender a time limit, every
service start a timeout. A full run takes about four minutes on a 2-core machine; ``--quick``
about a minute for every contender (seconds for one).

Usage::

    python benchmarks/storm.py [--quick] [--scenario NAME ...] [--contenders a,b,...]
                               [--json OUT] [--update-docs docs/storm.md] [--check]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from retrybudget.core.profiles import GENERIC, GITHUB, Profile
from storm_contenders import CONTENDERS, Contender, Run, Setting
from storm_services import Sandbox, redis_server, sandbox

PAST_DEADLINE_TOLERANCE = 0.01
"""Seconds of measuring overhead allowed before an operation counts as past its deadline."""

FAULT_SEED = 19
"""The 503 scenario's fault seed: with the run id ``storm-503`` its draws give 19.5 % 503s over
the first 200 requests and 20.4 % over 260 (every contender gets the same sequence)."""

DOCS_START = "<!-- storm:results:start -->"
DOCS_END = "<!-- storm:results:end -->"


@dataclass(frozen=True)
class Sizes:
    """How big a run is."""

    workers: int = 16
    limit: int = 20
    window: int = 1
    ops: int = 6
    outage_ops: int = 1
    sustained_ops: int = 6
    processes: int = 4

    @classmethod
    def quick(cls) -> Sizes:
        """Small sizes for a smoke test (seconds per contender)."""
        return cls(workers=8, ops=3, outage_ops=1, sustained_ops=3, processes=2)


@dataclass(frozen=True)
class Target:
    """One of retrybudget's targets: a figure of a result and its bound."""

    label: str
    figure: Callable[[Result], float]
    bound: Callable[[Sizes], float]

    def met(self, result: Result, sizes: Sizes) -> bool:
        """Whether ``result`` is within the bound."""
        return self.figure(result) <= self.bound(sizes) + 1e-9


@dataclass(frozen=True)
class Scenario:
    """A provider behaviour and the operations' deadline.

    Attributes:
        name: the ``--scenario`` name.
        title: what the provider does.
        options: sandbox options besides the limit.
        deadline: seconds each operation may take.
        github: classify with the GitHub profile (else the generic one).
        rejections: statuses that are the rate limit's rejections.
        outage: every request fails (no ideal time).
        per_worker: the ``Sizes`` field that says how many operations each worker runs.
        attempts: attempts per operation, for every contender.
        targets: what retrybudget must meet.
        default: part of a run that names no ``--scenario``.
    """

    name: str
    title: str
    options: tuple[str, ...]
    deadline: float
    github: bool = False
    rejections: frozenset[int] = frozenset({429})
    outage: bool = False
    per_worker: str = "ops"
    attempts: int = 3
    targets: tuple[Target, ...] = ()
    default: bool = True

    def ops_per_worker(self, sizes: Sizes) -> int:
        """Operations each worker runs."""
        return int(getattr(sizes, self.per_worker))


def _per_op(r: Result) -> float:
    return r.requests_per_op


def _coordinator(r: Result, name: str) -> float:
    return float((r.extra.get("coordinator") or {}).get(name, 0))


PACED = (
    Target("requests/op <= 1.01", _per_op, lambda s: 1.01),
    Target("0 rejections", lambda r: r.rejections, lambda s: 0),
    Target("busiest window = limit", lambda r: abs(r.busiest - r.limit), lambda s: 0),
    Target("wall <= 1.05 x ideal", lambda r: r.wall_ratio, lambda s: 1.05),
)
ALWAYS = (
    Target("0 past deadline", lambda r: r.past_deadline, lambda s: 0),
    Target("0 unserved successes", lambda r: r.unserved, lambda s: 0),
)

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("retry-after", "429 + Retry-After (x-ratelimit-* headers on every answer)",
             ("--style", "github"), 10.0,
             targets=PACED),
    Scenario("github-403", "GitHub 403 + x-ratelimit-reset, no Retry-After",
             ("--style", "github", "--github-403"), 10.0, github=True,
             rejections=frozenset({403, 429}), targets=PACED),
    Scenario("503", "20 % 503s on top of the limit, 5 attempts per operation",
             ("--style", "github", "--fault-5xx", "0.2", "--seed", str(FAULT_SEED)), 10.0,
             attempts=5,
             targets=(Target("every operation ok", lambda r: r.ops - r.ok, lambda s: 0),
                      Target("requests/op <= 1.30", _per_op, lambda s: 1.30),
                      Target("0 retries refused",
                             lambda r: _coordinator(r, "retries_refused"), lambda s: 0))),
    Scenario("outage", "hard outage (every request 503), 16 concurrent operations, 5 s deadline",
             ("--style", "github", "--outage", "0:1000000"), 5.0, outage=True,
             per_worker="outage_ops",
             targets=(Target("requests/op <= 1.20", _per_op, lambda s: 1.2),)),
    Scenario("sustained", "sustained outage (every request 503), 5 s deadline",
             ("--style", "github", "--outage", "0:1000000"), 5.0, outage=True,
             per_worker="sustained_ops",
             targets=(Target("breaker opened",
                             lambda r: 0 if _coordinator(r, "breaker_opened") else 1,
                             lambda s: 0),
                      Target("requests/op <= 1.05", _per_op, lambda s: 1.05))),
    Scenario("429-only", "429 + Retry-After and no quota headers at all",
             ("--style", "retry-after"), 10.0, default=False),
)


def ideal_wall(first_arrival: float, ops: int, sizes: Sizes) -> float:
    """The end (wall clock) of the window in which a provider serving ``limit`` requests per
    window, from the window of the first request, would serve the last of ``ops``: a lower
    bound of the end no client can beat."""
    start = math.floor(first_arrival / sizes.window) * sizes.window
    return start + math.ceil(ops / sizes.limit) * sizes.window


@dataclass
class Result:
    """One contender's figures in one scenario."""

    contender: str
    label: str
    ops: int
    ok: int
    requests: int
    rejections: int
    busiest: int
    limit: int
    wall: float
    ideal: float
    past_deadline: int
    unserved: int
    missing: int
    outcomes: dict[str, int]
    by_status: dict[str, int]
    extra: dict[str, Any] = field(default_factory=dict)
    targets: dict[str, bool] = field(default_factory=dict)

    @property
    def requests_per_op(self) -> float:
        """Provider requests per logical operation."""
        return self.requests / self.ops if self.ops else 0.0

    @property
    def wall_ratio(self) -> float:
        """Wall time over the ideal."""
        return self.wall / self.ideal if self.ideal else 0.0

    def as_json(self) -> dict[str, Any]:
        """Everything, plus the derived figures."""
        return {**asdict(self), "requests_per_op": round(self.requests_per_op, 4),
                "wall_ratio": round(self.wall_ratio, 4)}


def measure(scenario: Scenario, contender: Contender, run: Run, stats: dict[str, Any],
            sizes: Sizes, expected: int) -> Result:
    """A contender's figures, from its operations and the provider's log of its run."""
    records = stats["requests"]
    served = {r["path"] for r in records if r["status"] is not None and 200 <= r["status"] < 300}
    unserved = sum(1 for op in run.ops
                   if op.ok and f"/rentals/{op.tag}/availability" not in served)
    windows = Counter(math.floor(r["arrival"] / sizes.window) for r in records)
    statuses = Counter(str(r["status"]) for r in records)
    rejections = sum(n for status, n in statuses.items()
                     if status.isdigit() and int(status) in scenario.rejections)
    missing = expected - len(run.ops)
    late = sum(1 for op in run.ops
               if op.end - op.start > scenario.deadline + PAST_DEADLINE_TOLERANCE)
    end = max((op.end for op in run.ops), default=run.started)
    ideal = 0.0
    if not scenario.outage and records:
        wall_minus_monotonic = time.time() - time.monotonic()
        first = min(r["arrival"] for r in records)
        ideal = ideal_wall(first, expected, sizes) - (run.started + wall_minus_monotonic)
    if windows:
        base = min(windows)
        run.extra["per_window"] = [windows.get(base + i, 0)
                                   for i in range(max(windows) - base + 1)]
    if records:
        first = min(r["arrival"] for r in records)
        run.extra["last_arrival_s"] = round(max(r["arrival"] for r in records) - first, 3)
        run.extra["first_phase_s"] = round(first % sizes.window, 3)
    return Result(
        contender=contender.name, label=contender.label, ops=expected,
        ok=sum(op.ok for op in run.ops), requests=int(stats["count"]), rejections=rejections,
        busiest=max(windows.values(), default=0), limit=sizes.limit,
        wall=end - run.started,
        ideal=ideal,
        past_deadline=late + missing, unserved=unserved, missing=missing,
        outcomes=dict(Counter(op.outcome for op in run.ops).most_common()),
        by_status=dict(sorted(statuses.items())), extra=run.extra,
    )


# Tables ------------------------------------------------------------------------------------

COLUMNS = ("contender", "ok / ops", "requests/op", "rate-limit rejections", "busiest window",
           "wall s", "wall / ideal", "past deadline", "unserved successes")


def row(r: Result) -> tuple[str, ...]:
    """One table row."""
    ratio = f"{r.wall_ratio:.2f}" if r.ideal else "-"
    return (r.label, f"{r.ok} / {r.ops}", f"{r.requests_per_op:.3f}", str(r.rejections),
            f"{r.busiest} / {r.limit}", f"{r.wall:.2f}", ratio, str(r.past_deadline),
            str(r.unserved))


def heading(scenario: Scenario, sizes: Sizes, index: int) -> str:
    """What a scenario's table shows."""
    ops = scenario.ops_per_worker(sizes)
    total = sizes.workers * ops
    windows = math.ceil(total / sizes.limit)
    ideal = "" if scenario.outage else (
        f"ideal: the end of window {windows} counted from the first request's, ")
    return (f"Scenario {index}, {scenario.name}: {scenario.title}. {sizes.workers} workers x "
            f"{ops} GETs, {scenario.attempts} attempts each, limit {sizes.limit} per "
            f"{sizes.window} s window, {ideal}deadline {scenario.deadline:g} s")


def text_table(results: Sequence[Result]) -> str:
    """A plain-text table."""
    rows = [COLUMNS, *(row(r) for r in results)]
    widths = [max(len(line[i]) for line in rows) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(line, widths, strict=True)))
                     for line in rows)


def markdown_table(results: Sequence[Result]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(COLUMNS) + " |",
             "|" + "|".join(["---"] + ["---:"] * (len(COLUMNS) - 1)) + "|"]
    lines += ["| " + " | ".join(row(r)) + " |" for r in results]
    return "\n".join(lines)


def verdicts(scenario: Scenario, results: Sequence[Result]) -> list[str]:
    """One line per retrybudget contender: its targets, met or missed."""
    lines = []
    for r in results:
        if not r.targets:
            continue
        marks = ", ".join(f"{label} {'met' if ok else 'MISSED'}" for label, ok in r.targets.items())
        lines.append(f"{r.label}: {marks}")
    return lines


# Running -----------------------------------------------------------------------------------


@contextmanager
def services(sizes: Sizes, scenario: Scenario, redis: bool) -> Iterator[tuple[Sandbox, str | None]]:
    """A fresh sandbox for the scenario, and a redis-server (its URL) when asked for one."""
    options = ["--limit", str(sizes.limit), "--window", str(sizes.window),
               "--rentals", "10000000", *scenario.options]
    with ExitStack() as stack:
        provider = stack.enter_context(sandbox(options))
        url = stack.enter_context(redis_server()) if redis else None
        yield provider, url


def run_contender(scenario: Scenario, contender: Contender, sizes: Sizes,
                  profile: Profile) -> Result:
    """One contender in one scenario, against its own fresh sandbox.

    Every contender uses the same run id on a fresh provider, so each sees the same seeded
    sequence of faults (the n-th request gets the same answer) and windows of its own.
    """
    ops = scenario.ops_per_worker(sizes)
    run_id = f"storm-{scenario.name}"
    with services(sizes, scenario, contender.needs_redis) as (provider, redis_url):
        setting = Setting(base_url=provider.base_url, run_id=run_id, workers=sizes.workers,
                          ops_per_worker=ops, deadline=scenario.deadline, request_timeout=5.0,
                          profile=profile, processes=sizes.processes, redis_url=redis_url,
                          time_limit=max(60.0, 10 * ops * scenario.deadline),
                          attempts=scenario.attempts)
        run = contender.run(setting)
        result = measure(scenario, contender, run, provider.stats(run_id), sizes,
                         sizes.workers * ops)
    if contender.retrybudget:
        result.targets = {t.label: t.met(result, sizes) for t in (*scenario.targets, *ALWAYS)}
    return result


def run_scenario(scenario: Scenario, index: int, contenders: Sequence[Contender], sizes: Sizes,
                 github_slack: float) -> list[Result]:
    """Every contender in one scenario, one after the other; prints the table."""
    print(heading(scenario, sizes, index), flush=True)
    profile = GITHUB.derive("github", reset_slack=github_slack) if scenario.github else GENERIC
    results: list[Result] = []
    for contender in contenders:
        result = run_contender(scenario, contender, sizes, profile)
        results.append(result)
        print(f"  {contender.label}: {result.ok}/{result.ops} ok, "
              f"{result.requests_per_op:.3f} requests/op, {result.wall:.2f} s", flush=True)
    print(text_table(results))
    for line in verdicts(scenario, results):
        print("  " + line)
    print(flush=True)
    return results


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "absent"


def machine() -> dict[str, Any]:
    """Date-free context: cores, Python, and the versions of every library compared."""
    names = ("retrybudget", "tenacity", "urllib3", "requests", "stamina", "backoff",
             "httpx-retries", "httpx", "redis")
    versions = {name: _version(name) for name in names}
    return {"cores": os.cpu_count(), "python": platform.python_version(),
            "system": platform.system(), "versions": versions}


def docs_block(command: str, sizes: Sizes, sections: Sequence[tuple[Scenario, list[Result]]],
               context: dict[str, Any]) -> str:
    """The results block of docs/storm.md."""
    versions = ", ".join(f"{k} {v}" for k, v in context["versions"].items())
    lines = [DOCS_START, "",
             f"Command: `{command}`", "",
             f"Machine: {context['cores']} cores, {context['system']}, Python "
             f"{context['python']}; {versions}.", ""]
    for index, (scenario, results) in enumerate(sections, 1):
        lines += [f"### {heading(scenario, sizes, index)}", "", markdown_table(results), ""]
        lines += [f"- {line}" for line in verdicts(scenario, results)]
        lines.append("")
    lines.append(DOCS_END)
    return "\n".join(lines)


def update_docs(path: Path, block: str) -> None:
    """Replace the results block of ``path`` (between the markers) with ``block``."""
    text = path.read_text(encoding="utf-8")
    start, end = text.find(DOCS_START), text.find(DOCS_END)
    if start < 0 or end < start:
        raise SystemExit(f"{path} has no {DOCS_START} ... {DOCS_END} block")
    path.write_text(text[:start] + block + text[end + len(DOCS_END):], encoding="utf-8")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    names = [c.name for c in CONTENDERS]
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument("--scenario", action="append", choices=[s.name for s in SCENARIOS],
                        help="run this scenario (repeatable; default: all but 429-only)")
    parser.add_argument("--contenders", default=",".join(names),
                        help=f"comma-separated, from: {', '.join(names)} (default: all)")
    parser.add_argument("--workers", type=int, help="concurrent workers (default 16)")
    parser.add_argument("--ops", type=int, help="operations per worker (default 6)")
    parser.add_argument("--github-slack", type=float, default=0.0,
                        help="reset_slack of the GitHub profile in the github-403 scenario "
                             "(default 0: the sandbox shares this machine's clock; the stock "
                             "profile has 1 s)")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    parser.add_argument("--update-docs", type=Path,
                        help="rewrite the results block of this Markdown file")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a retrybudget target is missed")
    args = parser.parse_args(argv)
    unknown = set(args.contenders.split(",")) - set(names)
    if unknown:
        parser.error(f"unknown contenders: {', '.join(sorted(unknown))}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the scenarios, print the tables, write what was asked."""
    args = parse(argv)
    sizes = Sizes.quick() if args.quick else Sizes()
    if args.workers:
        sizes = replace(sizes, workers=args.workers)
    if args.ops:
        sizes = replace(sizes, ops=args.ops)
    wanted = args.contenders.split(",")
    contenders = [c for c in CONTENDERS if c.name in wanted]
    scenarios = [s for s in SCENARIOS
                 if (s.default if args.scenario is None else s.name in args.scenario)]
    command = shlex.join(["python", "benchmarks/storm.py",
                          *(sys.argv[1:] if argv is None else argv)])
    context = machine()
    print(f"{command}\n{context['cores']} cores, Python {context['python']}\n", flush=True)
    sections = [(s, run_scenario(s, SCENARIOS.index(s) + 1, contenders, sizes,
                                 args.github_slack))
                for s in scenarios]
    if args.json:
        document = {"command": command, "machine": context, "sizes": asdict(sizes),
                    "scenarios": [{"name": s.name, "title": s.title, "deadline": s.deadline,
                                   "results": [r.as_json() for r in results]}
                                  for s, results in sections]}
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    if args.update_docs:
        update_docs(args.update_docs, docs_block(command, sizes, sections, context))
    missed = [r for _, results in sections for r in results if not all(r.targets.values())]
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
