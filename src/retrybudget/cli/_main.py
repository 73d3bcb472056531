"""Entry point of the ``retrybudget`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .._clock import SYSTEM_CLOCK, Clock, FakeClock
from ..acceptance import load_cases, run_offline

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``retrybudget`` command."""
    parser = argparse.ArgumentParser(
        prog="retrybudget",
        description="Bounded, provider-aware retries for third-party HTTP APIs.",
        epilog="example: retrybudget offline-demo --real-time",
    )
    sub = parser.add_subparsers(dest="command")
    for name in ("demo", "offline-demo"):
        _add_offline_demo(sub, name)
    return parser


def _add_offline_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    demo = sub.add_parser(
        name,
        help="play the public acceptance cases against an in-process scripted provider",
        description="Play every public acceptance case against an in-process scripted "
        "provider (no network) and print attempts, waits and the outcome of each.",
        epilog="example: retrybudget offline-demo --real-time",
    )
    demo.add_argument("--real-time", action="store_true",
                      help="sleep for real instead of on a simulated clock")


def offline_demo(*, real_time: bool = False) -> int:
    """Print each acceptance case's attempts, waits and outcome; 0 when all pass."""
    cases = load_cases()
    failed = 0
    clock_name = "real time" if real_time else "simulated time (the waits are computed, not slept)"
    print(f"retrybudget: {len(cases)} scripted provider cases, {clock_name}\n")
    print(f"{'case':5} {'outcome':16} {'att':>3} {'requests':>8}  {'waits':28} title")
    for case in cases:
        clock: Clock = SYSTEM_CLOCK if real_time else FakeClock()
        result = run_offline(case, clock=clock)
        waits = ", ".join(f"{w.seconds:.2f}s {w.reason.value}" for w in result.outcome.waits) or "-"
        mark = "ok" if result.passed else "FAIL"
        print(f"{case.id:5} {result.outcome.reason.value:16} {result.outcome.attempts:>3} "
              f"{result.requests:>8}  {waits[:28]:28} {case.title} [{mark}]")
        failed += not result.passed
    print(f"\n{len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``retrybudget`` command; returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.command in (None, "demo", "offline-demo"):
        return offline_demo(real_time=bool(getattr(args, "real_time", False)))
    return 2


if __name__ == "__main__":
    sys.exit(main())
