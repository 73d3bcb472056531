"""The sync and async drivers, the decorator and the call forms."""

from __future__ import annotations

import asyncio
import logging
import pickle
import random

import pytest

import retrybudget as rb
from retrybudget import FakeClock, Policy, Reason, Retrier, retrying
from retrybudget.testing import ScriptedProvider, json_payload

OK = {"status": 200, "body": {"available": True}}


def test_decorator_returns_the_value_of_an_ok_outcome(clock) -> None:
    provider = ScriptedProvider([{"status": 503}, OK], clock)

    @retrying(Policy(validator=json_payload), clock=clock)
    def fetch() -> object:
        return provider()

    assert fetch().json() == {"available": True}
    assert provider.count == 2


def test_decorator_raises_the_typed_error_with_context(clock) -> None:
    provider = ScriptedProvider([{"status": 429, "headers": {"Retry-After": "3600"}}], clock)

    @retrying(Policy(deadline=5), clock=clock)
    def fetch() -> object:
        return provider()

    with pytest.raises(rb.RateLimited) as info:
        fetch()
    err = info.value
    assert err.reason is Reason.RATE_LIMITED
    assert err.attempts == 1
    assert err.retry_at == pytest.approx(clock.wall() + 3600)
    assert err.outcome is not None
    assert isinstance(err, rb.RetryBudgetError)


async def test_async_decorator_and_call(clock) -> None:
    calls = []

    @retrying(Policy(), clock=clock)
    async def fetch(x: int) -> int:
        calls.append(x)
        if len(calls) < 3:
            raise ConnectionResetError("reset")
        return x * 2

    assert await fetch(21) == 42
    assert len(calls) == 3
    assert len(clock.sleeps) == 2


async def test_async_attempt_is_cut_at_its_timeout() -> None:
    # Real clock, tiny deadline: the slow coroutine is cancelled at the clipped timeout.
    async def slow() -> None:
        await asyncio.sleep(5)

    retrier = Retrier(policy=Policy(deadline=0.2, max_attempts=3))
    outcome = await retrier.acall(slow)
    assert outcome.reason is Reason.DEADLINE
    assert outcome.history[0].error == "TimeoutError"
    # the attempt was given what was left of the 0.2 s deadline, no more
    assert all(r.timeout is not None and r.timeout <= 0.2 for r in outcome.history)
    # real clock: generous for a loaded machine, still well short of the 5 s coroutine
    assert outcome.elapsed < 2.0


def test_sync_and_async_drivers_decide_alike() -> None:
    script = [{"status": 503}, {"status": 429, "headers": {"Retry-After": "1"}}, {"status": 502}, OK]

    def run_sync() -> rb.Outcome[object]:
        clock = FakeClock()
        provider = ScriptedProvider(script, clock)
        return Retrier(policy=Policy(max_attempts=5), clock=clock,
                       random=random.Random(3)).call(provider)

    async def run_async() -> rb.Outcome[object]:
        clock = FakeClock()
        provider = ScriptedProvider(script, clock)

        async def fetch() -> object:
            return provider()

        return await Retrier(policy=Policy(max_attempts=5), clock=clock,
                             random=random.Random(3)).acall(fetch)

    a, b = run_sync(), asyncio.run(run_async())
    assert (a.reason, a.attempts, a.waits) == (b.reason, b.attempts, b.waits)


def test_attempt_timeout_is_visible_inside_the_callable(clock) -> None:
    seen: list[float | None] = []

    def fetch() -> str:
        seen.append(rb.attempt_timeout())
        return "x"

    Retrier(policy=Policy(deadline=4.0, attempt_timeout=1.5), clock=clock).call(fetch)
    assert seen == [1.5]
    assert rb.attempt_timeout() is None


def test_timeout_kwarg_passes_the_clipped_timeout(clock) -> None:
    seen = []

    def fetch(url: str, timeout: float | None = None) -> str:
        seen.append((url, timeout))
        return "x"

    Retrier(policy=Policy(deadline=2.0), clock=clock, timeout_kwarg="timeout").call(fetch, "u")
    assert seen == [("u", 2.0)]


def test_a_failing_hook_is_logged_and_changes_nothing(clock, caplog) -> None:
    class Broken:
        def before_attempt(self, event: object) -> None:
            raise RuntimeError("hook bug")

        def on_outcome(self, outcome: object, request: object) -> None:
            raise RuntimeError("hook bug")

    provider = ScriptedProvider([OK], clock)
    with caplog.at_level(logging.ERROR, logger="retrybudget"):
        outcome = Retrier(clock=clock, hooks=(Broken(),)).call(provider)
    assert outcome.reason is Reason.OK
    assert sum("hook" in r.getMessage() for r in caplog.records) == 2


async def test_a_failing_hook_changes_nothing_in_the_async_driver(clock) -> None:
    class Broken:
        def before_wait(self, event: object) -> None:
            raise RuntimeError("hook bug")

    provider = ScriptedProvider([{"status": 503}, OK], clock)

    async def fetch() -> object:
        return provider()

    outcome = await Retrier(clock=clock, hooks=(Broken(),)).acall(fetch)
    assert (outcome.reason, outcome.attempts) == (Reason.OK, 2)


@pytest.mark.parametrize("cls", [rb.RateLimited, rb.RetriesExhausted, rb.CircuitOpen, rb.NotFound])
def test_errors_pickle_with_their_context(cls) -> None:
    err = cls("rate_limited: x", operation_id="op1", attempts=2, retry_at=12.5)
    back = pickle.loads(pickle.dumps(err))  # noqa: S301 - our own error, pickled here
    assert type(back) is cls
    assert (back.operation_id, back.attempts, back.retry_at, back.reason, str(back)) == (
        "op1", 2, 12.5, err.reason, str(err))


def test_every_failed_reason_has_an_error_class(clock) -> None:
    from retrybudget.errors import ERRORS

    assert set(ERRORS) == set(Reason) - {Reason.OK}


def test_bad_configuration_gives_a_typed_error() -> None:
    for bad in (
        {"max_attempts": 0},
        {"max_attempts": "3"},
        {"deadline": -1},
        {"deadline": float("nan")},
        {"rate_limit": "sometimes"},
        {"idempotent_methods": "GET"},
        {"profile": "nope"},
        {"validator": 3},
    ):
        with pytest.raises(rb.PolicyError):
            Policy(**bad)
    with pytest.raises(rb.PolicyError):
        Retrier(policy="interactive")  # type: ignore[arg-type]
    with pytest.raises(rb.PolicyError):
        rb.Backoff(multiplier=0.5)


def test_policy_accepts_timedelta_and_derives_with_replace() -> None:
    from datetime import timedelta

    p = Policy(deadline=timedelta(seconds=90))
    assert p.deadline == 90.0
    q = p.replace(max_attempts=5)
    assert (q.max_attempts, q.deadline, p.max_attempts) == (5, 90.0, 3)


def test_presets() -> None:
    fast = rb.interactive()
    assert (fast.rate_limit, fast.max_attempts) == (rb.RateLimitMode.FAIL_FAST, 3)
    assert fast.deadline == 2.0  # the gateway contract promises 2 s
    slow = rb.background()
    assert slow.rate_limit is rb.RateLimitMode.WAIT
    # no silent GitHub default: the profile is picked by request host, generic elsewhere
    assert slow.profile.name == "auto"
    assert slow.profile.resolve("https://api.github.com/repos/o/r").rate_limit_floor == 60.0
    assert slow.profile.resolve("https://internal.example/x").name == "generic"


def test_fake_clock_sleeps_advance_time() -> None:
    clock = FakeClock(monotonic=5, wall=100)
    clock.sleep(2.5)
    asyncio.run(clock.async_sleep(0.5))
    assert (clock.monotonic(), clock.wall(), clock.sleeps) == (8.0, 103.0, [2.5, 0.5])
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)


def test_system_clock_is_a_clock() -> None:
    assert isinstance(rb.SYSTEM_CLOCK, rb.Clock)
    a = rb.SYSTEM_CLOCK.monotonic()
    rb.SYSTEM_CLOCK.sleep(0)
    assert rb.SYSTEM_CLOCK.monotonic() >= a
    assert rb.SYSTEM_CLOCK.wall() > 1_600_000_000


@pytest.mark.parametrize("value", [None, 0, 1.5, "text", b"raw", [1], (1,), {"a": 1}, {1}, True])
def test_built_in_values_are_values_checked_by_the_validator(clock, value) -> None:
    def rejects(payload: object) -> bool:
        return False

    assert Retrier(clock=clock).call(lambda: value).reason is Reason.OK
    assert Retrier(clock=clock).call(lambda: value).value == value
    refused = Retrier(clock=clock, policy=Policy(validator=rejects)).call(lambda: value)
    assert (refused.reason, refused.value, refused.attempts) == (Reason.INVALID_PAYLOAD, None, 1)


def test_a_returned_object_with_a_status_is_read_as_a_response(clock) -> None:
    class Answer:
        status_code = 503
        headers = (("retry-after", "1"),)
        text = "busy"

    outcome = Retrier(clock=clock, policy=Policy(deadline=30)).call(Answer)
    assert (outcome.reason, outcome.attempts) == (Reason.EXHAUSTED, 3)
    assert [w.source for w in outcome.waits] == ["retry-after", "retry-after"]


# The engine and the call: Retrier.on binds a call's description to one engine -------------


def test_on_binds_the_call_and_keeps_the_engine(clock) -> None:
    coordinator = rb.MemoryCoordinator(clock=clock)
    engine = Retrier(policy=Policy(validator=json_payload), clock=clock, coordinator=coordinator)
    bookings = engine.on(key="https://api.example.com", method="POST", job_id="job-1")
    provider = ScriptedProvider([{"status": 503}, OK], clock)
    outcome = bookings.call(provider)  # the response names no method: the bound one counts
    # a write that may have been sent is not replayed: the bound method decides
    assert (outcome.reason, outcome.attempts) == (Reason.NOT_RETRIED, 1)
    assert (outcome.key, outcome.method, outcome.job_id) == ("https://api.example.com", "POST",
                                                             "job-1")
    assert bookings.retrier.coordinator is coordinator
    assert bookings.retrier.clock is clock
    assert (engine.key, engine.method, engine.job_id) == ("default", None, None)  # unchanged
    reads = engine.on(key="https://api.example.com")
    again = reads.call(ScriptedProvider([{"status": 503}, OK], clock))
    assert (again.reason, again.attempts, again.method) == (Reason.OK, 2, None)


def test_on_again_changes_only_what_it_names(clock) -> None:
    bound = Retrier(clock=clock).on(key="k", method="GET").on(job_id="j")
    assert (bound.retrier.key, bound.retrier.method, bound.retrier.job_id) == ("k", "GET", "j")
    assert repr(bound).startswith("BoundRetrier(idempotency_key=False, interpreter=None, "
                                  "job_id='j', key='k', method='GET'")


@pytest.mark.parametrize("engine_field", ["policy", "clock", "coordinator", "hooks", "random"])
def test_on_refuses_an_engine_setting(engine_field: str) -> None:
    with pytest.raises(TypeError, match=engine_field):
        Retrier().on(**{engine_field: None})


async def test_a_bound_retrier_runs_async_and_drives_attempts(clock) -> None:
    bound = Retrier(policy=Policy(validator=json_payload), clock=clock,
                    random=random.Random(0)).on(key="k", job_id="a")
    provider = ScriptedProvider([{"status": 503}, OK], clock)

    async def fetch() -> object:
        return provider()

    outcome = await bound.acall(fetch)
    assert (outcome.reason, outcome.attempts, outcome.key, outcome.job_id) == (Reason.OK, 2, "k", "a")

    def perform(attempt: rb.Attempt) -> rb.AttemptResult:
        return rb.AttemptResult(rb.ResponseSeen(200), value=attempt.number)

    ran = bound.run(perform)
    assert (ran.reason, ran.value, ran.key) == (Reason.OK, 1, "k")

    async def aperform(attempt: rb.Attempt) -> rb.AttemptResult:
        return perform(attempt)

    aran = await bound.arun(aperform)
    assert (aran.reason, aran.value, aran.job_id) == (Reason.OK, 1, "a")


def test_the_decorators_error_is_not_chained_to_the_providers(clock) -> None:
    error = ConnectionResetError("reset by https://api.example.com/?api_key=s3cret")

    @retrying(Policy(max_attempts=2, deadline=30), clock=clock)
    def fetch() -> object:
        raise error

    with pytest.raises(rb.RetriesExhausted) as info:
        fetch()
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__
    assert info.value.outcome is not None
    assert info.value.outcome.error is error
    assert "s3cret" not in str(info.value)


def test_every_retrier_field_is_the_engine_or_the_call() -> None:
    import dataclasses

    from retrybudget._drivers import CALL_FIELDS

    engine = {"policy", "clock", "coordinator", "hooks", "random"}
    assert {f.name for f in dataclasses.fields(Retrier)} == engine | CALL_FIELDS
    assert not engine & CALL_FIELDS
