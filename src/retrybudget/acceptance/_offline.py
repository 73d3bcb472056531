"""The offline runner: a case played against the in-process scripted provider (no network)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from .._clock import Clock, FakeClock
from .._drivers import Retrier
from .._fixtures import ScriptedProvider
from ..coordination import Coordinator
from ..core.actions import Admission
from ..core.outcome import Outcome
from ..core.policy import Policy
from ._cases import Case, policy_for
from ._judge import CaseResult, judge

__all__ = ["CaseBreaker", "run_offline"]


class CaseBreaker(Coordinator):
    """Just enough coordination for a single case: an optionally open breaker that counts.

    Attributes:
        open: the breaker refuses every operation.
        failures: the provider failures it was told of (logical operations, not attempts).
    """

    def __init__(self, open_: bool) -> None:
        self.open = open_
        self.failures = 0

    def admit(self, key: str) -> Admission:
        """Refuse when open, else admit."""
        return Admission(allowed=not self.open, detail="breaker open" if self.open else "")

    def finish(self, key: str, outcome: Outcome[Any], probe: bool) -> None:
        """Count an operation that ended in a provider failure."""
        if outcome.reason.is_provider_failure:
            self.failures += 1


def run_offline(case: Case, *, clock: Clock | None = None, base: Policy | None = None,
                seed: int = 7, hooks: Sequence[object] = ()) -> CaseResult:
    """Play a case against the in-process scripted provider (no network).

    ``hooks`` are passed to the :class:`Retrier` (an audit hook, stats, metrics).
    """
    clk = clock or FakeClock()
    provider = ScriptedProvider(case.script, clk)
    coordinator = CaseBreaker(open_=case.breaker == "open")
    retrier = Retrier(policy=policy_for(case, base), clock=clk, coordinator=coordinator,
                      random=random.Random(seed), method=case.method, job_id=case.id,
                      hooks=tuple(hooks))
    started = clk.wall()
    outcome = retrier.call(provider, case.method)
    arrivals = [r["arrival"] for r in provider.requests]
    return judge(case, outcome, arrivals, started_wall=started,
                 breaker_failures=coordinator.failures)
