"""The public acceptance cases: load them, build their policies, judge results.

A case scripts what a provider answers and states what a correct client must do
(the packaged ``data/acceptance.json``). This module runs no I/O of its own: :func:`run_offline`
plays a case against the in-process :class:`~retrybudget.testing.ScriptedProvider`,
and the HTTP checklist plays the same cases against the sandbox provider; both
judge the result with :func:`judge`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ._clock import Clock, FakeClock
from ._drivers import Retrier
from ._files import read_user_text
from .coordination._base import Coordinator
from .core.actions import Admission
from .core.outcome import GATEWAY_MAPPING, Outcome, Reason
from .core.policy import Policy, RateLimitMode
from .core.profiles import get_profile
from .testing import ScriptedProvider, json_payload

__all__ = [
    "Case",
    "CaseBreaker",
    "CaseResult",
    "Check",
    "load_cases",
    "judge",
    "policy_for",
    "run_offline",
]


@dataclass(frozen=True, slots=True)
class Case:
    """One acceptance case, with the fixture file's defaults applied."""

    id: str
    title: str
    method: str
    max_attempts: int
    deadline_s: float
    rate_limit: str
    expect_json: bool
    profile: str
    script: tuple[Mapping[str, Any], ...]
    expect: Mapping[str, Any]
    breaker: str | None = None


class _Malformed(ValueError):
    """One field of one case is unusable; the message is in the user's words."""


def _field(item: Mapping[str, Any], key: str, kind: type, default: Any = None) -> Any:
    if key not in item:
        if default is None:
            raise _Malformed(f"no {key!r}")
        return default
    value = item[key]
    wanted = {int: "a whole number", float: "a number", str: "text", bool: "true or false",
              list: "a list", dict: "an object"}[kind]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind in (int, float) and isinstance(value, bool)):
        raise _Malformed(f"{key!r} must be {wanted}, got {json.dumps(value)}")
    return value


def _case(merged: Mapping[str, Any]) -> Case:
    script = _field(merged, "script", list)
    if not all(isinstance(step, dict) for step in script):
        raise _Malformed("'script' must be a list of objects")
    return Case(
        id=_field(merged, "id", str),
        title=_field(merged, "title", str, ""),
        method=_field(merged, "method", str, "GET").upper(),
        max_attempts=_field(merged, "max_attempts", int, 3),
        deadline_s=_field(merged, "deadline_s", float, 5.0),
        rate_limit=_field(merged, "rate_limit", str, "wait"),
        expect_json=_field(merged, "expect_json", bool, True),
        profile=_field(merged, "profile", str, "generic"),
        script=tuple(dict(step) for step in script),
        expect=dict(_field(merged, "expect", dict)),
        breaker=merged.get("breaker"),
    )


def load_cases(path: str | Path | None = None) -> list[Case]:
    """Read the acceptance cases (the packaged public fixtures when ``path`` is None).

    Raises:
        ValueError: naming the file (and the case and field) and what is wrong, in plain
            words, for an unreadable or malformed file.
    """
    name = str(path) if path is not None else "acceptance.json (packaged)"
    if path is None:
        text = resources.files("retrybudget.data").joinpath("acceptance.json").read_text("utf-8")
    else:
        text = read_user_text(path, name)
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("cases"), list):
        raise _Malformed(f'{name}: expected an object with a "cases" list')
    defaults = raw.get("defaults", {})
    if not isinstance(defaults, dict):
        raise _Malformed(f'{name}: "defaults" must be an object')
    cases = []
    for position, item in enumerate(raw["cases"], start=1):
        named = isinstance(item, dict) and "id" in item
        label = f"case {item['id']}" if named else f"case {position}"
        if not isinstance(item, dict):
            raise _Malformed(f"{name}: {label}: expected an object")
        try:
            cases.append(_case({**defaults, **item}))
        except _Malformed as exc:
            raise ValueError(f"{name}: {label}: {exc}") from None
    return cases


def policy_for(case: Case, base: Policy | None = None) -> Policy:
    """The policy a case runs under.

    Without ``base``: the case's own attempts, deadline and rate-limit mode. With ``base``
    (checking a user's policy): the user's budget and rules, with only the case's provider
    facts (profile and payload validator) applied.
    """
    facts = {
        "profile": get_profile(case.profile),
        "validator": json_payload if case.expect_json else None,
    }
    if base is not None:
        return base.replace(**facts)
    return Policy(
        name=f"acceptance-{case.id}",
        max_attempts=case.max_attempts,
        deadline=case.deadline_s,
        rate_limit=RateLimitMode(case.rate_limit),
        **facts,  # type: ignore[arg-type]
    )


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
    checks: list[Check] = []
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
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
    if "min_gap_s" in exp:
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
    if "breaker_failures_recorded" in exp:
        checks.append(Check("breaker_failures_recorded", exp["breaker_failures_recorded"],
                            breaker_failures, breaker_failures == exp["breaker_failures_recorded"]))
    if "gateway_status" in exp or "gateway_code" in exp:
        status, code = GATEWAY_MAPPING[outcome.reason]
        if "gateway_status" in exp:
            checks.append(Check("gateway_status", exp["gateway_status"], status,
                                status == exp["gateway_status"]))
        if "gateway_code" in exp:
            checks.append(Check("gateway_code", exp["gateway_code"], code,
                                code == exp["gateway_code"]))
    # No fabricated completion: a value only with an ok outcome, and ok only if the provider
    # really served a 2xx on the last request.
    fabricated = outcome.value is not None and outcome.reason is not Reason.OK
    checks.append(Check("no_fabricated_completion", "no value without ok", not fabricated,
                        not fabricated))
    return CaseResult(case, outcome, len(arrivals), tuple(arrivals), tuple(checks),
                      breaker_failures)


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


class CaseBreaker(Coordinator):
    """Just enough coordination for a single case: an optionally open breaker that counts.

    Attributes:
        open: the breaker refuses every operation.
        failures: the provider failures it was told of (logical operations, not attempts).
    """

    def __init__(self, open_: bool) -> None:
        self.open = open_
        self.failures = 0

    def admit(self, key: str) -> Admission:
        """Refuse when open, else admit."""
        return Admission(allowed=not self.open, detail="breaker open" if self.open else "")

    def finish(self, key: str, outcome: Outcome[Any], probe: bool) -> None:
        """Count an operation that ended in a provider failure."""
        if outcome.reason.is_provider_failure:
            self.failures += 1


_CaseCoordinator = CaseBreaker
"""The former private name of :class:`CaseBreaker`."""


def run_offline(case: Case, *, clock: Clock | None = None, base: Policy | None = None,
                seed: int = 7, hooks: Sequence[object] = ()) -> CaseResult:
    """Play a case against the in-process scripted provider (no network).

    ``hooks`` are passed to the :class:`Retrier` (an audit hook, stats, metrics).
    """
    clk = clock or FakeClock()
    provider = ScriptedProvider(case.script, clk)
    coordinator = CaseBreaker(open_=case.breaker == "open")
    retrier = Retrier(policy=policy_for(case, base), clock=clk, coordinator=coordinator,
                      random=random.Random(seed), method=case.method, job_id=case.id,
                      hooks=tuple(hooks))
    started = clk.wall()
    outcome = retrier.call(provider, case.method)
    arrivals = [r["arrival"] for r in provider.requests]
    return judge(case, outcome, arrivals, started_wall=started,
                 breaker_failures=coordinator.failures)
