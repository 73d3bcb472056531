"""The coordination arithmetic, pure: the gate instant, slots and pacing, the retry budget
and the breaker's state machine.

Time comes in as an argument (seconds on one clock: the process's monotonic clock for the
memory backend, Redis server ``TIME`` for the Redis backend); state comes in and goes out as
frozen values. :class:`~retrybudget.coordination.MemoryCoordinator` calls these functions
under its lock. The Redis Lua scripts (``lua/*.lua``) must be atomic inside Redis, so they
implement the same steps again; each Lua function names the function here that it mirrors,
and one behavioural test suite runs against both backends. docs/coordination.md describes
the algorithms in prose.
"""

from __future__ import annotations

import bisect
import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core import evolve, fast_init
from ..core.actions import Admission, Permit
from ..core.classify import Kind
from ..core.outcome import Outcome, Reason, WaitReason
from ..core.throttle import Throttle
from ._config import BreakerConfig, GateConfig, PacingConfig, RetryBudgetConfig

__all__ = [
    "EPSILON",
    "FLIGHT_TTL",
    "NEVER",
    "SLICES",
    "Breaker",
    "Budget",
    "Health",
    "Phase",
    "Schedule",
    "Verdict",
    "admission_of",
    "breaker_admit",
    "breaker_finish",
    "budget_deposit",
    "budget_withdraw",
    "gate_delay",
    "health",
    "herd_slot",
    "learn",
    "moved",
    "pacing_interval",
    "permit_of",
    "plan_slot",
    "quota_hold",
    "booked_from",
    "release_quota",
    "release_slot",
    "rolled",
    "sent",
    "window_used",
    "write_wait",
]

EPSILON = 0.001
"""Seconds of tolerance: a slot this close to now is now (rounding and clock granularity)."""

SLICES = 10
"""The retry budget's window is counted in this many slices."""

NEVER = -math.inf
"""An instant that has always passed (an absent gate, tail or deadline)."""

FLIGHT_TTL = 60.0
"""Seconds an attempt that went counts as in flight when no concurrency cap sets ``lease_ttl``
(a holder that died stops counting after this long)."""

_NEUTRAL_REASONS = frozenset({Reason.CIRCUIT_OPEN, Reason.RETRY_BUDGET, Reason.NOT_RETRIED})


# What an outcome says about the provider's health -------------------------------------


class Health(str, enum.Enum):
    """What one finished operation tells the breaker."""

    SUCCESS = "success"
    FAILURE = "failure"
    NEUTRAL = "neutral"


def health(outcome: Outcome[Any]) -> Health:
    """Classify a finished operation for the breaker.

    A failure is an outcome whose reason is a provider-health failure (exhausted, deadline,
    unexpected: :attr:`Reason.is_provider_failure`), or an operation the shared retry budget
    cut short right after a transient failure (a 503, a timeout): in an outage the budget
    runs dry first, and those operations are the outage's failed operations. Operations that
    never reached the provider (0 attempts), breaker refusals, and operations cut short by
    our own rules otherwise (a retry budget refusal after anything else, a write not
    replayed) say nothing either way. Everything else (ok, not_found, rejected, rate_limited,
    invalid_payload) shows a provider that answers.
    """
    if outcome.reason.is_provider_failure and outcome.attempts > 0:
        return Health.FAILURE
    if (outcome.reason is Reason.RETRY_BUDGET and outcome.history
            and outcome.history[-1].kind is Kind.TRANSIENT):
        return Health.FAILURE
    if outcome.attempts == 0 or outcome.reason in _NEUTRAL_REASONS:
        return Health.NEUTRAL
    return Health.SUCCESS


# The gate, slots and pacing ---------------------------------------------------------------


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
        first: the instant of the key's first acquire (its first request, the probe, went
            then), kept when the first answer names a quota window: until a window has
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
    (``answered``).
    """
    remaining, limit = throttle.remaining, throttle.limit
    # the quota window the response names (learn.lua's `observed`): its reset, else None
    named = throttle.reset if remaining is not None and (throttle.reset or 0) > 0 else None
    if not s.answered:  # a first answer that names no quota window: `first` bounds none
        s = evolve(s, answered=True, first=s.first if named is not None else NEVER)
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


def sent(s: Schedule) -> Schedule:
    """A key's schedule after a request went: one less in the window's count."""
    if s.quota is None:
        return s
    return evolve(s, quota=max(s.quota - 1, 0), used=None if s.used is None else s.used + 1)


def quota_hold(s: Schedule, now: float, pacing: PacingConfig | None, in_flight: int = 0,
               spread: float = 0.0) -> float | None:
    """When the counted quota is used up: the instant it resets, else None.

    Requests beyond what the window allows wait for the reset and are released by quota
    there. The gate itself does not move: a later response can still correct the count.
    A count used up in a window whose reset no response has named yet (just rolled) holds
    for ``spread`` while requests are in flight: their answers will name it. So does a key
    in its first window (no answer yet, nothing counted) once ``pacing.probes`` requests are
    in flight: the first answer names the quota, and the rest are released by it.
    """
    if pacing is None:
        return None
    if (not s.answered and s.quota is None and s.limit is None and pacing.probes > 0
            and in_flight >= pacing.probes):
        return now + spread if spread > 0 else None
    if s.quota is None or s.quota > 0:
        return None
    if s.reset_at is None:
        return now + spread if in_flight > 0 and spread > 0 else None
    return s.reset_at if now < s.reset_at else None


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


def pacing_interval(s: Schedule, now: float, pacing: PacingConfig | None) -> float:
    """Seconds between requests while the quota runs low, else 0.

    Pacing applies until the observed reset, while ``remaining`` is at or below
    ``threshold * limit`` (or ``min_remaining`` when the limit is unknown); it spreads what is
    left over the time to reset: ``(reset_at - now) / max(remaining, 1)``.
    """
    if pacing is None or s.remaining is None or s.reset_at is None or now >= s.reset_at:
        return 0.0
    if s.limit is not None and s.limit > 0:
        low = s.remaining <= pacing.threshold * s.limit
    else:
        low = s.remaining <= pacing.min_remaining
    if not low:
        return 0.0
    return (s.reset_at - now) / max(s.remaining, 1)


def plan_slot(s: Schedule, now: float, gate: GateConfig, pacing: PacingConfig | None,
              in_flight: int = 0, reserved: Sequence[float] = (),
              fail_fast: bool = False) -> tuple[float, Schedule]:
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
    workers get slots
    ``spread`` apart (or the
    pacing interval, if longer), a release that ends with the last worker held (``herd``):
    newcomers during it queue behind it without prolonging it. A ``fail_fast`` worker (one
    that stops rather than wait past its deadline, and does not come back for its slot) is
    never placed further than ``herd_window`` past the instant the key holds until (now,
    for a newcomer) without a pacing interval, nor past the window's reset with one: beyond,
    it shares the window's slots (:func:`herd_slot`).
    Otherwise slots are the pacing interval apart (never paced past the reset); with
    neither, the slot is now. A
    slot at most :data:`EPSILON` ahead means "go now"; a later one is reserved by the caller.
    """
    if s.first == NEVER and not s.answered:  # the key's first acquire: its probe goes now
        s = evolve(s, first=now)
    gated = now < s.gate
    hold = quota_hold(s, now, pacing, in_flight, gate.spread)
    held = gated or hold is not None
    interval = pacing_interval(s, now, pacing)
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


def herd_slot(opens: float, spacing: float, herd_window: float,
              reserved: Sequence[float] = ()) -> float:
    """The slot of a ``fail_fast`` worker whose place in a release lies beyond one herd
    window, the key holding until ``opens``: it shares the window's slots, in turn,
    ``spacing`` apart from ``opens`` on, counted by the slots already reserved in the window
    (``reserved``, ascending): its wait is never longer than the provider asked plus
    ``herd_window``, and no one slot takes every such worker."""
    if herd_window <= 0 or spacing <= 0:
        return opens
    booked = (bisect.bisect_right(reserved, opens + herd_window)
              - bisect.bisect_left(reserved, opens - EPSILON))
    return opens + math.fmod(booked * spacing, herd_window)


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


# The retry budget -------------------------------------------------------------------------


@fast_init
@dataclass(frozen=True, slots=True)
class Budget:
    """One key's retry budget: ``(slice, healthy operations, retries)`` per live slice."""

    slices: tuple[tuple[int, int, int], ...] = ()


def _live(b: Budget, now: float, cfg: RetryBudgetConfig) -> tuple[int, list[tuple[int, int, int]]]:
    current = math.floor(now * SLICES / cfg.ttl)
    return current, [sl for sl in b.slices if current - SLICES < sl[0] <= current]


def _add(slices: list[tuple[int, int, int]], current: int, deposits: int,
         withdrawals: int) -> Budget:
    if slices and slices[-1][0] == current:
        _, d, w = slices.pop()
        slices.append((current, d + deposits, w + withdrawals))
    else:
        slices.append((current, deposits, withdrawals))
    return Budget(tuple(slices))


def budget_deposit(b: Budget, now: float, cfg: RetryBudgetConfig) -> Budget:
    """The budget after an operation ended with the provider answering (it deposits
    ``ratio`` of a retry)."""
    current, slices = _live(b, now, cfg)
    return _add(slices, current, 1, 0)


def budget_withdraw(b: Budget, now: float, cfg: RetryBudgetConfig) -> tuple[bool, Budget]:
    """Take one retry if the balance allows: ``(allowed, new budget)``.

    The balance over the window (the last ``ttl`` seconds, counted in :data:`SLICES` slices)
    is ``min_retries_per_sec * ttl + ratio * healthy_operations - retries``; a retry needs 1.
    """
    current, slices = _live(b, now, cfg)
    deposits = sum(sl[1] for sl in slices)
    withdrawals = sum(sl[2] for sl in slices)
    balance = cfg.min_retries_per_sec * cfg.ttl + cfg.ratio * deposits - withdrawals
    if balance < 1.0 - 1e-9:
        return False, Budget(tuple(slices))
    return True, _add(slices, current, 0, 1)


# The breaker ------------------------------------------------------------------------------


class Phase(str, enum.Enum):
    """The breaker's state."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"

    def __str__(self) -> str:
        return self.value


@fast_init
@dataclass(frozen=True, slots=True)
class Breaker:
    """One key's breaker.

    Attributes:
        phase: closed, open or half-open.
        failures: failed operations in a row (closed).
        history: the last counted operations, oldest first: ``"1"`` failed, ``"0"`` not.
        open_until: when an open breaker admits a probe.
        probe_until: when the probe out (half-open) lapses; NEVER when none is out.
    """

    phase: Phase = Phase.CLOSED
    failures: int = 0
    history: str = ""
    open_until: float = NEVER
    probe_until: float = NEVER


@fast_init
@dataclass(frozen=True, slots=True)
class Verdict:
    """The breaker's answer to one operation: go (perhaps as the probe), or not for a while."""

    allowed: bool
    probe: bool = False
    retry_in: float | None = None


def breaker_admit(b: Breaker, now: float, cfg: BreakerConfig) -> tuple[Verdict, Breaker]:
    """Admit an operation or refuse it.

    Closed admits. Open refuses until ``open_until``, then turns half-open. Half-open admits
    exactly one probe (until ``probe_until``) and refuses everyone else meanwhile.
    """
    if b.phase is Phase.CLOSED:
        return Verdict(True), b
    if b.phase is Phase.OPEN:
        if now < b.open_until:
            return Verdict(False, retry_in=b.open_until - now), b
        b = evolve(b, phase=Phase.HALF_OPEN, probe_until=NEVER)
    if now < b.probe_until:
        return Verdict(False, retry_in=b.probe_until - now), b
    return Verdict(True, probe=True), evolve(b, probe_until=now + cfg.probe_ttl)


def _trips(failures: int, history: str, cfg: BreakerConfig) -> bool:
    if failures >= cfg.consecutive_failures:
        return True
    if cfg.failure_ratio is None or len(history) < cfg.min_operations:
        return False
    return history.count("1") >= cfg.failure_ratio * len(history)


def _opened(now: float, cfg: BreakerConfig) -> Breaker:
    return Breaker(Phase.OPEN, open_until=now + cfg.cool_down)


def breaker_finish(b: Breaker, verdict: Health, probe: bool, now: float,
                   cfg: BreakerConfig) -> tuple[Breaker, bool]:
    """The breaker after an operation ended: ``(new breaker, whether it just opened)``.

    The probe's outcome decides a half-open breaker: success closes it, failure opens it for
    another cool-down, a neutral outcome frees the probe for the next caller. Closed, each
    counted operation is recorded and may trip the breaker. Other finishes (operations
    admitted before the breaker opened) are ignored.
    """
    if probe and b.phase is Phase.HALF_OPEN:
        if verdict is Health.SUCCESS:
            return Breaker(), False
        if verdict is Health.FAILURE:
            return _opened(now, cfg), True
        return evolve(b, probe_until=NEVER), False
    if b.phase is not Phase.CLOSED or verdict is Health.NEUTRAL:
        return b, False
    failed = verdict is Health.FAILURE
    failures = b.failures + 1 if failed else 0
    history = (b.history + ("1" if failed else "0"))[-cfg.window:]
    if _trips(failures, history, cfg):
        return _opened(now, cfg), True
    return evolve(b, failures=failures, history=history), False


def moved(before: Breaker, after: Breaker) -> str | None:
    """The state a breaker entered between ``before`` and ``after``; None if it stayed put.

    What a coordinator reports as a breaker transition: closed to open, open to half-open
    (when the probe is admitted), half-open to closed or open (when the probe finishes).
    """
    return None if before.phase is after.phase else after.phase.value


# Answers, as the flow expects them ----------------------------------------------------------


def admission_of(verdict: Verdict, wall: float) -> Admission:
    """The breaker's verdict as an :class:`Admission` (``retry_at`` on the caller's wall clock)."""
    if verdict.allowed:
        return Admission(probe=verdict.probe)
    retry_at = None if verdict.retry_in is None else wall + verdict.retry_in
    return Admission(False, retry_at=retry_at, detail="circuit open")


def permit_of(code: str, wait: float, gate_in: float, lease: str | None, wall: float,
              reset_in: float | None = None) -> Permit:
    """An acquire answer as a :class:`Permit`.

    ``code`` is ``"go"`` (send now, holding ``lease`` if any), ``"gate"`` (wait for a slot
    behind a closed gate that opens in ``gate_in`` seconds), ``"pace"`` (wait for a slot;
    ``reset_in``: seconds until the window resets, when its used-up count holds the wait) or
    ``"busy"`` (the concurrency cap is reached). Waits are relative; ``retry_at`` is put on the
    caller's wall clock, so clocks that disagree still wait for the same instant. Behind a
    closed gate whose window count is also used up, ``retry_at`` is the later of the two.
    """
    if code == "gate":
        opens_in = max(gate_in, 0.0 if reset_in is None else reset_in)
        return Permit(wait, WaitReason.GATE, retry_at=wall + max(opens_in, 0.0))
    if code == "pace":
        retry_at = None if reset_in is None else wall + max(reset_in, 0.0)
        return Permit(wait, WaitReason.PACING, retry_at=retry_at)
    if code == "busy":
        return Permit(wait, WaitReason.CONCURRENCY)
    return Permit(lease=lease or None)
