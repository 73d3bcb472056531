"""Time to read GitHub's five ``x-ratelimit-*`` headers (target: at most 3 µs).

Times :func:`retrybudget.core.headers.parse_rate_limit_headers` on the headers of a GitHub 200
far from its quota, and :func:`retrybudget.core.classify.classify` of that response (what an
integration does per response), in interleaved rounds of this process's CPU time (which
other processes' load inflates far less than wall time); reports the median and the best
round's µs per call. A bare ``dict`` lookup of the same five names is timed beside them as
a yardstick of the machine's speed in the same run. The same header set parsed again is
read from what the reader remembers of it; a provider's remaining and used counts change on
every response, so the headers of 1,000 responses in a row (the counts counting down) are
timed too: each a set the reader has not seen. GitHub's reset is at most an hour away (here
30 minutes); a reset past the seven-day clamp (a provider asking for more than any wait
retrybudget takes) is timed beside it, without a target: that response is read in full.

Run: python benchmarks/header_parse.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable

from retrybudget.core.classify import ResponseSeen, classify
from retrybudget.core.headers import parse_rate_limit_headers
from retrybudget.core.profiles import GITHUB

TARGET_US = 3.0
NOW = 1_800_000_000.0
HEADERS = (
    ("x-ratelimit-limit", "5000"),
    ("x-ratelimit-remaining", "4987"),
    ("x-ratelimit-reset", str(int(NOW) + 1800)),
    ("x-ratelimit-used", "13"),
    ("x-ratelimit-resource", "core"),
)
"""A GitHub 200 far from its quota, its reset 30 minutes away."""
FAR = tuple((name, "4102444800" if name.endswith("reset") else value) for name, value in HEADERS)
"""The same with a reset in 2100: past the clamp."""


def contenders() -> dict[str, Callable[[], object]]:
    """What is timed."""
    seen = ResponseSeen(200, HEADERS)
    as_dict = dict(HEADERS)
    changing = _changing(HEADERS)
    far = _changing(FAR)

    def lookups() -> object:
        return [as_dict.get(name) for name, _ in HEADERS]

    return {
        "dict lookups of the five names": lookups,
        "parse_rate_limit_headers": lambda: parse_rate_limit_headers(HEADERS, NOW),
        "classify (github profile)": lambda: classify(GITHUB, seen, NOW),
        "parse, counts changing": changing,
        "counts changing, reset clamped": far,
    }


def _changing(headers: tuple[tuple[str, str], ...]) -> Callable[[], object]:
    """Parse the headers of 1,000 responses in a row, remaining counting down (used up)."""
    stream = [tuple((name, str(n) if name.endswith("remaining") else str(5000 - n)
                     if name.endswith("used") else value) for name, value in headers)
              for n in range(4999, 3999, -1)]
    responses = itertools.cycle(stream)
    return lambda: parse_rate_limit_headers(next(responses), NOW)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=31, help="interleaved rounds")
    args = parser.parse_args(argv)
    funcs = contenders()
    samples: dict[str, list[float]] = {name: [] for name in funcs}
    for _ in range(args.rounds):
        for name, fn in funcs.items():
            start = time.process_time_ns()
            for _ in range(args.calls):
                fn()
            samples[name].append((time.process_time_ns() - start) / args.calls / 1000)
    print(f"GitHub's five quota headers ({args.rounds} rounds x {args.calls} calls, CPU time)")
    print(f"{'':<32} {'median':>8} {'best':>8}")
    for name, values in samples.items():
        print(f"{name:<32} {statistics.median(values):8.2f} {min(values):8.2f} µs")
    for name in ("parse_rate_limit_headers", "parse, counts changing"):
        for label, pick in (("median", statistics.median), ("best", min)):
            parse = pick(samples[name])
            verdict = "MET" if parse <= TARGET_US else "NOT MET"
            print(f"{name} ({label}): {parse:.2f} µs (target <= {TARGET_US} µs: {verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
