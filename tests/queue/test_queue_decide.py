"""The pure queue rule: properties over every reason, time and count."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrybudget.core.outcome import Reason
from retrybudget.core.policy import PolicyError
from retrybudget.queue import FINAL_FAILURES, LATER, Action, QueueConfig, decide

times = st.floats(min_value=1e9, max_value=2e9, allow_nan=False)
configs = st.builds(QueueConfig, max_deferrals=st.integers(0, 10),
                    deadline=st.none() | st.floats(1, 1e5), jitter=st.floats(0, 30),
                    backoff=st.floats(0, 100), max_backoff=st.floats(0, 1000))


def test_every_reason_is_either_final_later_or_ok() -> None:
    assert FINAL_FAILURES | LATER | {Reason.OK} == set(Reason)
    assert not FINAL_FAILURES & LATER


@given(reason=st.sampled_from(list(Reason)), now=times, ahead=st.none() | st.floats(-1e4, 1e5),
       deferrals=st.integers(0, 20), age=st.floats(0, 1e5), config=configs,
       jitter=st.floats(-1, 2))
def test_the_rule(reason: Reason, now: float, ahead: float | None, deferrals: int, age: float,
                  config: QueueConfig, jitter: float) -> None:
    retry_at = None if ahead is None else now + ahead
    d = decide(reason, retry_at, now=now, deferrals=deferrals, enqueued_at=now - age,
               config=config, jitter=jitter)
    assert d.reason is reason
    assert d.ok is (reason is Reason.OK)  # no success without a provider success
    if reason is Reason.OK or reason in FINAL_FAILURES:
        assert d.action is Action.COMPLETE  # never re-queued
        return
    if d.action is Action.DEFER:
        assert d.at is not None
        assert d.at >= now
        if retry_at is not None:
            assert retry_at <= d.at <= max(retry_at, now) + config.jitter  # never early; bounded
        assert deferrals < config.max_deferrals
        if config.deadline is not None:
            assert d.at <= now - age + config.deadline
    else:
        assert d.action is Action.DEAD_LETTER
        assert d.at is None


def test_an_unknown_reason_is_an_unexpected_failure() -> None:
    d = decide("weird", None, now=0.0, deferrals=0, enqueued_at=0.0, config=QueueConfig())
    assert d.action is Action.COMPLETE
    assert d.reason is Reason.UNEXPECTED
    assert not d.ok


def test_without_retry_at_the_queue_backs_off_doubling_to_a_cap() -> None:
    config = QueueConfig(backoff=2.0, max_backoff=10.0, jitter=0.0, max_deferrals=10)
    ats = [decide(Reason.EXHAUSTED, None, now=100.0, deferrals=n, enqueued_at=0.0,
                  config=config).at for n in range(5)]
    assert ats == [102.0, 104.0, 108.0, 110.0, 110.0]


@pytest.mark.parametrize("bad", [{"visibility_timeout": 0}, {"max_deferrals": -1},
                                 {"deadline": 0}, {"jitter": float("nan")}, {"backoff": -1}])
def test_bad_config_is_a_policy_error(bad: dict[str, float]) -> None:
    with pytest.raises(PolicyError):
        QueueConfig(**bad)  # type: ignore[arg-type]


def test_a_pacing_wait_that_does_not_fit_names_when_to_come_back() -> None:
    from retrybudget import FakeClock, Policy, Retrier
    from retrybudget.coordination import Coordinator
    from retrybudget.core.actions import Permit
    from retrybudget.core.outcome import WaitReason

    class Paced(Coordinator):
        def acquire(self, key: str, attempt: int) -> Permit:
            return Permit(wait=7.5, reason=WaitReason.PACING)

    clock = FakeClock()
    calls: list[int] = []
    outcome = Retrier(policy=Policy(deadline=2.0), clock=clock, coordinator=Paced()).call(
        lambda: calls.append(1))
    assert outcome.reason is Reason.RATE_LIMITED
    assert calls == []  # nothing was sent
    assert outcome.retry_at == clock.wall() + 7.5  # the queue defers it to exactly this
    d = decide(outcome.reason, outcome.retry_at, now=clock.wall(), deferrals=0,
               enqueued_at=clock.wall(), config=QueueConfig(jitter=0.0))
    assert d.at == outcome.retry_at
