"""A key's gate: its schedule, the delay a throttle closes it for, and what an answer teaches."""

from __future__ import annotations

from dataclasses import dataclass

from ...core import evolve, fast_init
from ...core.throttle import Throttle
from .._config import GateConfig
from ._instants import EPSILON, NEVER, PROBE_PATIENCE


@fast_init
@dataclass(frozen=True, slots=True)
class Schedule:
    """One key's gate and send schedule (instants on the coordinator's clock).

    Attributes:
        gate: no request may start before this instant (the provider throttles until then).
        tail: the latest slot handed out (a request that went, or a reserved slot).
        herd: the latest slot handed out while releasing workers held at a gate with an
            unknown quota (one per ``spread``).
        streak: rate limits in a row that named no time (the gate doubles for each).
        remaining: the lowest ``remaining`` observed in the current window.
        limit: the quota size at the last observation.
        reset_at: when the observed quota resets (the profile's slack included).
        quota: requests the current window still allows by this coordinator's count
            (``limit - used``, or without a limit the observation's ``remaining`` less the
            requests in flight then). None: not counted.
        used: requests of the current window spent by this coordinator's count, each counted
            once (a request in flight is in it from the moment it went). None: not counted.
        release: the instant of the latest release by quota (held workers admitted at once).
        released: workers given a slot by that release so far (at it, or in later windows).
        rolled_at: the reset instant of the window that rolled over last.
        window: the window's length, learned from two resets in a row (None: unknown).
        answered: whether an answer to a request under this key has come back (until then
            the key is in its first window: :func:`quota_hold` lets only probes go).
        answered_at: when the first answer came back (with ``PacingConfig.probe_unknown_limit``
            on, a key whose answers name no quota is still probed for
            :data:`~._learned.SPAN` after it, :func:`quota_hold`).
        first: the instant the key's latest probe went (its first acquire, or a request sent
            once a probe had waited :data:`PROBE_PATIENCE` for its answer, :func:`sent`),
            kept when the first answer names a quota window: until a window has
            rolled over, the named reset less this is a lower bound of the window's length
            (:func:`release_slot`).
    """

    gate: float = NEVER
    tail: float = NEVER
    herd: float = NEVER
    streak: int = 0
    remaining: int | None = None
    limit: int | None = None
    reset_at: float | None = None
    quota: int | None = None
    used: int | None = None
    release: float = NEVER
    released: int = 0
    rolled_at: float = NEVER
    window: float | None = None
    answered: bool = False
    answered_at: float = NEVER
    first: float = NEVER


def gate_delay(throttle: Throttle, streak: int, since_gate: float,
               max_gate: float) -> tuple[float, int]:
    """How long a throttling response closes the gate: ``(seconds, new streak)``.

    With a hint, the hint. Without one, :meth:`Throttle.wait` of the shared streak, which
    counts rate limits without a hint that came within one floor of the previous gate's end
    and restarts otherwise. Capped at ``max_gate``.
    """
    if throttle.hint is not None:
        return min(throttle.wait(streak), max_gate), streak
    if since_gate > throttle.floor:
        streak = 0
    return min(throttle.wait(streak), max_gate), streak + 1


def window_used(used: int | None, limit: int, remaining: int, in_flight: int,
                share: bool = False) -> int:
    """Requests of the window spent, after an answer said ``remaining`` of ``limit`` are left.

    The truth lies between ``limit - remaining`` (every request in flight already counted by
    the provider) and that plus ``in_flight`` (none counted yet). The running count ``used``
    (every request counted once, when it went) is kept inside those bounds; a window whose
    count is not running yet (None) starts at the upper one.

    With ``share``, ``limit`` and ``remaining`` are one worker's share of a quota others
    spend too (a coordinator cut off from the shared count): the running count is that
    worker's own requests, which the provider's answer can raise (the others spent more than
    their share) but never lower (they spent less: what they left is theirs). The Lua
    scripts have no such mode: Redis counts every worker's requests.
    """
    low = limit - remaining
    high = low + in_flight
    if used is None:
        return high
    return max(low, used) if share else max(low, min(used, high))


def learn(s: Schedule, throttle: Throttle, now: float, gate: GateConfig,
          in_flight: int = 0, answered: int = 0, share: bool = False) -> Schedule:
    """A key's schedule after a response (``in_flight``: other requests still unanswered;
    ``answered``: 1 when the response's own request was counted in flight until now, so a
    window that rolls over with this response counts it among its first requests;
    ``share``: the quota is this worker's share, see :func:`window_used`).

    A throttling response moves the gate to ``now + gate_delay`` (never earlier than it was);
    when its wait is the window's reset and that reset is already known, to its earlier
    naming (the slots planned on it stay ahead of the gate).
    A response with ``remaining`` and a reset still ahead replaces the pacing observation,
    unless it is stale: same reset (within 1 s) and more remaining than already known (a slow
    response overtaken by a newer one). One reset named twice keeps the earlier naming: each
    lies at or after the real reset by the time its answer took to arrive, so the earliest
    is the closest. With a limit, the window's count is
    :func:`window_used` (in-flight requests counted once); without one, ``remaining`` less
    the requests in flight. Any response, quota headers or not, ends the key's first window
    (``answered``, at ``answered_at``).
    """
    remaining, limit = throttle.remaining, throttle.limit
    # the quota window the response names (learn.lua's `observed`): its reset, else None
    named = throttle.reset if remaining is not None and (throttle.reset or 0) > 0 else None
    if not s.answered:  # a first answer that names no quota window: `first` bounds none
        s = evolve(s, answered=True, answered_at=now,
                   first=s.first if named is not None else NEVER)
    if throttle.throttled:
        delay, streak = gate_delay(throttle, s.streak, now - s.gate, gate.max_gate)
        closes = now + delay
        if (throttle.reset is not None and throttle.hint is not None
                and abs(throttle.hint - throttle.reset) <= EPSILON and s.reset_at is not None
                and now < s.reset_at and abs(closes - s.reset_at) < 1.0):
            closes = min(closes, s.reset_at)  # the reset named again: the earlier is closer
        s = evolve(s, gate=max(s.gate, closes), streak=streak)
    if named is not None and remaining is not None:
        s = rolled(s, now, in_flight + answered)
        reset_at = now + named
        same = s.reset_at is not None and abs(reset_at - s.reset_at) < 1.0
        if same and s.reset_at is not None:  # one reset named twice: the earlier is closer
            reset_at = min(reset_at, s.reset_at)
        if (s.rolled_at != NEVER and reset_at > s.rolled_at + EPSILON and (
                s.reset_at is None or reset_at < s.reset_at)):
            # the window's length: from the reset it rolled over at to this one's closest naming
            s = evolve(s, window=min(reset_at - s.rolled_at, gate.max_gate))
        if same and s.remaining is not None and remaining > s.remaining:
            return evolve(s, reset_at=reset_at)  # a stale count, but a closer reset
        if limit is None or limit < remaining:
            return evolve(s, remaining=remaining, limit=limit, reset_at=reset_at,
                           quota=max(remaining - in_flight, 0), used=None)
        counting = s.used is not None and (same or s.reset_at is None)  # rolled into this one
        used = window_used(s.used if counting else None, limit, remaining, in_flight, share)
        s = evolve(s, remaining=remaining, limit=limit, reset_at=reset_at,
                    quota=max(limit - used, 0), used=used)
    return s


def rolled(s: Schedule, now: float, in_flight: int) -> Schedule:
    """A key's schedule once the observed window has reset (unchanged before ``reset_at``).

    The old observation says nothing any more: it is dropped, and the count starts again
    from the limit (when one was given) less the requests still in flight, which may land
    in the new window (they count as its first ``used``). The new window's reset is unknown
    until a response names it. A reset within :data:`EPSILON` of now has passed, as a slot
    that close to now is now: otherwise a request let go at that slot would be counted
    against the window it does not land in.
    """
    if s.reset_at is None or now + EPSILON < s.reset_at:
        return s
    if s.limit is None:
        return evolve(s, remaining=None, reset_at=None, quota=None, used=None,
                       rolled_at=s.reset_at)
    used = min(in_flight, s.limit)
    return evolve(s, remaining=None, reset_at=None, quota=s.limit - used, used=used,
                   rolled_at=s.reset_at)


def sent(s: Schedule, now: float | None = None) -> Schedule:
    """A key's schedule after a request went at ``now``: one less in the window's count. In
    the key's first window, a request that goes :data:`PROBE_PATIENCE` or more after the
    latest probe (``first``) is another probe: ``first`` becomes ``now``
    (:func:`~retrybudget.coordination._logic.quota_hold` waits for it in turn)."""
    if now is not None and not s.answered and now - s.first >= PROBE_PATIENCE:
        s = evolve(s, first=now)
    if s.quota is None:
        return s
    return evolve(s, quota=max(s.quota - 1, 0), used=None if s.used is None else s.used + 1)
