"""The in-process coordinator: every thread and asyncio task of one process, keyed by provider key.

State lives in plain dictionaries behind one :class:`threading.Lock`, held only for the
arithmetic of :mod:`._logic` (never across I/O, a wait or a call to the events objects), so
the async methods can call the sync ones without blocking the event loop.
"""

from __future__ import annotations

import bisect
import itertools
import math
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .._clock import SYSTEM_CLOCK, Clock, monotonic_reader, wall_reader
from ..core import evolve
from ..core.actions import Admission, Permit
from ..core.decide import declines
from ..core.outcome import Outcome
from ..core.throttle import NO_THROTTLE, Throttle
from ..observe import notify
from ._base import Coordinator
from ._config import BreakerConfig, CoordinationConfig
from ._ledgers import Ledgers
from ._logic import (
    EPSILON,
    FLIGHT_TTL,
    SLICES,
    Health,
    Phase,
    Schedule,
    Verdict,
    admission_of,
    breaker_admit,
    breaker_finish,
    budget_deposit,
    budget_withdraw,
    health,
    learn,
    learned_gap,
    moved,
    paced_interval,
    permit_of,
    plan_slot,
    probe_waits,
    quota_hold,
    rate_cut,
    rebooks,
    rolled,
    send_counted,
    sent,
    still_probing,
    went_now,
    write_wait,
)
from ._memory_key import KeyState
from ._stats import CoordinationStats, Tally
from ._tokens import TokenCall, current_call

__all__ = ["MemoryCoordinator"]


_ADMITTED = Admission()

_ANSWERS = ("handle", "ahandle", "admit", "aadmit", "acquire", "aacquire", "learn", "alearn",
            "finish", "afinish")
"""The methods a first attempt's merged calls answer as (a subclass that overrides one is
asked through :meth:`~retrybudget.coordination.Coordinator.handle`)."""


class MemoryCoordinator(Coordinator):
    """Coordinates the threads and asyncio tasks of one process (the embedded default).

    Args:
        config: what to coordinate (default :class:`CoordinationConfig()`).
        clock: where time comes from; instants are kept on its monotonic clock.
        events: objects told of breaker transitions (``breaker_transition(key, state)``, see
            :class:`~retrybudget.observe.CoordinatorEvents`), a
            :class:`~retrybudget.observe.PrometheusHook` for one. What they raise is logged
            and ignored.
        share: the quotas it learns are its share of ones other workers spend too (the
            fallback of a shared coordinator): its own count of a window's requests is never
            lowered by what the provider says is left (see
            :func:`~retrybudget.coordination._logic.window_used`).

    Safe to share between threads and event loops; never blocks for longer than a few
    dictionary operations.
    """

    def __init__(self, config: CoordinationConfig | None = None, *,
                 clock: Clock = SYSTEM_CLOCK, events: Sequence[object] = (),
                 share: bool = False) -> None:
        self.config = config or CoordinationConfig()
        self.share = share
        self.clock = clock  # its readers too (the system clock's own functions): read per call
        self.events = tuple(events)
        self._lock = threading.Lock()
        self._keys: dict[str, KeyState] = {}
        self._ids = itertools.count(1)
        self._tally = Tally()

    def __repr__(self) -> str:
        return f"MemoryCoordinator(keys={len(self._keys)})"

    @property
    def clock(self) -> Clock:
        """Where time comes from."""
        return self._clock

    @clock.setter
    def clock(self, clock: Clock) -> None:
        self._clock = clock
        self._now = monotonic_reader(clock)
        self._wall = wall_reader(clock)

    def _key(self, key: str) -> KeyState:
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = KeyState()
        return state

    def admit(self, key: str) -> Admission:
        """The breaker: admit, admit as the one half-open probe, or refuse until ``retry_at``."""
        cfg = self.config.breaker
        if cfg is None:
            return self._tally.admission(Admission())
        with self._lock:
            verdict, state = self._admitted(self._key(key), self._now(), cfg)
        self._moved(key, state)
        wall = 0.0 if verdict.allowed else self._wall()  # read for a refusal's retry_at only
        return self._tally.admission(admission_of(verdict, wall))

    @staticmethod
    def _admitted(k: KeyState, now: float, cfg: BreakerConfig) -> tuple[Verdict, str | None]:
        """:meth:`admit`'s verdict at ``now`` and the state the breaker entered (lock held)."""
        before = k.breaker
        verdict, k.breaker = breaker_admit(before, now, cfg)
        return verdict, moved(before, k.breaker)

    patient = True

    def acquire(self, key: str, attempt: int, write_gap: float = 0.0, *,
                max_wait: float | None = None, fail_fast: bool = False) -> Permit:
        """The concurrency cap, the write spacing, then a slot: claim a reserved one that is
        due, or plan one. A slot the caller would not wait for (``max_wait``, ``fail_fast``:
        :func:`~retrybudget.core.decide.declines`) is not reserved: its wait is answered and
        nothing changes.

        A request that goes holds a lease (it is in flight until :meth:`learn`) when there is a
        concurrency cap or pacing, which counts the requests in flight against the quota. A
        write with a ``write_gap`` waits until that long after the key's latest write went
        (:func:`~retrybudget.coordination._logic.write_wait`).
        """
        with self._lock:
            return self._acquired(self._key(key), self._now(), write_gap, max_wait, fail_fast)

    def _acquired(self, k: KeyState, now: float, write_gap: float, max_wait: float | None,
                  fail_fast: bool) -> Permit:
        """:meth:`acquire`'s answer for key state ``k`` at ``now`` (the lock held)."""
        cfg = self.config
        cap, pacing = cfg.concurrency, cfg.pacing
        in_flight = k.in_flight(now)
        if cap is not None and in_flight >= cap.limit:
            return self._tally.permit(permit_of("busy", cap.poll, 0.0, None, 0.0))
        tokens = current_call()
        if tokens is not None:  # its token quotas first: a request they hold reserves nothing
            if k.tokens is None:
                k.tokens = Ledgers(self._lock, lambda: self._now())  # noqa: PLW0108 - the clock may change
            until = k.tokens.hold(now, tokens.charge, cfg.gate.spread, k.leases)
            if until is not None:
                return self._tally.permit(permit_of("pace", until - now, 0.0, None, 0.0))
        spacing = write_wait(k.last_write, now, write_gap)
        if spacing > 0:
            return self._tally.permit(permit_of("pace", spacing, 0.0, None, 0.0))
        k.schedule = rolled(k.schedule, now, in_flight)
        slots = k.slots
        while slots and slots[0] < now - cfg.gate.claim_grace:
            slots.popleft()  # lapsed: its holder stopped or died
        hold = quota_hold(k.schedule, now, pacing, in_flight, cfg.gate.spread,
                          waits=probe_waits(fail_fast, max_wait, cfg.gate.spread))
        due = bool(slots) and slots[0] <= now + EPSILON
        # the learned rate spaces callers that wait; a fail-fast one is refused only by what
        # the provider said (its gate, its quota), never by an inferred rate
        gap = (0.0 if pacing is None or fail_fast
               else learned_gap(k.learned, max(now, k.schedule.tail)))
        went = None if due or hold is not None else went_now(k.schedule, now, pacing, gap)
        if went is not None:
            k.schedule = went  # planned now and sent: a healthy key's request
        elif now >= k.schedule.gate and due and hold is None:
            slots.popleft()
        else:
            waits = self._planned(k, now, in_flight, hold, due, gap, (max_wait, fail_fast))
            if waits is not None:
                return self._tally.permit(waits)
        return self._sent(k, now, write_gap, tokens, went is not None)

    def _sent(self, k: KeyState, now: float, write_gap: float, tokens: TokenCall | None,
              counted: bool) -> Permit:
        """The request goes now: what it is counted as, and its lease (the lock held;
        ``counted``: its schedule counts it already, :func:`~._logic.went_now`)."""
        cap, pacing = self.config.concurrency, self.config.pacing
        lease = None
        if write_gap > 0:
            k.last_write = now
        if pacing is not None:
            if not counted:
                k.schedule = sent(k.schedule, now)
            k.learned = send_counted(k.learned, now)
        if cap is not None or pacing is not None or tokens is not None:
            lease = f"m:{next(self._ids)}"
            k.leases[lease] = now + (FLIGHT_TTL if cap is None else cap.lease_ttl)
            if tokens is not None and k.tokens is not None:
                k.tokens.charged(lease, tokens.charge)
                tokens.sent()
        return permit_of("go", 0.0, 0.0, lease, 0.0)

    def _planned(self, k: KeyState, now: float, in_flight: int, hold: float | None, due: bool,
                 gap: float, patience: tuple[float | None, bool]) -> Permit | None:
        """A slot planned for a request under key state ``k`` (``hold``: the instant a used-up
        count holds it until; ``due``: a reserved slot is due, claimed back here; ``gap``: the
        learned rate's spacing; ``patience``: the caller's ``max_wait`` and ``fail_fast``): the
        permit to wait with, the slot reserved unless the caller declines it, or None when it
        goes now (its schedule planned). The lock held."""
        cfg = self.config
        slots = k.slots
        gate = k.schedule.gate
        max_wait, fail_fast = patience
        claimed = slots.popleft() if due else None  # its holder came back: booked again
        slot, planned = plan_slot(k.schedule, now, cfg.gate, cfg.pacing, in_flight, slots,
                                  fail_fast, gap, max_wait)
        if slot <= now + EPSILON:
            k.schedule = planned
            return None
        code = "gate" if now < gate else "pace"
        reset_in = None if hold is None or planned.reset_at is None else hold - now
        permit = permit_of(code, slot - now, gate - now, None, self._wall(), reset_in)
        if declines(slot - now, code == "gate", max_wait, fail_fast):
            if claimed is not None:
                slots.appendleft(claimed)  # not its to give up: still reserved
            return permit  # it stops: nothing reserved
        k.schedule = planned
        if slots and slot < slots[-1]:
            bisect.insort(slots, slot)  # a release by quota before later slots
        else:
            slots.append(slot)
        return permit

    def pace_write(self, key: str, gap: float) -> float:
        """The write spacing alone: seconds this write waits (0: it goes now, recorded as the
        key's latest write). What a shared backend answers with when it cannot reach its
        store."""
        with self._lock:
            now = self._now()
            k = self._key(key)
            wait = write_wait(k.last_write, now, gap)
            if wait <= 0 and gap > 0:
                k.last_write = now
            return wait

    def learn(self, key: str, throttle: Throttle | None, lease: str | None) -> None:
        """Give back the lease; close the gate on throttling; remember the quota for pacing."""
        facts = NO_THROTTLE if throttle is None else throttle
        if lease is None and not facts.informative and (
                throttle is None or self.config.pacing is None):
            return  # nothing to give back or to record (an answer ends a first window)
        with self._lock:
            self._learned(self._key(key), facts, throttle, lease, None)

    def _learned(self, k: KeyState, facts: Throttle, throttle: Throttle | None,
                 lease: str | None, now: float | None) -> None:
        """:meth:`learn` for key state ``k`` (the lock held; ``now``: the clock read already,
        None: read it when needed)."""
        answered = 0 if lease is None or k.leases.pop(lease, None) is None else 1
        tokens = current_call() if lease is not None and k.tokens is not None else None
        if tokens is not None and k.tokens is not None and lease in k.tokens.charges:
            assert lease is not None  # noqa: S101 - its charge is kept by its lease
            k.tokens.learned(lease, tokens, self._now(), self._wall(), k.leases)
            if throttle is not None:
                facts = throttle = tokens.requests_throttle(throttle)
        if facts.informative or (throttle is not None and not k.schedule.answered):
            now = self._now() if now is None else now
            in_flight = k.unanswered(now)
            k.schedule = learn(k.schedule, facts, now, self.config.gate, in_flight, answered,
                               self.share)
            if facts.throttled and facts.remaining is None:
                cut = rate_cut(k.learned, now)  # no quota named: a rate is learned
                if rebooks(k.learned, cut):  # every slot asks again, spaced from the gate
                    k.slots.clear()
                    k.schedule = evolve(k.schedule, tail=min(k.schedule.tail, k.schedule.gate))
                k.learned = cut
            while k.slots and k.slots[0] < k.schedule.gate - EPSILON:
                k.slots.popleft()  # reserved before the gate moved: ask again

    def schedule(self, key: str) -> Schedule | None:
        """``key``'s gate and window count as they stand now (a window whose reset has passed
        has rolled over); None: nothing known of it."""
        with self._lock:
            k = self._keys.get(key)
            if k is None:
                return None
            now = self._now()
            k.schedule = rolled(k.schedule, now, k.in_flight(now))
            return k.schedule

    def hold(self, key: str, seconds: float) -> None:
        """Close ``key``'s gate for at least ``seconds`` (a gate learned elsewhere)."""
        self.learn(key, Throttle(throttled=True, hint=max(0.0, seconds)), None)

    def spend_retry(self, key: str) -> bool:
        """Take one retry from the key's retry budget (False: refused)."""
        cfg = self.config.retry_budget
        if cfg is None:
            return self._tally.retry(True)
        with self._lock:
            k = self._key(key)
            allowed, k.budget = budget_withdraw(k.budget, self._now(), cfg)
        return self._tally.retry(allowed)

    def finish(self, key: str, outcome: Outcome[Any], probe: bool) -> None:
        """Record one logical operation in the key's breaker; a healthy one earns retries."""
        cfg, budget = self.config.breaker, self.config.retry_budget
        verdict = health(outcome)
        earns = budget is not None and verdict is Health.SUCCESS
        if cfg is None and not earns:
            return
        with self._lock:
            opened, state = self._finished(self._key(key), verdict, earns, probe, self._now())
        if opened:
            self._tally.add("breaker_opened")
        self._moved(key, state)

    def _finished(self, k: KeyState, verdict: Health, earns: bool, probe: bool,
                  now: float) -> tuple[bool, str | None]:
        """:meth:`finish` for key state ``k`` at ``now`` (the lock held): whether the breaker
        opened, and the state it entered."""
        cfg, budget = self.config.breaker, self.config.retry_budget
        opened, state = False, None
        if earns and budget is not None and not k.deposit(math.floor(now * SLICES / budget.ttl)):
            k.budget = budget_deposit(k.budget, now, budget)
        if cfg is not None:
            before = k.breaker
            k.breaker, opened = breaker_finish(before, verdict, probe, now, cfg)
            state = None if k.breaker is before else moved(before, k.breaker)
        return opened, state

    def _first_calls(self) -> tuple[Callable[..., tuple[Admission, Permit | None]],
                                    Callable[..., None]] | None:
        """The two calls a coordinated first attempt is answered by (:meth:`_first_gate`,
        :meth:`_first_done`), or None when a subclass answers any of the flow's actions its own
        way (a driver then hands each action to :meth:`handle`)."""
        kind = type(self)
        if any(getattr(kind, name) is not getattr(MemoryCoordinator, name)
               for name in _ANSWERS):
            return None
        return self._first_gate, self._first_done

    def _first_gate(self, key: str, bucket: str, write_gap: float, max_wait: float | None,
                    fail_fast: bool) -> tuple[Admission, Permit | None]:
        """``admit(key)`` and, when it admits, ``acquire(bucket, 1, write_gap, max_wait=...,
        fail_fast=...)`` in one call (one lock, one clock reading): their answers (the permit
        None when the admission refuses). A closed breaker and a healthy bucket
        (:meth:`_healthy`) are answered in a few steps; anything else as the two calls are."""
        cfg = self.config.breaker
        state = None
        with self._lock:
            now = self._now()
            keys = self._keys
            k = keys.get(key)
            if k is not None and (cfg is None or k.breaker.phase is Phase.CLOSED):
                permit = self._healthy(k if bucket == key else self._key(bucket), now,
                                       write_gap, fail_fast)
                if permit is not None:
                    self._tally.add("admitted")
                    return _ADMITTED, permit
            tally = self._tally
            if cfg is None:
                admission = tally.admission(_ADMITTED)
            else:
                k = self._key(key)
                verdict, state = self._admitted(k, now, cfg)
                wall = 0.0 if verdict.allowed else self._wall()  # a refusal's retry_at only
                admission = tally.admission(admission_of(verdict, wall))
            permit = None
            if admission.allowed:
                permit = self._acquired(self._key(bucket), now, write_gap, max_wait, fail_fast)
        self._moved(key, state)
        return admission, permit

    def _healthy(self, k: KeyState, now: float, write_gap: float, fail_fast: bool) -> Permit | None:
        """:meth:`_acquired`'s answer for a healthy key, or None (another case, which it
        answers): a read (no write gap), no token cost, past its first window, its window's
        count not used up (or not counted), nothing holding, paced or reserved (no gate
        closed, no herd being released, no slot reserved, no rate learned, its quota not
        running low, not probed for its unknown limit), room under the cap. Such a request
        goes now (planned at once, as :func:`~._logic.went_now` and :func:`~._logic.plan_slot`
        plan it), counted once, holding a lease. The lock held."""
        s = k._schedule  # its counters are k's own (KeyState)
        quota, reset_at = k.quota, k.reset_at
        cfg = self.config
        pacing = cfg.pacing
        if (write_gap > 0 or pacing is None or not s.answered or (quota is not None and quota <= 0)
                or k.slots or now < s.gate or s.herd > now
                or (reset_at is not None and now + EPSILON >= reset_at)
                or (not fail_fast and k._learned.peak is not None)
                or paced_interval(k.remaining, s.limit, reset_at, now, pacing) > 0
                or current_call() is not None
                or (pacing.probe_unknown_limit and still_probing(s, now))):
            return None
        cap = cfg.concurrency
        leases = k.leases
        if leases and next(iter(leases.values())) <= now:
            k.in_flight(now)  # the lapsed leases dropped, as _acquired drops them
        if cap is not None and len(leases) >= cap.limit:
            return None
        k.drift = True  # planned at once and counted: its tail, and its count when counted
        k.tail = max(k.tail, now)
        if quota is not None:
            k.quota = quota - 1
            used = k.used
            if used is not None:
                k.used = used + 1
        if not k.send_counted(now):
            k.learned = send_counted(k.learned, now)
        lease = f"m:{next(self._ids)}"
        leases[lease] = now + (FLIGHT_TTL if cap is None else cap.lease_ttl)
        return Permit(lease=lease)

    def _first_done(self, bucket: str, throttle: Throttle | None, lease: str | None, key: str,
                    outcome: Outcome[Any], probe: bool) -> None:
        """``learn(bucket, throttle, lease)`` then ``finish(key, outcome, probe)`` in one call
        (one lock, one clock reading)."""
        facts = NO_THROTTLE if throttle is None else throttle
        learns = lease is not None or facts.informative or (
            throttle is not None and self.config.pacing is not None)
        cfg, budget = self.config.breaker, self.config.retry_budget
        verdict = health(outcome)
        earns = budget is not None and verdict is Health.SUCCESS
        finishes = cfg is not None or earns
        if not (learns or finishes):
            return
        opened, state = False, None
        with self._lock:
            now = self._now()
            keys = self._keys
            if learns:
                k = keys.get(bucket) or self._key(bucket)
                if lease is None or k.tokens is not None or not k.count_answer(
                        facts, lease, now, self.share):
                    self._learned(k, facts, throttle, lease, now)
            if finishes:
                opened, state = self._finished(keys.get(key) or self._key(key), verdict, earns,
                                               probe, now)
        if opened:
            self._tally.add("breaker_opened")
        if state is not None:
            self._moved(key, state)

    def _moved(self, key: str, state: str | None) -> None:
        """Tell the events objects the breaker entered ``state`` (outside the lock)."""
        if state is not None and self.events:
            notify(self.events, "breaker_transition", key, state)

    def stats(self) -> CoordinationStats:
        """What this coordinator has answered so far."""
        return self._tally.snapshot()
