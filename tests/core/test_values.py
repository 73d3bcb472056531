"""The core's value builder: fields changed by name, every other field copied, once."""

from __future__ import annotations

import dataclasses

import pytest

from retrybudget import AttemptRecord, Kind, Policy, Reason, Wait, WaitReason
from retrybudget.core._values import evolve, evolver
from retrybudget.core.outcome import Outcome
from retrybudget.core.state import OperationState


def test_evolve_changes_the_named_fields_and_copies_every_other() -> None:
    start = OperationState.start(Policy(deadline=10), "op", 5.0, method="GET",
                                 has_idempotency_key=True)
    wait = Wait(1.0, WaitReason.BACKOFF, "policy", 1)
    moved = evolve(start, waits=(wait,), backoffs=3, retry_at=7.0)
    assert moved == dataclasses.replace(start, waits=(wait,), backoffs=3, retry_at=7.0)
    assert (moved.attempts, moved.rate_limit_streak, moved.backoffs) == (0, 0, 3)
    assert (moved.started, moved.deadline_at, moved.has_idempotency_key) == (5.0, 15.0, True)
    assert start.backoffs == 0  # the original is untouched


def test_an_evolved_value_is_frozen_and_of_its_class() -> None:
    """The copy is filled while of a plain class with the same slots, then handed over as
    the value's own class: frozen, equal and hashed as one the class built."""
    from retrybudget.coordination._logic import Breaker, Phase, Schedule

    for value, changes in ((Schedule(), {"gate": 5.0, "streak": 2}),
                           (Breaker(), {"phase": Phase.OPEN, "failures": 3})):
        moved = evolve(value, **changes)
        assert type(moved) is type(value)
        assert moved == dataclasses.replace(value, **changes)
        assert hash(moved) == hash(dataclasses.replace(value, **changes))
        name = next(iter(changes))
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(moved, name, changes[name])


def test_evolve_refuses_a_field_the_class_does_not_have() -> None:
    start = OperationState.start(Policy(), "op", 0.0)
    with pytest.raises(TypeError, match="attempt"):
        evolve(start, attempt=1)  # the field is "attempts"


def test_evolve_of_a_subclass_with_class_attribute_fields_builds_the_declaring_class() -> None:
    class Fresh(OperationState):
        __slots__ = ()
        attempts = 0

    fresh = object.__new__(Fresh)
    for f in dataclasses.fields(OperationState):
        if f.name != "attempts":
            vars(OperationState)[f.name].__set__(fresh, getattr(OperationState.start(
                Policy(), "op", 2.0), f.name))
    moved = evolve(fresh, attempts=4)
    assert type(moved) is OperationState
    assert (moved.attempts, moved.started) == (4, 2.0)


def test_evolve_refuses_a_value_of_another_class() -> None:
    with pytest.raises(TypeError, match="fast_init"):
        evolve(Policy(), deadline=1.0)
    with pytest.raises(TypeError, match="fast_init"):
        evolver(Policy)
    copy = evolver(OperationState)
    start = OperationState.start(Policy(), "op", 0.0)
    assert copy(start, attempts=2) == evolve(start, attempts=2)
    with pytest.raises(TypeError, match="attempt"):
        copy(start, attempt=2)


def test_the_state_changes_keep_every_field_in_its_place() -> None:
    start = OperationState.start(Policy(deadline=30), "op", 1.0, method="POST")
    record = AttemptRecord(number=1, started=0.0, elapsed=0.5, status=503, error=None,
                           kind=Kind.TRANSIENT, decision="retry", detail="503")
    state = start.with_wait(Wait(2.0, WaitReason.RATE_LIMIT_BACKOFF, "x", 0), 9.0)
    state = state.with_wait(Wait(0.5, WaitReason.BACKOFF, "policy", 0), None)
    assert (state.rate_limit_streak, state.backoffs, state.retry_at, state.attempts) == (1, 1, 9.0, 0)
    outcome = Outcome(reason=Reason.OK, operation_id="op", attempts=1, waits=(), elapsed=0.0)
    assert outcome == Outcome(Reason.OK, "op", 1, (), 0.0)
    assert evolve(outcome, detail="d").detail == "d"
    assert evolve(state, history=(record,)).history == (record,)
