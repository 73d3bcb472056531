"""Pacing: requests spread while the quota runs low, and a provider's spacing of writes."""

from __future__ import annotations

from .._config import PacingConfig
from ._gate import Schedule
from ._instants import EPSILON


def pacing_interval(s: Schedule, now: float, pacing: PacingConfig | None) -> float:
    """Seconds between requests while the quota runs low, else 0.

    Pacing applies until the observed reset, while ``remaining`` is at or below
    ``threshold * limit`` (or ``min_remaining`` when the limit is unknown); it spreads what is
    left over the time to reset: ``(reset_at - now) / max(remaining, 1)``.
    """
    return paced_interval(s.remaining, s.limit, s.reset_at, now, pacing)


def paced_interval(remaining: int | None, limit: int | None, reset_at: float | None, now: float,
                   pacing: PacingConfig | None) -> float:
    """:func:`pacing_interval` of a schedule's ``remaining``, ``limit`` and ``reset_at``."""
    if pacing is None or remaining is None or reset_at is None or now >= reset_at:
        return 0.0
    if limit is not None and limit > 0:
        low = remaining <= pacing.threshold * limit
    else:
        low = remaining <= pacing.min_remaining
    if not low:
        return 0.0
    return (reset_at - now) / max(remaining, 1)


def write_wait(last_write: float, now: float, gap: float) -> float:
    """Seconds until a write may start under a key whose latest write started at
    ``last_write``: ``gap`` after it (0: now, within :data:`EPSILON`; 0 for no gap).

    The provider's spacing of mutating requests (GitHub: "at least one second between
    each" POST, PATCH, PUT or DELETE); the caller records ``now`` as the latest write when
    the write goes. Writers that wait ask again: each gap admits one.
    """
    if gap <= 0:
        return 0.0
    wait = last_write + gap - now
    return wait if wait > EPSILON else 0.0
