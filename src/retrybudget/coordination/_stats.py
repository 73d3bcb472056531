"""Coordinator counters, for stats and metrics."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass

from ..core.actions import Admission, Permit
from ..core.outcome import WaitReason

__all__ = ["CoordinationStats", "Tally"]


@dataclass(frozen=True, slots=True)
class CoordinationStats:
    """What one coordinator object has answered since it was made (this process only).

    Attributes:
        admitted: operations admitted (probes included).
        refused: operations refused at admission (breaker open, or coordination unavailable).
        probes: half-open probes admitted.
        breaker_opened: times a finish reported here opened a breaker.
        gate_waits: permits that asked a worker to wait at a closed gate.
        pacing_waits: permits that asked a worker to wait for its slot (pacing, herd release).
        concurrency_waits: permits that asked a worker to wait for a place in flight.
        retries_allowed: retries the retry budget allowed.
        retries_refused: retries the retry budget refused.
        fallbacks: calls answered without the shared store (Redis down or slow).
        calls: calls sent to the shared store (Redis scripts; a merged call counts once).
        round_trips: round trips to the shared store: one per sync call, one per pipeline of
            the async calls an event loop made in one turn.
        degraded: whether the shared store is unavailable right now.
    """

    admitted: int = 0
    refused: int = 0
    probes: int = 0
    breaker_opened: int = 0
    gate_waits: int = 0
    pacing_waits: int = 0
    concurrency_waits: int = 0
    retries_allowed: int = 0
    retries_refused: int = 0
    fallbacks: int = 0
    calls: int = 0
    round_trips: int = 0
    degraded: bool = False


_WAITS = {
    WaitReason.GATE: "gate_waits",
    WaitReason.PACING: "pacing_waits",
    WaitReason.CONCURRENCY: "concurrency_waits",
}


class Tally:
    """Thread-safe counters behind :class:`CoordinationStats`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = dict.fromkeys(
            (f.name for f in dataclasses.fields(CoordinationStats) if f.name != "degraded"), 0
        )

    def add(self, name: str, n: int = 1) -> None:
        """Add ``n`` to counter ``name``."""
        with self._lock:
            self._counts[name] += n

    def sent(self, calls: int = 1) -> None:
        """Count ``calls`` sent to the shared store in one round trip (one lock taken)."""
        with self._lock:
            self._counts["calls"] += calls
            self._counts["round_trips"] += 1

    def admission(self, admission: Admission) -> Admission:
        """Count an admission and return it."""
        if not admission.allowed:
            self.add("refused")
        else:
            self.add("admitted")
            if admission.probe:
                self.add("probes")
        return admission

    def permit(self, permit: Permit) -> Permit:
        """Count a permit that asks to wait, and return it."""
        if permit.wait > 0:
            self.add(_WAITS.get(permit.reason, "gate_waits"))
        return permit

    def retry(self, allowed: bool) -> bool:
        """Count a retry budget answer and return it."""
        self.add("retries_allowed" if allowed else "retries_refused")
        return allowed

    def snapshot(self, *, degraded: bool = False) -> CoordinationStats:
        """The counters now."""
        with self._lock:
            return CoordinationStats(**self._counts, degraded=degraded)
