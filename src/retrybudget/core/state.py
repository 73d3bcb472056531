"""One operation's progress, as an immutable value.

:class:`OperationState` is what the flow carries from one step to the next and what the
decision functions (``core/decide.py``) read; every change returns a new state.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._values import evolver, fast_init
from .classify import Classified
from .outcome import AttemptRecord, Wait, WaitReason
from .policy import Policy

__all__ = ["OperationState"]


@fast_init
@dataclass(frozen=True, slots=True)
class OperationState:
    """One operation's progress, as an immutable value; every change returns a new state.

    Attributes:
        operation_id: the operation's id.
        method: the request method, when there is one.
        started: monotonic time when the operation started.
        deadline_at: monotonic time of the deadline, or None.
        has_idempotency_key: the request carries an idempotency key.
        attempts: attempts made so far.
        history: per-attempt records.
        waits: waits taken so far.
        rate_limit_streak: rate limits seen so far that named no time (for doubling).
        backoffs: backoff waits taken so far (for the exponential).
        retry_at: the latest wall-clock time the provider named.
        conflicts: disagreeing evidence collected so far.
        longest_unbounded: the longest attempt so far that nothing could cut at its timeout
            (0 when none: see :func:`~retrybudget.core.decide.attempt_needs`).
    """

    operation_id: str
    method: str | None
    started: float
    deadline_at: float | None
    has_idempotency_key: bool = False
    attempts: int = 0
    history: tuple[AttemptRecord, ...] = ()
    waits: tuple[Wait, ...] = ()
    rate_limit_streak: int = 0
    backoffs: int = 0
    retry_at: float | None = None
    conflicts: tuple[str, ...] = ()
    longest_unbounded: float = 0.0

    @classmethod
    def start(
        cls,
        policy: Policy,
        operation_id: str,
        now: float,
        *,
        method: str | None = None,
        has_idempotency_key: bool = False,
    ) -> OperationState:
        """The state of a new operation starting at monotonic time ``now``."""
        deadline_at = None if policy.deadline is None else now + policy.deadline
        return cls(operation_id=operation_id, method=method, started=now, deadline_at=deadline_at,
                   has_idempotency_key=has_idempotency_key)

    def remaining(self, now: float) -> float | None:
        """Seconds left before the deadline (None when there is none)."""
        return None if self.deadline_at is None else self.deadline_at - now

    def with_attempt(self, record: AttemptRecord, classified: Classified,
                     bounded: bool = True) -> OperationState:
        """This state after one more attempt (``bounded``: its timeout could have ended it)."""
        conflicts = self.conflicts
        if classified.conflicts:
            conflicts += tuple(c for c in classified.conflicts if c not in conflicts)
        longest = self.longest_unbounded
        if not bounded and record.elapsed > longest:
            longest = record.elapsed
        return _evolve(self, attempts=self.attempts + 1, history=(*self.history, record),
                      conflicts=conflicts, longest_unbounded=longest)

    def with_wait(self, wait: Wait, retry_at: float | None) -> OperationState:
        """This state after a wait is taken."""
        streak = self.rate_limit_streak + (wait.reason is WaitReason.RATE_LIMIT_BACKOFF)
        backoffs = self.backoffs + (wait.reason is WaitReason.BACKOFF)
        latest = self.retry_at
        if retry_at is not None and (latest is None or retry_at > latest):
            latest = retry_at
        return _evolve(self, waits=(*self.waits, wait), rate_limit_streak=streak,
                      backoffs=backoffs, retry_at=latest)

    def with_method(self, method: str | None) -> OperationState:
        """This state, knowing the request method an attempt reported (rule 3 for plain calls).

        A plain callable's operation starts without a method; an attempt whose exception or
        response names its request's method (a failed POST) fixes it for every decision that
        follows. A method the operation was given is never replaced.
        """
        if method is None or self.method is not None:
            return self
        return _evolve(self, method=method.upper())


_evolve = evolver(OperationState)
"""Copies a state with the named fields changed (``_values.evolve`` for this one class)."""
