"""The gateway's door: which requests start a provider operation, and with what budget.

A request's deadline starts when it arrives, not when its handler runs: the time it waited in
front of the event loop is paid out of its budget. The door admits a request only if fewer
than ``max_in_flight`` operations are running and the budget it has left is at least
``min_budget``; otherwise the gateway answers at once (503 ``gateway_overloaded`` with a
``Retry-After``, no provider request). An admitted operation ends early enough for its answer
to be on the wire by the deadline: the door keeps back a reserve of three times the event
loop's recent lag, at least 50 ms each (how late the loop resumes a sleeping task: once for
the time a request waits before it is read, once for its operation's end, once for its
answer) plus the time to write the answer.

:func:`admit` is the rule, pure; :class:`Door` holds the count of operations in flight and
:class:`LoopLag` measures the lag.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from .._clock import SYSTEM_CLOCK, Clock

__all__ = ["ANSWER_TIME", "LAG_FLOOR", "LAG_TURNS", "STEP", "STORE_TIME", "Admitted", "Door", "LoopLag",
           "Shed", "admit", "reserve"]

STEP = 0.05
"""Operation budgets are whole multiples of this (seconds), rounded down: a few retriers, one
per budget, serve every request."""

ANSWER_TIME = 0.05
"""Seconds kept back to write an answer once it is decided."""

LAG_TURNS = 3
"""Loop turns, each as late as the loop's recent lag, that a request spends outside its
operation: before its bytes are read, when its operation's end fires, and for its answer (the
store and the write)."""

LAG_FLOOR = 0.05
"""The least lag (seconds) a loop turn is reserved for, however low the recent lag reads: a
lag spike that begins after a request was admitted is unseen by the door, and on a loaded
machine one does (the soak's late answers at a 0.03 s reading met a 0.35 s spike)."""

STORE_TIME = 0.05
"""Seconds an answer may spend on the store (the stored fact, the confirmed fact) after its
operation ended."""


@dataclass(frozen=True, slots=True)
class Admitted:
    """A request that may start its provider operation.

    Attributes:
        steps: the operation's budget in :data:`STEP` units (its deadline is ``steps * STEP``).
        answer_by: the monotonic instant the answer must be decided by (the store included).
        waited: seconds the request waited between arriving and being admitted.
    """

    steps: int
    answer_by: float
    waited: float

    @property
    def budget(self) -> float:
        """The operation's deadline, in seconds."""
        return self.steps * STEP


@dataclass(frozen=True, slots=True)
class Shed:
    """A request answered at once, without the provider.

    Attributes:
        reason: ``capacity`` (``max_in_flight`` operations were running) or ``budget`` (less
            than ``min_budget`` was left of the deadline once the reserve was kept back).
        waited: seconds the request waited between arriving and being shed.
    """

    reason: str
    waited: float


def reserve(lag: float, deadline: float) -> float:
    """Seconds of the deadline kept back for the answer: :data:`ANSWER_TIME` plus
    :data:`LAG_TURNS` times the loop's recent ``lag`` (at least :data:`LAG_FLOOR`), at most
    the whole deadline (a loop that lags that much starts no operation: every request is
    shed)."""
    return min(deadline, ANSWER_TIME + LAG_TURNS * max(LAG_FLOOR, lag))


def admit(*, arrived: float, now: float, deadline: float, lag: float, in_flight: int,
          max_in_flight: int, min_budget: float) -> Admitted | Shed:
    """Admit or shed a request that arrived at ``arrived`` (monotonic), asked at ``now``.

    The answer is due at ``arrived + deadline``; it is decided by that instant less
    :func:`reserve`, and the operation ends :data:`STORE_TIME` before that. Its budget is what
    is left, rounded down to whole :data:`STEP` units; below ``min_budget`` the request is
    shed, and so is every request while ``max_in_flight`` operations run.
    """
    waited = max(0.0, now - arrived)
    if in_flight >= max_in_flight:
        return Shed("capacity", waited)
    answer_by = min(now, arrived) + deadline - reserve(lag, deadline)
    left = answer_by - STORE_TIME - now
    steps = math.floor(left / STEP + 1e-9) if left > 0 else 0
    if steps * STEP < min_budget or steps <= 0:
        return Shed("budget", waited)
    return Admitted(steps, answer_by, waited)


class Door:
    """The count of provider operations in flight, and the rule that admits more.

    Args:
        clock: the app's clock.
        deadline: the gateway's deadline (seconds from a request's arrival to its answer).
        max_in_flight: provider operations running at once at most.
        min_budget: the least budget an operation is started with.
        lag: the loop's recent lag (0 when not measured).
    """

    def __init__(self, clock: Clock, *, deadline: float, max_in_flight: int, min_budget: float,
                 lag: LoopLag | None = None) -> None:
        self.clock = clock
        self.deadline = deadline
        self.max_in_flight = max_in_flight
        self.min_budget = min_budget
        self.lag = lag
        self.in_flight = 0

    def enter(self, arrived: float) -> Admitted | Shed:
        """Admit a request that arrived at ``arrived`` (counted in flight until :meth:`leave`)
        or shed it."""
        lag = self.lag.current() if self.lag is not None else 0.0
        verdict = admit(arrived=arrived, now=self.clock.monotonic(), deadline=self.deadline,
                        lag=lag, in_flight=self.in_flight, max_in_flight=self.max_in_flight,
                        min_budget=self.min_budget)
        if isinstance(verdict, Admitted):
            self.in_flight += 1
        return verdict

    def leave(self) -> None:
        """An admitted request has its answer."""
        self.in_flight -= 1


class LoopLag:
    """How late the event loop resumes a sleeping task: the worst of the recent samples.

    :meth:`run` sleeps ``interval`` on the running event loop, again and again, and records by
    how much more than ``interval`` the app's clock moved; :meth:`current` is the largest of
    the last ``window`` samples (three seconds or more) and of how overdue the sleep under way
    already is (a lag that starts now counts before its sample lands).

    Args:
        clock: the app's clock (what the lag is measured on).
        interval: seconds between samples.
        window: samples kept.
    """

    def __init__(self, clock: Clock, *, interval: float = 0.1, window: int = 30) -> None:
        self.clock = clock
        self.interval = interval
        self.samples: deque[float] = deque(maxlen=window)
        self.running = False
        self.sleeping_since: float | None = None

    def current(self) -> float:
        """The worst lag of the recent samples and of the sleep under way (0 before any)."""
        worst = max(self.samples, default=0.0)
        if self.sleeping_since is not None:
            worst = max(worst, self.clock.monotonic() - self.sleeping_since - self.interval)
        return worst

    def sample(self, started: float) -> None:
        """Record the lag of a sleep of ``interval`` that started at ``started``."""
        self.samples.append(max(0.0, self.clock.monotonic() - started - self.interval))

    async def run(self) -> None:
        """Sample until :meth:`stop` (or until cancelled)."""
        self.running = True
        while self.running:
            started = self.sleeping_since = self.clock.monotonic()
            # The event loop's own turn, on the real clock: a fake clock's sleep would move
            # its time instead of waiting for the loop (its lag then reads 0, as before).
            await SYSTEM_CLOCK.async_sleep(self.interval)
            self.sleeping_since = None
            self.sample(started)

    def stop(self) -> None:
        """End :meth:`run` after its current sleep."""
        self.running = False
