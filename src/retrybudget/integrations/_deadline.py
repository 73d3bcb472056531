"""An attempt's absolute end, which bounds its whole exchange (connect, status line, headers
and the body read), and the watchdog that closes a connection still busy at that end."""

from __future__ import annotations

import contextlib
import contextvars
import heapq
import itertools
import math
import os
import threading
from collections.abc import Callable
from typing import Any

from .._clock import SYSTEM_CLOCK, Clock, monotonic_reader
from ..core.actions import Attempt

__all__ = ["Alarm", "Deadline", "bounded", "current_deadline", "watchdog"]


class Deadline:
    """An attempt's absolute end: the deadline the whole exchange is read against.

    Per-read timeouts bound each read, not the exchange: a provider that sends one byte just
    inside every read timeout would hold an attempt without bound. The drivers read the
    status line, the headers and the body against this end instead (its ``remaining()``
    shrinks with every read), so an attempt ends at ``end`` however the bytes trickle in.

    Args:
        clock: the retrier's clock.
        timeout: the attempt's timeout (already clipped to the operation's deadline).
        now: ``clock``'s monotonic reader (:func:`~retrybudget._clock.monotonic_reader`)
            when the caller has it at hand.
    """

    __slots__ = ("alarms", "clock", "end", "now")

    def __init__(self, clock: Clock, timeout: float,
                 now: Callable[[], float] | None = None) -> None:
        self.clock = clock
        # read at every socket operation: the plain reader
        self.now = now = monotonic_reader(clock) if now is None else now
        self.end = now() + timeout
        self.alarms: list[Alarm] = []

    def remaining(self) -> float:
        """Seconds left until the attempt's end (negative once it has passed)."""
        return self.end - self.now()

    def clip(self, timeout: float | None, error: type[Exception] = TimeoutError) -> float:
        """``timeout`` cut to what is left; raises ``error`` once nothing is."""
        left = self.end - self.now()  # remaining(), read at every socket operation
        if left <= 0:
            raise error("the attempt's deadline passed")
        return left if timeout is None or timeout > left else timeout

    def watch(self, action: Callable[[], None]) -> None:
        """Run ``action`` (close the connection) at the end, unless the attempt ended first."""
        if self.now is _WATCHDOG_TIME:  # the end is an instant of the watchdog's own clock
            self.alarms.append(watchdog.arm_at(self.end, action))
            return
        left = self.end - self.now()  # remaining(), read as each attempt's exchange begins
        self.alarms.append(watchdog.arm(left if left > 0 else 0.0, action))

    def release(self) -> None:
        """The attempt's exchange is over: disarm what :meth:`watch` armed."""
        for alarm in self.alarms:
            alarm[2] = None  # cancel()
        self.alarms.clear()

    @classmethod
    def of(cls, clock: Clock, attempt: Attempt) -> Deadline | None:
        """The end of ``attempt`` (None when the policy sets no time limit)."""
        return None if attempt.timeout is None else cls(clock, attempt.timeout)


_DEADLINE: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "retrybudget_exchange_deadline", default=None)


def current_deadline() -> Deadline | None:
    """The end of the attempt whose exchange runs in this thread or task, or None."""
    return _DEADLINE.get()


class _Bounded:
    """The context of :func:`bounded` (a class: cheaper to enter than a generator's)."""

    __slots__ = ("deadline", "token")

    def __init__(self, deadline: Deadline | None) -> None:
        self.deadline = deadline

    def __enter__(self) -> None:
        self.token = _DEADLINE.set(self.deadline)

    def __exit__(self, *exc_info: object) -> None:
        _DEADLINE.reset(self.token)
        if self.deadline is not None:
            self.deadline.release()


def bounded(deadline: Deadline | None) -> contextlib.AbstractContextManager[None]:
    """Run the block's network reads and writes against ``deadline``; disarm on leaving."""
    return _Bounded(deadline)


class Alarm(list[Any]):  # [instant, order, action or None]
    """One armed watchdog action, its own entry in the watchdog's heap: ``[at, order, action]``
    (``order`` tells alarms due at one instant apart; a list: made without a call of ours).
    :meth:`cancel` disarms it (safe from any thread): its action becomes None."""

    __slots__ = ()

    def cancel(self) -> None:
        """Disarm: the action will not run (it may already have run)."""
        self[2] = None


class _Watchdog:
    """One daemon thread that runs actions at their instants (closing a stalled socket).

    Sync HTTP libraries read the status line and headers inside one blocking call that
    per-read timeouts cannot cut short; the watchdog closes the connection at the attempt's
    end, which makes that call fail at once. A heap of alarms, one thread for the process.
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._heap: list[Alarm] = []
        self._order = itertools.count()
        self._fresh()
        os.register_at_fork(after_in_child=self._fresh)

    def _fresh(self) -> None:
        """No thread yet (and a new lock): at start, and in a child after a fork, where the
        parent's thread does not run and its lock may have been held by another thread."""
        self._mutex = threading.Lock()
        self._lock = threading.Condition(self._mutex)
        self._running = False
        self._until = 0.0  # the instant the thread sleeps to (inf: to no alarm)

    def arm(self, delay: float, action: Callable[[], None]) -> Alarm:
        """Run ``action`` in ``delay`` seconds unless the returned alarm is cancelled first.

        Cheap per request: the alarms cancelled at the front leave here (exchanges mostly end
        in the order they began, so the heap stays as small as the exchanges in flight), and
        the thread is woken only for an alarm due before the instant it sleeps to.
        """
        return self.arm_at(self.clock.monotonic() + delay, action)

    def arm_at(self, at: float, action: Callable[[], None]) -> Alarm:
        """:meth:`arm` at the instant ``at`` of the watchdog's monotonic clock."""
        alarm = Alarm((at, next(self._order), action))
        heap = self._heap
        with self._mutex:
            while heap and heap[0][2] is None:
                heapq.heappop(heap)
            heapq.heappush(heap, alarm)
            if not self._running:
                self._running = True
                self._until = at
                threading.Thread(target=self._run, name="retrybudget-watchdog",
                                 daemon=True).start()
            elif at < self._until:
                self._until = at
                self._lock.notify()
        return alarm

    def _run(self) -> None:
        while True:
            with self._lock:
                while self._heap and self._heap[0][2] is None:
                    heapq.heappop(self._heap)  # cancelled alarms leave at the front
                if not self._heap:
                    self._until = math.inf
                    self._lock.wait(timeout=1.0)
                    if not self._heap:
                        self._running = False
                        return
                    continue
                self._until = self._heap[0][0]
                wait = self._until - self.clock.monotonic()
                if wait > 0:
                    self._lock.wait(timeout=wait)
                    continue
                alarm = heapq.heappop(self._heap)
            action, alarm[2] = alarm[2], None
            if action is not None:
                with contextlib.suppress(Exception):  # a socket already gone is the goal
                    action()


watchdog = _Watchdog(SYSTEM_CLOCK)
"""The process's watchdog (real time: it guards real sockets)."""

_WATCHDOG_TIME = monotonic_reader(SYSTEM_CLOCK)
"""The watchdog's clock's reader (``time.monotonic``): a deadline read by it arms at its end."""
