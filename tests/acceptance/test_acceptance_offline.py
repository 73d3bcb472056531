"""The public acceptance cases, played against the callable driver on a fake clock."""

from __future__ import annotations

import pytest

from retrybudget import FakeClock, Reason
from retrybudget.acceptance import load_cases, run_offline

CASES = load_cases()


def test_all_public_cases_are_packaged() -> None:
    assert [c.id for c in CASES] == [f"A{i:02d}" for i in range(1, 19)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_case_passes(case) -> None:
    result = run_offline(case, clock=FakeClock())
    failed = [c for c in result.checks if not c.passed]
    assert not failed, (case.id, failed, result.evidence())
    # every case checks the outcome and the fabricated-completion rule at least
    assert len(result.checks) >= 2


def test_a03_waits_exactly_what_retry_after_asked() -> None:
    case = next(c for c in CASES if c.id == "A03")
    result = run_offline(case, clock=FakeClock())
    assert [w.seconds for w in result.outcome.waits] == [1.0]
    assert result.outcome.waits[0].source == "retry-after"


def test_a04_stops_at_once_with_retry_at() -> None:
    case = next(c for c in CASES if c.id == "A04")
    clock = FakeClock()
    result = run_offline(case, clock=clock)
    assert result.outcome.reason is Reason.RATE_LIMITED
    assert clock.sleeps == []
    assert result.outcome.retry_at == pytest.approx(clock.wall() + 3600, abs=1)


def test_a13_attempt_timeout_is_clipped_to_the_deadline() -> None:
    case = next(c for c in CASES if c.id == "A13")
    result = run_offline(case, clock=FakeClock())
    timeouts = [r.timeout for r in result.outcome.history]
    assert timeouts[0] == pytest.approx(3.0)
    assert all(t is not None and t <= 3.0 for t in timeouts)
    assert result.outcome.elapsed <= 3.0 + 1e-9


def test_a02_counts_one_breaker_failure_for_three_attempts() -> None:
    case = next(c for c in CASES if c.id == "A02")
    result = run_offline(case, clock=FakeClock())
    assert result.outcome.attempts == 3
    assert result.breaker_failures == 1


def test_judge_fails_a_case_when_the_safeguard_is_absent() -> None:
    # A policy that never waits for Retry-After: fail_fast turns A03 into rate_limited.
    from retrybudget import Policy

    case = next(c for c in CASES if c.id == "A03")
    result = run_offline(case, clock=FakeClock(), base=Policy(rate_limit="fail_fast"))
    assert not result.passed
    assert any(c.name == "outcome" and not c.passed for c in result.checks)
