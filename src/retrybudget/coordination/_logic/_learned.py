"""A send rate learned from throttles that publish no quota (a 429 or 503 with only
``Retry-After``, or nothing): the fleet's requests are spaced by it, and it probes upward again.

A key's :class:`Learned` value counts the requests that went (:func:`send_counted`, two buckets of
:data:`SPAN` seconds: a sliding count of the last second). A throttle that names no quota
(:func:`rate_cut`) sets the rate the provider admitted, the requests sent in the last second
less the ones it refused (:data:`HOLD`: the refusals of one burst each take one off), as the
*peak*, and the rate drops to :data:`BETA` times it. From there it climbs back on the concave
branch of the AWS SDKs' CUBIC (``botocore/retries/throttling.py``: ``rate = SCALE * (t - K)**3
+ peak``, ``K = (peak * (1 - BETA) / SCALE) ** (1/3)``), holds the peak for :data:`QUIET`
seconds, then probes upward by :data:`STEP` of the peak per quiet period, and is forgotten once
it reaches :data:`FORGET` times the peak (:func:`learned_rate`). docs/coordination.md gives the
reasoning for each constant.

Pure: time comes in as ``now`` (the coordinator's clock), state in and out as a frozen value.
``lua/learned.lua`` implements the same steps for Redis; each Lua function names the one here
it mirrors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...core import evolve, fast_init
from ._instants import NEVER

BETA = 0.7
"""The rate right after a throttle, as a share of the peak (the AWS SDKs' CUBIC ``_BETA``)."""

SCALE = 0.4
"""The cubic's scale, requests per second per second cubed (CUBIC's ``_SCALE_CONSTANT``)."""

SPAN = 1.0
"""Seconds the fleet's sends are counted over: the rate is requests per second."""

HOLD = 1.0
"""Seconds after a cut in which further throttles are the same burst's (requests already in
flight when the first was answered): each takes one off the peak, none cuts again."""

QUIET = 10.0
"""Seconds the rate holds the peak once back to it, and then each probing step lasts."""

STEP = 0.05
"""Each quiet period past the peak raises the rate by this share of the peak."""

FORGET = 2.0
"""A rate that has probed up to this many times the peak is forgotten: no pacing."""

FLOOR = 0.5
"""The lowest learned rate, requests per second."""

CEILING = 100_000.0
"""The highest learned rate (and peak), requests per second."""

MARGIN = 0.03
"""The peak is the admitted rate less this share: sends spaced evenly at exactly a fixed
window's limit put one more into a window whenever the one at its start is late and the one
at its end is not; 3 % of a second is 30 ms of such jitter."""

MIN_PEAK = 1.0
"""A throttle when fewer than this many requests a second were admitted teaches no rate: the
limit is not the fleet's pace (a long window, or a limit spent elsewhere); the gate holds it."""

CONSTANTS = {"BETA": BETA, "SCALE": SCALE, "SPAN": SPAN, "HOLD": HOLD, "QUIET": QUIET,
             "STEP": STEP, "FORGET": FORGET, "FLOOR": FLOOR, "CEILING": CEILING,
             "MARGIN": MARGIN, "MIN_PEAK": MIN_PEAK}
"""Every constant by name, as ``lua/learned.lua`` takes them."""


@fast_init
@dataclass(frozen=True, slots=True)
class Learned:
    """One key's learned send rate and the count it is learned from.

    Attributes:
        peak: requests per second the provider admitted when it last throttled without naming
            a quota (None: no rate learned, nothing paced).
        cut: when that throttle came.
        sent: requests that went in the current bucket (from ``since``, :data:`SPAN` long).
        before: requests that went in the bucket before it.
        since: the current bucket's start.
    """

    peak: float | None = None
    cut: float = NEVER
    sent: int = 0
    before: int = 0
    since: float = NEVER


def _rolled(s: Learned, now: float) -> Learned:
    """``s`` with its buckets moved on to the one holding ``now``."""
    if now - s.since < SPAN:
        return s
    if now - s.since < 2 * SPAN:
        return evolve(s, sent=0, before=s.sent, since=s.since + SPAN)
    return evolve(s, sent=0, before=0, since=now)


def send_counted(s: Learned, now: float) -> Learned:
    """``s`` after one request went at ``now`` (its bucket rolled on first when ``now`` is
    past it; inside it, one copy and no other call: a healthy key's every request)."""
    if now - s.since >= SPAN:
        s = _rolled(s, now)
    return evolve(s, sent=s.sent + 1)


def send_rate(s: Learned, now: float) -> float:
    """Requests that went in the last :data:`SPAN` seconds (the bucket before the current one
    counted for the part of it still inside the span), per second."""
    s = _rolled(s, now)
    inside = max(0.0, 1.0 - (now - s.since) / SPAN)
    return (s.sent + s.before * inside) / SPAN


def learned_rate(s: Learned, now: float) -> float | None:
    """The requests per second the fleet may send under the key at ``now`` (an instant
    ahead too: the rate a slot planned for then is spaced by); None: not paced.

    Within ``K`` of the cut, CUBIC's concave branch back up to the peak; then the peak for
    :data:`QUIET` seconds, and :data:`STEP` of the peak more after each further quiet period;
    forgotten from :data:`FORGET` times the peak on. Always within
    ``[FLOOR, CEILING]``.
    """
    peak = s.peak
    if peak is None:
        return None
    since = max(0.0, now - s.cut)
    k: float = (peak * (1.0 - BETA) / SCALE) ** (1.0 / 3.0)  # the peak is positive
    if since < k:
        rate = SCALE * (since - k) ** 3 + peak
    else:
        rate = peak * (1.0 + STEP * math.floor((since - k) / QUIET))
        if rate >= FORGET * peak:
            return None
    return min(max(rate, FLOOR), CEILING)


def learned_gap(s: Learned, now: float) -> float:
    """Seconds between two requests the learned rate allows from ``now`` on (0: not paced):
    the slot after one at ``now`` lies this far from it."""
    rate = learned_rate(s, now)
    return 0.0 if rate is None else 1.0 / rate


def rate_cut(s: Learned, now: float) -> Learned:
    """``s`` after a throttle that named no quota, at ``now``.

    The first of a burst (none within :data:`HOLD` of the last cut) cuts: the peak becomes
    the rate the provider admitted, the requests sent in the last second less this one
    (and less :data:`MARGIN`), never above the rate learned until then; the rate falls to
    :data:`BETA` times it. A throttle at or under the peak (while the rate climbs back to
    it or holds it) shows the peak was too high: the new one is also at most the rate at
    that instant less :data:`MARGIN` (CUBIC's fast convergence, by the margin rather than
    by its ``(1 + BETA) / 2``). A later throttle of the same burst takes one more refused
    request off the admitted count (the margin kept). Fewer than :data:`MIN_PEAK` admitted
    teaches nothing.
    """
    if s.peak is not None and 0.0 <= now - s.cut < HOLD:
        return evolve(s, peak=max(s.peak - (1.0 - MARGIN) / SPAN, FLOOR))
    admitted = (send_rate(s, now) - 1.0 / SPAN) * (1.0 - MARGIN)
    current = learned_rate(s, now)
    if current is not None and s.peak is not None:
        under = current <= s.peak + 1e-9  # fast convergence: the peak itself was refused
        admitted = min(admitted, current * (1.0 - MARGIN) if under else current)
    if admitted < MIN_PEAK:
        return s
    return evolve(_rolled(s, now), peak=min(max(admitted, FLOOR), CEILING), cut=now)


def rebooks(before: Learned, after: Learned) -> bool:
    """Whether a :func:`rate_cut` from ``before`` to ``after`` makes every slot already booked
    ask again (and the schedule's tail go back to the gate): it cut anew, so slots spaced at
    the rate before it would send the fleet on at the refused rate once the gate opens (a
    job queue books its whole backlog at once: its later slots went over window after
    window)."""
    return after.cut != before.cut

