"""The breaker's state machine: closed, open, half-open, counted in logical operations."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ...core import evolve, fast_init
from .._config import BreakerConfig
from ._health import Health
from ._instants import NEVER


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


_ADMITTED = Verdict(True)
"""A closed breaker's verdict (a frozen value, made once)."""


def breaker_admit(b: Breaker, now: float, cfg: BreakerConfig) -> tuple[Verdict, Breaker]:
    """Admit an operation or refuse it.

    Closed admits. Open refuses until ``open_until``, then turns half-open. Half-open admits
    exactly one probe (until ``probe_until``) and refuses everyone else meanwhile.
    """
    if b.phase is Phase.CLOSED:
        return _ADMITTED, b
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
    if (verdict is Health.SUCCESS and not b.failures and len(b.history) == cfg.window
            and "1" not in b.history and (cfg.failure_ratio is None or cfg.failure_ratio > 0)):
        return b, False  # a success on a full window of them: nothing moved, nothing trips
    failed = verdict is Health.FAILURE
    failures = b.failures + 1 if failed else 0
    history = (b.history + ("1" if failed else "0"))[-cfg.window:]
    if _trips(failures, history, cfg):
        return _opened(now, cfg), True
    if failures == b.failures and history == b.history:
        return b, False  # nothing moved
    return evolve(b, failures=failures, history=history), False


def moved(before: Breaker, after: Breaker) -> str | None:
    """The state a breaker entered between ``before`` and ``after``; None if it stayed put.

    What a coordinator reports as a breaker transition: closed to open, open to half-open
    (when the probe is admitted), half-open to closed or open (when the probe finishes).
    """
    return None if before.phase is after.phase else after.phase.value
