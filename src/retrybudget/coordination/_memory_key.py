"""One provider key's state in the in-process coordinator, with a healthy key's counters kept
as plain attributes.

A healthy key's request (:meth:`MemoryCoordinator._healthy`) and the 2xx that answers it
(:meth:`KeyState.count_answer`) change a few numbers of the key's :class:`Schedule`,
:class:`Learned` and :class:`Budget`; building three frozen values per request for that
costs more than the rest of the coordinator's work. Those numbers are kept here as plain
attributes under the coordinator's lock, and the frozen values are built from them only when
something reads ``schedule``, ``learned`` or ``budget``: the same values the pure functions of
:mod:`._logic` would have built step by step.
"""

from __future__ import annotations

from collections import deque

from ..core import evolve
from ..core.throttle import Throttle
from ._ledgers import Ledgers
from ._logic import (
    EPSILON,
    NEVER,
    SLICES,
    SPAN,
    Breaker,
    Budget,
    Learned,
    Schedule,
    budget_deposited,
    window_used,
)

__all__ = ["KeyState"]


class KeyState:
    """One provider key's state (the coordinator's lock held for every read and write).

    ``schedule``, ``learned`` and ``budget`` read and write frozen values. Underneath, the
    schedule's ``tail``, ``quota``, ``used``, ``remaining`` and ``reset_at`` are attributes of
    their own (``drift``: they differ from ``_schedule``'s), the sends counted in the learned
    rate's current bucket since ``_learned`` was built are ``sends``, and the operations
    deposited in the budget's latest slice since ``_budget`` was built are ``deposits``.
    """

    __slots__ = ("_budget", "_learned", "_schedule", "breaker", "deposits", "drift",
                 "last_write", "leases", "quota", "remaining", "reset_at", "sends", "slots",
                 "tail", "tokens", "used")

    _schedule: Schedule
    _learned: Learned
    _budget: Budget
    drift: bool
    tail: float
    quota: int | None
    used: int | None
    remaining: int | None
    reset_at: float | None
    sends: int
    deposits: int

    def __init__(self) -> None:
        self.schedule = Schedule()
        self.slots: deque[float] = deque()  # reserved slot instants, ascending
        self.leases: dict[str, float] = {}  # lease -> expiry, in expiry order (requests in flight)
        self.breaker = Breaker()
        self.budget = Budget()
        self.last_write = NEVER  # when the latest write (paced by its profile) went
        self.learned = Learned()  # the send rate learned from throttles naming no quota
        self.tokens: Ledgers | None = None  # its token quotas, once a request charged them

    @property
    def schedule(self) -> Schedule:
        """The key's gate and window count (built from the counters when they moved)."""
        if self.drift:
            self._schedule = evolve(self._schedule, tail=self.tail, quota=self.quota,
                                    used=self.used, remaining=self.remaining,
                                    reset_at=self.reset_at)
            self.drift = False
        return self._schedule

    @schedule.setter
    def schedule(self, s: Schedule) -> None:
        self._schedule = s
        self.drift = False
        self.tail, self.quota, self.used = s.tail, s.quota, s.used
        self.remaining, self.reset_at = s.remaining, s.reset_at

    @property
    def learned(self) -> Learned:
        """The key's learned send rate (its current bucket's count built when it moved)."""
        if self.sends:
            self._learned = evolve(self._learned, sent=self._learned.sent + self.sends)
            self.sends = 0
        return self._learned

    @learned.setter
    def learned(self, learned: Learned) -> None:
        self._learned = learned
        self.sends = 0

    @property
    def budget(self) -> Budget:
        """The key's retry budget (its latest slice's deposits built when they moved)."""
        if self.deposits:
            self._budget = budget_deposited(self._budget, self.deposits)
            self.deposits = 0
        return self._budget

    @budget.setter
    def budget(self, budget: Budget) -> None:
        self._budget = budget
        self.deposits = 0

    def send_counted(self, now: float) -> bool:
        """Count a request that went at ``now`` in the learned rate's current bucket, as
        :func:`~._logic.send_counted` does inside it; False: ``now`` is past the bucket (the
        caller counts it with that function)."""
        if now - self._learned.since >= SPAN:
            return False
        self.sends += 1
        return True

    def deposit(self, current: int) -> bool:
        """Deposit a healthy operation in the budget's latest slice when that slice is
        ``current`` and every slice is live (:func:`~._logic.budget_deposit`'s count in
        place); False: the caller deposits it with that function."""
        slices = self._budget.slices
        if not slices or slices[-1][0] != current or slices[0][0] <= current - SLICES:
            return False
        self.deposits += 1
        return True

    def in_flight(self, now: float) -> int:
        """Live leases (requests in flight), after dropping the expired ones.

        Every lease lives equally long, so insertion order is expiry order.
        """
        leases = self.leases
        while leases:
            lease, expiry = next(iter(leases.items()))
            if expiry > now:
                break
            del leases[lease]
        return len(leases)

    def unanswered(self, now: float) -> int:
        """:meth:`in_flight`, the lapsed leases dropped only when the oldest has lapsed."""
        leases = self.leases
        return (self.in_flight(now) if leases and next(iter(leases.values())) <= now
                else len(leases))

    def count_answer(self, facts: Throttle, lease: str, now: float, share: bool) -> bool:
        """:meth:`MemoryCoordinator.learn` of a 2xx that only moves the counters of
        :func:`~._logic.learn` (a key answered before, in its counted window, named again
        within 1 s, the earlier naming kept and the window's length not learned anew, its
        limit unchanged): its lease given back, its ``remaining`` and count learned. False:
        another case, nothing changed (the caller learns it with that function)."""
        remaining, limit, named = facts.remaining, facts.limit, facts.reset
        s = self._schedule
        reset_at = self.reset_at
        if (facts.throttled or remaining is None or named is None or named <= 0
                or not s.answered or reset_at is None or now + EPSILON >= reset_at
                or limit is None or limit < remaining or limit != s.limit):
            return False
        named_at = now + named
        if abs(named_at - reset_at) >= 1.0:
            return False  # another window named
        if named_at < reset_at:
            if s.rolled_at != NEVER and named_at > s.rolled_at + EPSILON:
                return False  # the window's length learned anew
            reset_at = named_at  # one reset named twice: the earlier is closer
        self.leases.pop(lease, None)
        in_flight = self.unanswered(now)
        self.drift = True
        self.reset_at = reset_at
        if self.remaining is None or remaining <= self.remaining:  # else a stale count
            used = window_used(self.used, limit, remaining, in_flight, share)
            self.remaining, self.quota, self.used = remaining, max(limit - used, 0), used
        slots = self.slots
        while slots and slots[0] < s.gate - EPSILON:
            slots.popleft()  # as learn drops them (the gate did not move)
        return True
