"""The judge: what a case expects compared with what happened, check by check."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._gateway_mapping import GATEWAY_MAPPING
from ..core.outcome import Outcome, Reason
from ._cases import Case

__all__ = ["CaseResult", "Check", "judge"]


@dataclass(frozen=True, slots=True)
class Check:
    """One expectation of a case: what was expected, what happened, and whether it held."""

    name: str
    expected: object
    actual: object
    passed: bool


@dataclass(frozen=True, slots=True)
class CaseResult:
    """A case's verdict with its evidence."""

    case: Case
    outcome: Outcome[Any]
    requests: int
    arrivals: tuple[float, ...]
    checks: tuple[Check, ...] = field(default_factory=tuple)
    breaker_failures: int = 0

    @property
    def passed(self) -> bool:
        """True when every expectation held."""
        return all(c.passed for c in self.checks)

    def evidence(self) -> dict[str, Any]:
        """Plain data: requests the provider saw, gaps, waits and the outcome."""
        gaps = [round(b - a, 3) for a, b in itertools.pairwise(self.arrivals)]
        return {
            "requests_seen": self.requests,
            "gaps_s": gaps,
            "waits": [(round(w.seconds, 3), w.reason.value, w.source) for w in self.outcome.waits],
            "outcome": self.outcome.reason.value,
            "attempts": self.outcome.attempts,
            "elapsed_s": round(self.outcome.elapsed, 3),
            "retry_at": self.outcome.retry_at,
        }


def judge(
    case: Case,
    outcome: Outcome[Any],
    arrivals: Sequence[float],
    *,
    started_wall: float,
    breaker_failures: int = 0,
) -> CaseResult:
    """Compare what happened with what the case expects.

    Args:
        case: the case.
        outcome: the operation's outcome.
        arrivals: wall-clock arrival times of every request the provider saw.
        started_wall: wall-clock time the operation started (for ``retry_at_after_s``).
        breaker_failures: failures the breaker recorded for this operation.
    """
    exp = case.expect
    checks = [*_count_checks(exp, outcome, arrivals),
              *_timing_checks(exp, outcome, arrivals, started_wall),
              *_breaker_and_gateway_checks(exp, outcome, breaker_failures)]
    # No fabricated completion: a value only with an ok outcome, and ok only if the provider
    # really served a 2xx on the last request.
    fabricated = outcome.value is not None and outcome.reason is not Reason.OK
    checks.append(Check("no_fabricated_completion", "no value without ok", not fabricated,
                        not fabricated))
    return CaseResult(case, outcome, len(arrivals), tuple(arrivals), tuple(checks),
                      breaker_failures)


def _count_checks(exp: Mapping[str, Any], outcome: Outcome[Any],
                  arrivals: Sequence[float]) -> list[Check]:
    """The outcome, the requests the provider saw, the attempts and the logical operations."""
    checks: list[Check] = []
    if "outcome" in exp:
        checks.append(Check("outcome", exp["outcome"], outcome.reason.value,
                            outcome.reason.value == exp["outcome"]))
    if "outcome_in" in exp:
        checks.append(Check("outcome_in", list(exp["outcome_in"]), outcome.reason.value,
                            outcome.reason.value in exp["outcome_in"]))
    if "requests" in exp:
        checks.append(Check("requests", exp["requests"], len(arrivals),
                            len(arrivals) == exp["requests"]))
    if "attempts" in exp:
        checks.append(Check("attempts", exp["attempts"], outcome.attempts,
                            outcome.attempts == exp["attempts"]))
    if "logical_operations" in exp:
        checks.append(Check("logical_operations", exp["logical_operations"], 1,
                            exp["logical_operations"] == 1))
    return checks


def _timing_checks(exp: Mapping[str, Any], outcome: Outcome[Any], arrivals: Sequence[float],
                   started_wall: float) -> list[Check]:
    """The gaps between requests, the margin after a reset, the time taken and the
    ``retry_at`` named."""
    checks: list[Check] = []
    if "min_gap_s" in exp:
        gaps = [b - a for a, b in itertools.pairwise(arrivals)]
        smallest = min(gaps) if gaps else None
        checks.append(Check("min_gap_s", exp["min_gap_s"], smallest,
                            smallest is not None and smallest >= exp["min_gap_s"]))
    if "after_reset_s" in exp:
        margin = _after_reset(outcome, arrivals)
        checks.append(Check("after_reset_s", exp["after_reset_s"], margin,
                            margin is not None and margin >= exp["after_reset_s"] - _ROUNDING))
    if "max_elapsed_s" in exp:
        checks.append(Check("max_elapsed_s", exp["max_elapsed_s"], round(outcome.elapsed, 3),
                            outcome.elapsed <= exp["max_elapsed_s"]))
    if "retry_at_after_s" in exp:
        after = None if outcome.retry_at is None else outcome.retry_at - started_wall
        checks.append(Check("retry_at_after_s", exp["retry_at_after_s"], after,
                            after is not None and after >= exp["retry_at_after_s"]))
    return checks


def _breaker_and_gateway_checks(exp: Mapping[str, Any], outcome: Outcome[Any],
                                breaker_failures: int) -> list[Check]:
    """The failures the breaker recorded, and the gateway's answer for the outcome."""
    checks: list[Check] = []
    if "breaker_failures_recorded" in exp:
        checks.append(Check("breaker_failures_recorded", exp["breaker_failures_recorded"],
                            breaker_failures, breaker_failures == exp["breaker_failures_recorded"]))
    if "gateway_status" not in exp and "gateway_code" not in exp:
        return checks
    status, code = GATEWAY_MAPPING[outcome.reason]
    if "gateway_status" in exp:
        checks.append(Check("gateway_status", exp["gateway_status"], status,
                            status == exp["gateway_status"]))
    if "gateway_code" in exp:
        checks.append(Check("gateway_code", exp["gateway_code"], code,
                            code == exp["gateway_code"]))
    return checks


_ROUNDING = 1e-6
"""Seconds of float rounding an exact expectation on the clock tolerates."""


def _after_reset(outcome: Outcome[Any], arrivals: Sequence[float]) -> float | None:
    """The least time between a reset epoch a response named and the next request's arrival.

    Reads the ``x-ratelimit-reset`` evidence of each attempt that has a following request;
    None when no such attempt named an epoch.
    """
    margins = []
    for record, arrival in zip(outcome.history, arrivals[1:], strict=False):
        for name, value in record.evidence:
            if name == "x-ratelimit-reset":
                with contextlib.suppress(ValueError):
                    margins.append(arrival - float(value))
    return round(min(margins), 6) if margins else None
