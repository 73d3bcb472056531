"""Seeded fault injection: which fault (if any) a request gets, and outage windows."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from retrybudget.sandbox._config import Faults

__all__ = ["MALFORMED_BODY", "FaultDraw", "FaultKind", "draw_fault", "fault_rng", "in_outage"]

MALFORMED_BODY = "<html>maintenance</html>"
"""The body of a malformed-payload fault (sent with status 200)."""

FaultKind = Literal["none", "reset", "error", "malformed", "slow_body"]


@dataclass(frozen=True, slots=True)
class FaultDraw:
    """What one request gets: a fault kind, the status for an error, and added latency."""

    kind: FaultKind
    status: int
    latency_s: float


def fault_rng(seed: int, run_id: str) -> random.Random:
    """The generator for one run: seeded from the configured seed and the run id."""
    return random.Random(f"{seed}:{run_id}")


def draw_fault(faults: Faults, rng: random.Random) -> FaultDraw:
    """Draw one request's fault; always takes exactly three values from ``rng``."""
    band = rng.random()
    pick = rng.random()
    jitter = rng.random()
    latency = faults.latency_s + faults.latency_jitter_s * jitter
    statuses = faults.error_statuses
    status = statuses[min(int(pick * len(statuses)), len(statuses) - 1)]
    kind: FaultKind = "none"
    if band < faults.reset_rate:
        kind = "reset"
    elif band < faults.reset_rate + faults.error_rate:
        kind = "error"
    elif band < faults.reset_rate + faults.error_rate + faults.malformed_rate:
        kind = "malformed"
    elif band < (faults.reset_rate + faults.error_rate + faults.malformed_rate
                 + faults.slow_body_rate):
        kind = "slow_body"
    return FaultDraw(kind=kind, status=status if kind == "error" else 200, latency_s=latency)


def in_outage(faults: Faults, elapsed_s: float) -> bool:
    """Whether ``elapsed_s`` (seconds since the app was created) falls in an outage window."""
    return any(start <= elapsed_s < end for start, end in faults.outages)
