"""A worker's slot under a key: held by a closed gate or a used-up quota, released in windows."""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from ...core import evolve
from .._config import GateConfig, PacingConfig
from ._gate import Schedule
from ._instants import EPSILON, NEVER, PROBE_PATIENCE
from ._learned import SPAN
from ._pacing import pacing_interval


def quota_hold(s: Schedule, now: float, pacing: PacingConfig | None, in_flight: int = 0,
               spread: float = 0.0, waits: bool = False) -> float | None:
    """When the counted quota is used up: the instant it resets, else None.

    Requests beyond what the window allows wait for the reset and are released by quota
    there. The gate itself does not move: a later response can still correct the count.
    A count used up in a window whose reset no response has named yet (just rolled) holds
    for ``spread`` while requests are in flight: their answers will name it. So does a key
    in its first window (no answer yet, nothing counted) once ``pacing.probes`` requests are
    in flight: the first answer names the quota, and the rest are released by it; but only
    for :data:`PROBE_PATIENCE` after the latest probe went (``first``): a probe whose holder
    died never answers, so past that the next request goes as another probe (:func:`sent`).
    With ``pacing.probe_unknown_limit`` on, a caller that ``waits`` is held so for a while
    after that answer too, when it named no quota (:func:`still_probing`).
    """
    if pacing is None:
        return None
    if (s.quota is None and s.limit is None and pacing.probes > 0 and in_flight >= pacing.probes
            and (now - s.first < PROBE_PATIENCE if not s.answered
                 else waits and pacing.probe_unknown_limit and still_probing(s, now))):
        return now + spread if spread > 0 else None
    if s.quota is None or s.quota > 0:
        return None
    if s.reset_at is None:
        return now + spread if in_flight > 0 and spread > 0 else None
    return s.reset_at if now < s.reset_at else None


def still_probing(s: Schedule, now: float) -> bool:
    """Whether a key whose first answer named no quota is still probed at ``now``: for
    :data:`~._learned.SPAN` after that answer (``answered_at``), until its first throttle
    (its gate never closed), a caller that waits goes only while fewer than
    ``PacingConfig.probes`` requests are in flight (:func:`quota_hold`, when
    ``PacingConfig.probe_unknown_limit`` is on; the caller checks that no quota is counted).

    One request at a time, the first throttle refuses only the request that found the limit
    (sent blind, the fleet's other requests in flight when its answer came back were refused
    as well), and the admitted count the learned rate is cut from is the provider's own,
    whenever the limit is below what one request at a time reaches in that span. A fail-fast
    caller is not held (it is refused only by what the provider said), and after the span
    the fleet goes on blind: a provider that never throttles is slowed for one span (which
    is why the rule is opt-in).
    """
    return s.answered and s.gate == NEVER and 0.0 <= now - s.answered_at < SPAN


def probe_waits(fail_fast: bool, max_wait: float | None, spread: float) -> bool:
    """Whether a caller is held by :func:`still_probing`: one that waits (not ``fail_fast``)
    at least one ``spread`` (``max_wait``, what fits before its deadline; None: any). A
    caller whose deadline is that close goes instead: held, it would stop ``rate_limited``
    with no ``retry_at`` to come back at, ended by a guess rather than by anything the
    provider said."""
    return not fail_fast and (max_wait is None or max_wait >= spread)


def release_quota(s: Schedule, at: float) -> int | None:
    """How many held workers the window open at ``at`` admits at once; None: unknown.

    A window that has reset by ``at`` admits its limit; one that has not (a gate shorter
    than the window) admits what its count still allows.
    """
    if s.limit is None:
        return None
    if s.reset_at is not None and at < s.reset_at - EPSILON:
        return s.quota
    return s.limit


def booked_from(s: Schedule, at: float) -> float:
    """From which instant the reserved slots count as booked for the release at ``at``:
    half a window before it, once the window's length is known (a slot booked by a release
    planned from another naming of the same reset lies within that), else ``at`` itself."""
    return at - (s.window / 2 if s.window is not None else EPSILON)


def release_slot(s: Schedule, at: float, quota: int, spread: float,
                 reserved: Sequence[float] = ()) -> tuple[float, int]:
    """The slot of one more held worker in the release at ``at``: ``(slot, released)``.

    ``reserved``: the reserved slots, ascending; those from :func:`booked_from` on are the
    workers this release (or one planned from another naming of its reset) has already
    placed, in its window or later ones. The worker gets the first window from ``at`` on that
    holds fewer than ``quota`` of them: ``at`` itself, else the window after it, and so on,
    when the window's length is known. Before any window has rolled over, the time from the
    key's first request to ``at``, when ``at`` is the named reset, is a lower bound of that
    length (the request was counted in the window ending at ``at``), and the windows are
    counted that far apart (at least ``spread``), so a worker booked early only asks again,
    and the held workers do not all ask again at one instant. With neither, ``at`` while
    fewer than ``quota`` are booked, else ``at + spread`` (ask again once the release is
    answered). Counting the slots still reserved, not the workers ever placed, books each
    window once however often the reset is named, and a worker that asks again is not
    counted twice. Counting each window on its own, not the reservations from ``at`` on as
    one line, lets a window short of its quota (its workers went elsewhere, or the slots
    were asks again, all in the window before) be filled before a later one is started.
    """
    start = bisect.bisect_left(reserved, booked_from(s, at))
    booked = len(reserved) - start
    step = None
    if s.window is not None and quota > 0:
        step = s.window
    elif (quota > 0 and s.rolled_at == NEVER and s.first != NEVER and at - s.first > EPSILON
            and s.reset_at is not None and abs(at - s.reset_at) <= EPSILON):
        step = max(at - s.first, spread)  # a lower bound of the window's length
    if step is None:
        return (at if booked < quota else at + max(spread, EPSILON * 2)), booked + 1
    windows = 0
    while True:  # ends: each window passed holds quota > 0 of the finitely many reserved
        end = bisect.bisect_left(reserved, at + (windows + 0.5) * step, start)
        if end - start < quota:
            return at + windows * step, booked + 1
        windows, start = windows + 1, end


def plan_slot(s: Schedule, now: float, gate: GateConfig, pacing: PacingConfig | None,
              in_flight: int = 0, reserved: Sequence[float] = (),
              fail_fast: bool = False, learned_gap: float = 0.0,
              max_wait: float | None = None) -> tuple[float, Schedule]:
    """The slot of a worker that holds none: ``(instant, new schedule)``.

    A worker held by a closed gate or a used-up count waits for the instant they open
    (``at``). When the quota of the window open then is known (:func:`release_quota`), the
    first that many held workers all get ``at`` itself (a release by quota); the next that
    many the window after it once the window's length is known, and so on (else ``at +
    spread``: ask again once the release is answered). ``reserved``: the reserved slots,
    ascending (those a release has booked count, :func:`release_slot`). A holder back for
    its reserved slot (the caller popped it) while the key holds (a gate an answer closed
    names the reset a little later than the slot, or the window's count went to others) is
    booked as any held worker: at ``at`` while that window has room, so it keeps its place
    there, else in the first window after with room (never one already booked full: holders
    crowding one window would all come back at the next). When the quota is unknown, held
    workers get slots ``spread`` apart (or the
    pacing interval, if longer), a release that ends with the last worker held (``herd``):
    newcomers during it queue behind it without prolonging it. A ``fail_fast`` worker (one
    that stops rather than wait past its deadline, and does not come back for its slot) is
    never placed further than ``herd_window`` past the instant the key holds until (now,
    for a newcomer) without a pacing interval, nor past the window's reset with one: beyond,
    it shares the window's slots (:func:`herd_slot`).
    Otherwise slots are the pacing interval apart (never paced past the reset); with
    neither, the slot is now. A
    slot at most :data:`EPSILON` ahead means "go now"; a later one is reserved by the caller.
    ``learned_gap``: the spacing of a rate learned from throttles that named no quota
    (:func:`~retrybudget.coordination._logic.learned_gap`), a pacing interval at the least.
    ``max_wait``: what the caller would wait (None: any), for :func:`probe_waits`.
    """
    if s.first == NEVER and not s.answered:  # the key's first acquire: its probe goes now
        s = evolve(s, first=now)
    gated = now < s.gate
    hold = quota_hold(s, now, pacing, in_flight, gate.spread, probe_waits(fail_fast, max_wait, gate.spread))
    held = gated or hold is not None
    interval = max(pacing_interval(s, now, pacing), learned_gap)
    if held:
        at = max(now, s.gate, NEVER if hold is None else hold)
        if hold is not None and s.reset_at is None:  # waiting for an answer to name the reset
            return at, evolve(s, tail=max(s.tail, at))
        quota = release_quota(s, at)
        if quota is not None:
            slot, count = release_slot(s, at, quota, gate.spread, reserved)
            return slot, evolve(s, tail=max(s.tail, slot), release=at, released=count)
    herding = held or s.herd > now
    spacing = max(interval, gate.spread) if herding else interval
    if spacing <= 0 and not held:
        slot = now
    else:
        paced = s.tail + spacing
        opens = max(now, s.gate, NEVER if hold is None else hold)
        bounded = fail_fast and interval <= 0  # the quota unknown: one herd window at most
        if interval > 0 and s.reset_at is not None and paced > s.reset_at:
            paced = max(s.reset_at, s.tail + gate.spread)  # the window has reset by then
            opens, spacing, bounded = max(opens, s.reset_at), gate.spread, fail_fast
        slot = max(opens, paced)
        if bounded and slot > opens + gate.herd_window:
            slot = herd_slot(opens, spacing, gate.herd_window, reserved)
    return slot, evolve(s, tail=max(s.tail, slot), herd=max(s.herd, slot) if held else s.herd)


def went_now(s: Schedule, now: float, pacing: PacingConfig | None,
             learned_gap: float = 0.0) -> Schedule | None:
    """:func:`plan_slot` then :func:`~retrybudget.coordination._logic.sent` in one step, for
    a request that goes at once on a key past its first window, its quota counted: no gate
    closed, no pacing interval (nor a learned rate's ``learned_gap``), no herd being
    released. The caller has found nothing holds the key (:func:`quota_hold` is None) and no
    reserved slot due. None: another case, which :func:`plan_slot` plans.

    The schedule is the one those two build (its tail now, one less in the window's count),
    built once: what a healthy key's every request does.
    """
    if (pacing is None or not s.answered or s.quota is None or now < s.gate or s.herd > now
            or learned_gap > 0 or pacing_interval(s, now, pacing) > 0):
        return None
    return evolve(s, tail=max(s.tail, now), quota=max(s.quota - 1, 0),
                  used=None if s.used is None else s.used + 1)


def herd_slot(opens: float, spacing: float, herd_window: float,
              reserved: Sequence[float] = ()) -> float:
    """The slot of a ``fail_fast`` worker whose place in a release lies beyond one herd
    window, the key holding until ``opens``: it shares the window's slots, in turn,
    ``spacing`` apart from ``opens`` on, counted by the slots already reserved in the window
    (``reserved``, ascending): its wait is never longer than the provider asked plus
    ``herd_window``, and no one slot takes every such worker."""
    if herd_window <= 0 or spacing <= 0:
        return opens
    booked = (bisect.bisect_right(reserved, opens + herd_window + EPSILON)  # one at its edge too
              - bisect.bisect_left(reserved, opens - EPSILON))
    return opens + math.fmod(booked * spacing, herd_window)
