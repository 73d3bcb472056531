"""The coordination arithmetic, pure: the gate instant, slots and pacing, the retry budget
and the breaker's state machine.

Time comes in as an argument (seconds on one clock: the process's monotonic clock for the
memory backend, Redis server ``TIME`` for the Redis backend); state comes in and goes out as
frozen values. :class:`~retrybudget.coordination.MemoryCoordinator` calls these functions
under its lock. The Redis Lua scripts (``lua/*.lua``) must be atomic inside Redis, so they
implement the same steps again; each Lua function names the function here that it mirrors,
and one behavioural test suite runs against both backends. docs/coordination.md describes
the algorithms in prose.

The package's modules, one rule each: ``_instants`` (the shared
tolerance and instants), ``_health`` (what an outcome says), ``_gate`` (a key's schedule and
gate), ``_pacing`` (low-quota spacing, write spacing), ``_slots`` (a held worker's slot),
``_learned`` (a send rate learned from throttles that name no quota), ``_budget`` (the
retry budget), ``_breaker`` (the breaker), ``_tokens`` (a token quota's ledger) and
``_answers`` (an admission, a
permit). The Lua scripts' comments name the functions as this package exports them
(``_logic.learn``).
"""

from __future__ import annotations

from ._answers import admission_of, permit_of
from ._breaker import Breaker, Phase, Verdict, breaker_admit, breaker_finish, moved
from ._budget import SLICES, Budget, budget_deposit, budget_deposited, budget_withdraw
from ._gate import Schedule, gate_delay, learn, rolled, sent, window_used
from ._health import Health, health
from ._instants import EPSILON, FLIGHT_TTL, NEVER, PROBE_PATIENCE
from ._learned import CONSTANTS as LEARNED_CONSTANTS
from ._learned import (
    SPAN,
    Learned,
    learned_gap,
    learned_rate,
    rate_cut,
    rebooks,
    send_counted,
    send_rate,
)
from ._pacing import paced_interval, pacing_interval, write_wait
from ._slots import (
    booked_from,
    herd_slot,
    plan_slot,
    probe_waits,
    quota_hold,
    release_quota,
    release_slot,
    still_probing,
    went_now,
)
from ._tokens import (
    TOKEN_DIMENSIONS,
    Ledger,
    ledger_charged,
    ledger_closed,
    ledger_corrected,
    ledger_hold,
    ledger_learn,
    ledger_rolled,
)

__all__ = [
    "EPSILON",
    "FLIGHT_TTL",
    "LEARNED_CONSTANTS",
    "NEVER",
    "PROBE_PATIENCE",
    "SLICES",
    "SPAN",
    "TOKEN_DIMENSIONS",
    "Breaker",
    "Budget",
    "Health",
    "Learned",
    "Ledger",
    "Phase",
    "Schedule",
    "Verdict",
    "admission_of",
    "breaker_admit",
    "breaker_finish",
    "budget_deposit",
    "budget_deposited",
    "budget_withdraw",
    "gate_delay",
    "health",
    "herd_slot",
    "learn",
    "learned_gap",
    "learned_rate",
    "ledger_charged",
    "ledger_closed",
    "ledger_corrected",
    "ledger_hold",
    "ledger_learn",
    "ledger_rolled",
    "moved",
    "paced_interval",
    "pacing_interval",
    "permit_of",
    "plan_slot",
    "probe_waits",
    "quota_hold",
    "rate_cut",
    "rebooks",
    "booked_from",
    "release_quota",
    "release_slot",
    "rolled",
    "send_counted",
    "send_rate",
    "sent",
    "still_probing",
    "went_now",
    "window_used",
    "write_wait",
]
