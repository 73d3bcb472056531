"""The Redis coordinator while Redis is unavailable: calls answered by its local
:class:`MemoryCoordinator` (``on_failure="local"``) or refused (``"fail"``), the transition
logged once on ``retrybudget.coordination`` and counted, and Redis tried again every
``retry_interval`` seconds (at a provider window's end when one is near: workers that come
back together resume the shared count for a fresh window)."""

from __future__ import annotations

import logging
import threading
from typing import Literal, TypeVar

from .._clock import Clock
from ..observe import notify
from ._logic import NEVER
from ._memory import MemoryCoordinator
from ._redis_pipeline import Call, in_event_loop
from ._redis_scripts import WORKER_TTL
from ._stats import Tally

__all__ = ["OnFailure", "RedisOutage", "window_end"]

logger = logging.getLogger("retrybudget.coordination")

T = TypeVar("T")

OnFailure = Literal["local", "fail"]
"""What to do while Redis is unavailable: coordinate locally, or refuse new operations."""


def window_end(local: MemoryCoordinator, key: str, after: float) -> float | None:
    """The end of ``key``'s provider window as ``local`` counts it, when it comes at or after
    ``after``: the reset the provider named, or, once that passed, the next window's end
    (the last reset plus the window's length, when two resets in a row have shown it);
    None when neither is known. No further: a provider's next window may start only with
    its next request."""
    s = local.schedule(key)
    if s is None:
        return None
    last = s.rolled_at if s.reset_at is None else s.reset_at
    if last >= after:
        return last
    if s.window is None or last == NEVER or last + s.window < after:
        return None
    return last + s.window


class RedisOutage:
    """What a :class:`~retrybudget.coordination.RedisCoordinator` does when a call to Redis
    fails, and when Redis answers again (a part of the coordinator: the state it reads is the
    coordinator's)."""

    clock: Clock
    local: MemoryCoordinator
    events: tuple[object, ...]
    on_failure: OnFailure
    socket_timeout: float
    retry_interval: float
    _lock: threading.Lock
    _degraded: bool
    _retry_at: float
    _trying: threading.Event | None
    _tally: Tally
    _live: dict[str, int]
    _reseed: set[str]

    def _should_try(self) -> bool:
        if not self._degraded:
            return True
        with self._lock:
            now = self.clock.monotonic()
            trying = self._trying
            if trying is None and now >= self._retry_at:
                self._retry_at = now + self.retry_interval  # one caller tries
                self._trying = threading.Event()
                return True
        if trying is None or in_event_loop():
            return False  # the rest go local (an event loop is never held up)
        # the rest wait for the try's answer, at most as long as it may take, so that at a
        # window's start they do not spend the fresh window locally while Redis is back
        if not trying.wait(self.socket_timeout):
            with self._lock:
                if self._trying is trying:
                    self._trying = None  # it never answered: the next due caller tries
        return not self._degraded

    def _tried(self) -> None:
        """A call to Redis answered or failed: callers waiting for a try go on."""
        trying, self._trying = self._trying, None
        if trying is not None:
            trying.set()

    def _went_down(self, exc: BaseException) -> None:
        with self._lock:
            self._retry_at = self._next_try(self.clock.monotonic())
            self._tried()
            if self._degraded:
                return
            self._degraded = True
            self._reseed = set(self._live)  # Redis may come back empty: offer what we know
        logger.warning(
            "Redis coordination unavailable (%s: %s); %s", type(exc).__name__, exc,
            "coordinating locally" if self.on_failure == "local" else "refusing new operations",
        )

    def _next_try(self, now: float) -> float:
        """When to try Redis again after a failed call at ``now``: ``retry_interval`` later,
        or, when a provider window this coordinator counts locally ends within
        :data:`WORKER_TTL` seconds, at the first end after that. Every worker's local window
        ends at the instant the provider named, so workers that come back there resume the
        shared count together for a fresh window, not mid-way through one whose shares the
        others are still spending locally."""
        later = now + self.retry_interval
        ends = [end for key in list(self._live)
                if (end := window_end(self.local, key, later)) is not None and end <= now + WORKER_TTL]
        return min(ends, default=later)

    def _came_back(self) -> None:
        if not self._degraded:
            return
        with self._lock:
            was, self._degraded = self._degraded, False
            self._tried()
        if was:
            logger.info("Redis coordination is back")

    def _without_redis(self, call: Call[T]) -> T:
        if call.script is not None:
            self._tally.add("fallbacks")
            if self.on_failure == "fail" and call.refusal is not None:
                return call.refusal
            if self.events:
                notify(self.events, "coordinator_fallback", call.key)
        return call.local()

    def _read(self, call: Call[T], raw: object) -> T:
        self._came_back()
        return call.parse(raw)

    def _failed(self, call: Call[T], exc: BaseException) -> T:
        self._went_down(exc)
        return self._without_redis(call)
