"""Success-path overhead per logical operation: retrybudget's sync driver against peers.

Each contender wraps the same trivial function (it returns a constant) with its
recommended retry decorator or call form, every one given the same budget (3 attempts,
a 10 s cap), and is timed in the same process, in interleaved rounds, so machine noise
hits every contender alike. Tenacity is timed both as a decorator (which copies its
``Retrying`` on every call) and as a pre-built ``Retrying`` called directly (its fast
form). Reported: the median ns per call over the rounds, minus the bare call; each ratio
against retrybudget and against backoff (the fastest peer; target: retrybudget's call at
most 1.0x backoff, stretch 0.5x); and whether per-operation stats (attempts, waits,
outcome) are available after the call.

Run: python benchmarks/overhead.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

TARGET = 1.0
STRETCH = 0.5


def work() -> int:
    return 42


def contenders() -> dict[str, Callable[[], object]]:
    import backoff
    import stamina
    import tenacity

    import retrybudget as rb

    retrier = rb.Retrier(policy=rb.Policy())

    def retrybudget_call() -> object:
        return retrier.call(work)

    retrybudget_decorated = rb.retrying(rb.Policy())(work)

    tenacity_options = {
        "stop": tenacity.stop_after_attempt(3),
        "wait": tenacity.wait_exponential_jitter(exp_base=2, max=5),
        "reraise": True,
    }
    tenacity_decorated = tenacity.retry(**tenacity_options)(work)
    tenacity_retrying = tenacity.Retrying(**tenacity_options)

    def tenacity_prebuilt() -> object:
        return tenacity_retrying(work)

    stamina_decorated = stamina.retry(on=ConnectionError, attempts=3, timeout=10.0)(work)
    backoff_decorated = backoff.on_exception(backoff.expo, ConnectionError, max_tries=3,
                                             max_time=10)(work)
    return {
        "bare call": work,
        "retrybudget (call, Outcome)": retrybudget_call,
        "retrybudget (@retrying)": retrybudget_decorated,
        "backoff": backoff_decorated,
        "tenacity (decorator)": tenacity_decorated,
        "tenacity (pre-built Retrying)": tenacity_prebuilt,
        "stamina": stamina_decorated,
    }


STATS = {
    # Whether the call leaves the per-operation counters (attempts, waits, outcome) readable.
    "retrybudget (call, Outcome)": "yes: the Outcome returned",
    "retrybudget (@retrying)": "no (use call for the Outcome)",
    "backoff": "no (on_success handler only)",
    "tenacity (decorator)": "partly: fn.statistics",
    "tenacity (pre-built Retrying)": "partly: retrying.statistics",
    "stamina": "no",
}
"""What each contender gives to read after a call (the issue asks that ours stay available)."""


def time_one(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - start) / calls


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    args = parser.parse_args(argv)
    funcs = contenders()
    samples: dict[str, list[float]] = {name: [] for name in funcs}
    for fn in funcs.values():  # warm up
        time_one(fn, 1000)
    for _ in range(args.rounds):
        for name, fn in funcs.items():
            samples[name].append(time_one(fn, args.calls))
    med = {name: statistics.median(v) for name, v in samples.items()}
    bare = med.pop("bare call")
    ours = med["retrybudget (call, Outcome)"] - bare
    fastest_peer = med["backoff"] - bare
    print(f"success-path overhead per logical operation ({args.rounds} rounds x {args.calls} calls, "
          f"median; bare call {bare:.0f} ns subtracted)")
    print(f"{'contender':32} {'ns/call':>10} {'vs retrybudget':>15} {'vs backoff':>11}  stats")
    for name, ns in sorted(med.items(), key=lambda kv: kv[1]):
        over = ns - bare
        print(f"{name:32} {over:10.0f} {over / ours:14.2f}x {over / fastest_peer:10.2f}x  "
              f"{STATS[name]}")
    ratio = ours / fastest_peer
    verdict = "MET" if ratio <= TARGET else "NOT MET"
    stretch = "MET" if ratio <= STRETCH else "NOT MET"
    print(f"retrybudget call / backoff = {ratio:.2f}x: target {TARGET}x {verdict}; "
          f"stretch {STRETCH}x {stretch}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
