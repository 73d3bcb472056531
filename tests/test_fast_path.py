"""The first-attempt fast path gives up nothing: the same outcome, stats, sleeps and samples.

``Retrier.call`` / ``acall`` skip the generic flow for an uncoordinated, unobserved operation
whose first attempt returns a plain value. Each property here runs the same scripted callable
through the fast path and through the generic flow (``Retrier.run`` with the same performer)
on twin fake clocks and twin seeded random sources, and asserts everything observable is
equal: every Outcome field, its stats, its repr, the clock's sleeps and the random state.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import pickle
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import retrybudget as rb
from retrybudget import FakeClock
from retrybudget.core.actions import AttemptResult
from retrybudget.core.classify import ResponseSeen
from retrybudget.core.outcome import Outcome
from strategies import header_sets, policies

# One scripted attempt: what the callable does (and how long it takes on the fake clock).
behaviours = st.sampled_from(["plain", "object", "connection", "timeout", "bug", "response"])
attempt_steps = st.tuples(behaviours, st.sampled_from([0.0, 0.001, 0.5, 3.0]))


class _Response:
    """A returned object read as an HTTP response (status and headers)."""

    def __init__(self, status: int) -> None:
        self.status_code = status
        self.headers = {"retry-after": "1"}
        self.text = "busy"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Response) and other.status_code == self.status_code

    def __hash__(self) -> int:
        return self.status_code


def _script(clock: FakeClock, steps: list[tuple[str, float]]) -> Any:
    """A callable that plays ``steps`` in order (the last one again once they run out)."""
    calls = iter(range(10**6))

    def fn() -> object:
        kind, took = steps[min(next(calls), len(steps) - 1)]
        clock.advance(took)
        if kind == "plain":
            return {"ok": True}
        if kind == "object":
            return rb.attempt_timeout()  # a float: the attempt's own timeout
        if kind == "connection":
            raise ConnectionResetError("reset")
        if kind == "timeout":
            raise TimeoutError("slow")
        if kind == "bug":
            raise KeyError("bug")
        return _Response(503)

    return fn


def _twins(policy: rb.Policy, start: float, seed: int, **options: Any) -> tuple[rb.Retrier, ...]:
    return tuple(
        rb.Retrier(policy=policy, clock=FakeClock(monotonic=start), random=random.Random(seed),
                   **options)
        for _ in range(2)
    )


def _same(fast: Outcome[Any], slow: Outcome[Any]) -> None:
    """Every field equal (the ids aside: each operation has its own), errors by type."""
    assert type(fast.error) is type(slow.error)
    fast_fields = {f.name: getattr(fast, f.name) for f in dataclasses.fields(Outcome)}
    slow_fields = {f.name: getattr(slow, f.name) for f in dataclasses.fields(Outcome)}
    for fields in (fast_fields, slow_fields):
        fields.pop("operation_id")
        fields.pop("error")
    assert fast_fields == slow_fields
    assert {**fast.stats(), "operation_id": ""} == {**slow.stats(), "operation_id": ""}
    assert repr(fast).replace(fast.operation_id, "") == repr(slow).replace(slow.operation_id, "")
    assert isinstance(fast, Outcome)


@given(policy=policies(), start=st.floats(0, 1e6, allow_nan=False), seed=st.integers(0, 99),
       steps=st.lists(attempt_steps, min_size=1, max_size=4))
def test_call_fast_path_matches_the_generic_flow(
    policy: rb.Policy, start: float, seed: int, steps: list[tuple[str, float]]
) -> None:
    fast, slow = _twins(policy, start, seed)
    got = fast.call(_script(fast.clock, steps))  # type: ignore[arg-type]
    want = slow.run(slow._performer(_script(slow.clock, steps), (), {}))  # type: ignore[arg-type]
    _same(got, want)
    assert fast.clock.sleeps == slow.clock.sleeps  # type: ignore[attr-defined]
    assert fast.random.getstate() == slow.random.getstate()


@given(policy=policies(), start=st.floats(0, 1e6, allow_nan=False), seed=st.integers(0, 99),
       steps=st.lists(attempt_steps, min_size=1, max_size=3))
def test_acall_fast_path_matches_the_generic_flow(
    policy: rb.Policy, start: float, seed: int, steps: list[tuple[str, float]]
) -> None:
    fast, slow = _twins(policy, start, seed)
    script_fast, script_slow = _script(fast.clock, steps), _script(slow.clock, steps)  # type: ignore[arg-type]

    async def run_fast() -> object:
        return script_fast()

    async def run_slow() -> object:
        return script_slow()

    async def both() -> tuple[Outcome[Any], Outcome[Any]]:
        interp = slow._interpreter

        async def perform(attempt: Any) -> Any:
            from retrybudget.core.actions import AttemptResult

            token = rb._drivers._ATTEMPT_TIMEOUT.set(attempt.timeout)
            try:
                value = await run_slow()
            except Exception as exc:
                return AttemptResult(interp.error(exc), None, exc)
            finally:
                rb._drivers._ATTEMPT_TIMEOUT.reset(token)
            return AttemptResult(interp.value(value), value, None)

        return await fast.acall(run_fast), await slow.arun(perform)

    got, want = asyncio.run(both())
    _same(got, want)
    assert fast.clock.sleeps == slow.clock.sleeps  # type: ignore[attr-defined]


@given(policy=policies(), start=st.floats(0, 1e6, allow_nan=False))
def test_a_validator_and_the_timeout_keyword_keep_the_same_outcome(
    policy: rb.Policy, start: float
) -> None:
    def fetch(timeout: float | None = None) -> dict[str, float | None]:
        return {"timeout": timeout}

    validated = policy.replace(validator=lambda payload: "timeout" in payload)
    fast, slow = _twins(validated, start, 1, timeout_kwarg="timeout")
    _same(fast.call(fetch), slow.run(slow._performer(fetch, (), {})))


def test_a_first_attempt_success_reads_as_an_outcome_everywhere() -> None:
    clock = FakeClock()
    outcome = rb.Retrier(policy=rb.Policy(), clock=clock).call(lambda: 42)
    plain = dataclasses.replace(outcome)
    assert type(plain) is Outcome  # replace, copy and pickle give a plain Outcome
    assert plain == outcome
    assert outcome == plain
    assert hash(plain) == hash(outcome)
    assert type(copy.copy(outcome)) is Outcome
    assert pickle.loads(pickle.dumps(outcome)) == outcome  # noqa: S301 - our own bytes
    assert dataclasses.replace(outcome, detail="changed").detail == "changed"
    assert dataclasses.asdict(outcome)["history"][0]["decision"] == "stop"
    assert repr(outcome).startswith("Outcome(reason=<Reason.OK: 'ok'>")
    assert (outcome.ok, outcome.value, outcome.attempts, outcome.waits) == (True, 42, 1, ())
    assert outcome.history[0].timeout == 10.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.detail = "x"  # type: ignore[misc]


def test_hooks_and_coordinators_take_the_generic_flow() -> None:
    seen: list[Outcome[Any]] = []

    class Hook:
        def on_outcome(self, outcome: Outcome[Any], request: object) -> None:
            seen.append(outcome)

    retrier = rb.Retrier(policy=rb.Policy(), clock=FakeClock(), hooks=(Hook(),))
    outcome = retrier.call(lambda: 1)
    assert seen == [outcome]
    assert type(outcome) is Outcome
    coordinated = rb.Retrier(policy=rb.Policy(), clock=FakeClock(),
                             coordinator=rb.MemoryCoordinator())
    assert type(coordinated.call(lambda: 1)) is Outcome


response_steps = st.tuples(
    st.sampled_from([200, 201, 204, 301, 404, 429, 403, 503]),
    header_sets(),
    st.sampled_from(["", "validator returned False"]),
    st.sampled_from([None, "POST", "GET"]),
    st.sampled_from([0.0, 0.25, 2.0]),
)


@given(policy=policies(), start=st.floats(0, 1e6, allow_nan=False), seed=st.integers(0, 99),
       method=st.sampled_from([None, "GET", "POST"]),
       steps=st.lists(st.one_of(response_steps, attempt_steps), min_size=1, max_size=4))
def test_run_fast_path_matches_the_generic_flow(
    policy: rb.Policy, start: float, seed: int, method: str | None, steps: list[tuple[Any, ...]]
) -> None:
    """What the HTTP integrations drive: responses with any headers, any status, any method."""
    fast, = _twins(policy, start, seed, method=method)[:1]
    slow = rb.Retrier(policy=policy, clock=FakeClock(monotonic=start), random=random.Random(seed),
                      method=method, hooks=(object(),))  # a hook: the generic flow

    def performer(clock: FakeClock) -> Any:
        calls = iter(range(10**6))
        plain = _script(clock, [s for s in steps if len(s) == 2] or [("plain", 0.0)])

        def perform(attempt: Any) -> AttemptResult:
            step = steps[min(next(calls), len(steps) - 1)]
            if len(step) == 2:
                return slow._performer(plain, (), {})(attempt)
            status, headers, payload_error, seen_method, took = step
            clock.advance(took)
            seen = ResponseSeen.of(status, headers, payload_error=payload_error,
                                   method=seen_method)
            return AttemptResult(seen, {"status": status}, None)

        return perform

    got = fast.run(performer(fast.clock))  # type: ignore[arg-type]
    want = slow.run(performer(slow.clock))  # type: ignore[arg-type]
    _same(got, want)
    assert fast.clock.sleeps == slow.clock.sleeps  # type: ignore[attr-defined]
    assert fast.random.getstate() == slow.random.getstate()


@given(policy=policies(), now=st.floats(0, 1e6, allow_nan=False),
       later=st.floats(0, 200, allow_nan=False))
def test_the_fast_paths_fresh_state_plans_as_the_real_one(
    policy: rb.Policy, now: float, later: float
) -> None:
    from retrybudget._drivers import _fresh
    from retrybudget.core.decide import plan_attempt
    from retrybudget.core.state import OperationState

    real = OperationState.start(policy, "id", now)
    fresh = _fresh(policy, now)
    for name in ("started", "deadline_at", "has_idempotency_key", "attempts", "history", "waits",
                 "rate_limit_streak", "backoffs", "retry_at", "conflicts"):
        assert getattr(fresh, name) == getattr(real, name)
    assert plan_attempt(policy, fresh, now + later) == plan_attempt(policy, real, now + later)
