"""The coordinator interface that every driver and integration talks to.

A coordinator is shared by every worker that calls one provider: it holds the
circuit breaker, the rate-limit gate, pacing, the concurrency cap and the retry
budget, keyed by provider key. Backends implement the five typed methods (and,
where they do real I/O, their ``a``-prefixed async twins); :meth:`handle` and
:meth:`ahandle` map the flow's actions onto them in one place.
"""

from __future__ import annotations

from typing import Any

from ..core.actions import Acquire, Admission, Admit, Finish, Learn, Permit, SpendRetry
from ..core.outcome import Outcome
from ..core.throttle import Throttle
from ._stats import CoordinationStats

__all__ = ["Coordinator", "NoCoordination"]

CoordinatorAction = Admit | Acquire | Learn | SpendRetry | Finish


class Coordinator:
    """Base class of coordinators; this base coordinates nothing (every call is allowed).

    Subclasses override the sync methods; the async ones call the sync ones, which is
    right for in-process backends that never block. A backend that does network I/O
    overrides the async methods too.

    Attributes:
        passive: True for a coordinator that coordinates nothing; drivers then skip it.
    """

    passive = False
    patient = False
    """True for a coordinator whose :meth:`acquire` takes ``max_wait`` and ``fail_fast`` (what
    the operation would wait: it reserves no slot for one that would not wait for it)."""

    def admit(self, key: str) -> Admission:
        """Whether an operation under ``key`` may start (the circuit breaker)."""
        return Admission()

    def acquire(self, key: str, attempt: int, write_gap: float = 0.0, *,
                max_wait: float | None = None, fail_fast: bool = False) -> Permit:
        """Leave to send attempt ``attempt``: go now, or wait and ask again.

        ``write_gap`` (seconds, for a write the provider asks to space out: GitHub's 1 s)
        keeps the start of this request at least that long after the previous write's
        under ``key``; the drivers pass it only when it is not 0. ``max_wait`` and
        ``fail_fast`` say what the operation would wait (see
        :class:`~retrybudget.core.actions.Acquire`); the drivers pass them only to a
        :attr:`patient` coordinator.
        """
        return Permit()

    def learn(self, key: str, throttle: Throttle | None, lease: str | None) -> None:
        """What an attempt showed about the quota, as the core read it with the operation's
        profile (None: the attempt was not made); gives back ``lease``."""

    def spend_retry(self, key: str) -> bool:
        """Take one retry from the shared retry budget; False refuses the retry."""
        return True

    def finish(self, key: str, outcome: Outcome[Any], probe: bool) -> None:
        """An operation under ``key`` ended (one logical operation for the breaker)."""

    def stats(self) -> CoordinationStats:
        """Counters for metrics: admissions, waits, retry budget answers, fallbacks."""
        return CoordinationStats()

    async def aadmit(self, key: str) -> Admission:
        """Async :meth:`admit`."""
        return self.admit(key)

    async def aacquire(self, key: str, attempt: int, write_gap: float = 0.0, *,
                       max_wait: float | None = None, fail_fast: bool = False) -> Permit:
        """Async :meth:`acquire`."""
        if self.patient:
            return self.acquire(key, attempt, write_gap, max_wait=max_wait, fail_fast=fail_fast)
        return self.acquire(key, attempt, write_gap) if write_gap else self.acquire(key, attempt)

    async def alearn(self, key: str, throttle: Throttle | None, lease: str | None) -> None:
        """Async :meth:`learn`."""
        self.learn(key, throttle, lease)

    async def aspend_retry(self, key: str) -> bool:
        """Async :meth:`spend_retry`."""
        return self.spend_retry(key)

    async def afinish(self, key: str, outcome: Outcome[Any], probe: bool) -> None:
        """Async :meth:`finish`."""
        self.finish(key, outcome, probe)

    def handle(self, action: CoordinatorAction) -> object:
        """Perform one of the flow's coordinator actions."""
        if isinstance(action, Admit):
            return self.admit(action.key)
        if isinstance(action, Acquire):
            if self.patient:
                return self.acquire(action.key, action.attempt, action.write_gap,
                                    max_wait=action.max_wait, fail_fast=action.fail_fast)
            if action.write_gap:
                return self.acquire(action.key, action.attempt, action.write_gap)
            return self.acquire(action.key, action.attempt)
        if isinstance(action, Learn):
            self.learn(action.key, action.throttle, action.lease)
            return None
        if isinstance(action, SpendRetry):
            return self.spend_retry(action.key)
        self.finish(action.key, action.outcome, action.probe)
        return None

    async def ahandle(self, action: CoordinatorAction) -> object:
        """Perform one of the flow's coordinator actions, asynchronously."""
        if isinstance(action, Admit):
            return await self.aadmit(action.key)
        if isinstance(action, Acquire):
            if self.patient:
                return await self.aacquire(
                    action.key, action.attempt, action.write_gap,
                    max_wait=action.max_wait, fail_fast=action.fail_fast)
            if action.write_gap:
                return await self.aacquire(action.key, action.attempt, action.write_gap)
            return await self.aacquire(action.key, action.attempt)
        if isinstance(action, Learn):
            await self.alearn(action.key, action.throttle, action.lease)
            return None
        if isinstance(action, SpendRetry):
            return await self.aspend_retry(action.key)
        await self.afinish(action.key, action.outcome, action.probe)
        return None


class NoCoordination(Coordinator):
    """Coordinates nothing: every operation is admitted, every retry allowed."""

    passive = True

    def __repr__(self) -> str:
        return "NoCoordination()"
