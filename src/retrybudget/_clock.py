"""The one clock.

Every other module asks a :class:`Clock` for the time and for sleeping; only this
module touches :mod:`time` and :mod:`asyncio`'s sleep. Tests inject a
:class:`FakeClock`, which advances when slept on, so nothing waits for real.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = ["SYSTEM_CLOCK", "Clock", "FakeClock", "SystemClock", "monotonic_reader", "wall_reader"]


@runtime_checkable
class Clock(Protocol):
    """Where time comes from: monotonic seconds, wall-clock epoch seconds, and sleeping."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes backwards (for deadlines and waits)."""
        ...

    def wall(self) -> float:
        """Seconds since the Unix epoch (to read provider timestamps and report `retry_at`)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds``."""
        ...

    async def async_sleep(self, seconds: float) -> None:
        """Suspend the calling task for ``seconds``."""
        ...


class SystemClock:
    """The real clock: :func:`time.monotonic`, :func:`time.time` and real sleeps."""

    __slots__ = ()

    def monotonic(self) -> float:
        """Seconds from :func:`time.monotonic`."""
        return time.monotonic()

    def wall(self) -> float:
        """Seconds since the epoch from :func:`time.time`."""
        return time.time()

    def sleep(self, seconds: float) -> None:
        """Sleep with :func:`time.sleep`; non-positive durations return at once."""
        if seconds > 0:
            time.sleep(seconds)

    async def async_sleep(self, seconds: float) -> None:
        """Sleep with :func:`asyncio.sleep`; non-positive durations still yield once."""
        await asyncio.sleep(max(0.0, seconds))

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK: Clock = SystemClock()
"""The process-wide real clock, the default wherever a clock is optional."""


def monotonic_reader(clock: Clock) -> Callable[[], float]:
    """The function that reads ``clock``'s monotonic time (the system's own, for the real clock)."""
    return time.monotonic if type(clock) is SystemClock else clock.monotonic


def wall_reader(clock: Clock) -> Callable[[], float]:
    """The function that reads ``clock``'s wall time (the system's own, for the real clock)."""
    return time.time if type(clock) is SystemClock else clock.wall


class FakeClock:
    """A clock for tests: time stands still until something sleeps or calls :meth:`advance`.

    Sleeping advances both the monotonic and the wall clock by the slept amount and
    records it in :attr:`sleeps`, so tests can assert on every wait without waiting.
    Safe to share between threads.

    Args:
        monotonic: the starting monotonic reading.
        wall: the starting wall-clock reading (epoch seconds).
    """

    def __init__(self, monotonic: float = 1000.0, wall: float = 1_800_000_000.0) -> None:
        self._lock = threading.Lock()
        self._monotonic = float(monotonic)
        self._wall = float(wall)
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        """The current fake monotonic reading."""
        with self._lock:
            return self._monotonic

    def wall(self) -> float:
        """The current fake wall-clock reading."""
        with self._lock:
            return self._wall

    def advance(self, seconds: float) -> None:
        """Move both clocks forward by ``seconds`` (negative values are refused)."""
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        with self._lock:
            self._monotonic += seconds
            self._wall += seconds

    def sleep(self, seconds: float) -> None:
        """Record the sleep and advance time by it, without blocking."""
        seconds = max(0.0, seconds)
        with self._lock:
            self.sleeps.append(seconds)
            self._monotonic += seconds
            self._wall += seconds

    async def async_sleep(self, seconds: float) -> None:
        """Record the sleep, advance time by it, and yield to the event loop once."""
        self.sleep(seconds)
        await asyncio.sleep(0)

    def __repr__(self) -> str:
        return f"FakeClock(monotonic={self._monotonic!r}, wall={self._wall!r})"
