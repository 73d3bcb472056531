"""The retry budget: retries a share of the healthy operations, over a sliding window."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...core import fast_init
from .._config import RetryBudgetConfig

SLICES = 10
"""The retry budget's window is counted in this many slices."""


@fast_init
@dataclass(frozen=True, slots=True)
class Budget:
    """One key's retry budget: ``(slice, healthy operations, retries)`` per live slice, in
    ascending slice order (as :func:`budget_deposit` and :func:`budget_withdraw` build it)."""

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
    current = math.floor(now * SLICES / cfg.ttl)
    slices = b.slices
    if slices and slices[-1][0] == current and slices[0][0] > current - SLICES:
        # every slice live (they ascend, the latest the current one): counted in place
        return budget_deposited(b, 1)
    current, live = _live(b, now, cfg)
    return _add(live, current, 1, 0)


def budget_deposited(b: Budget, n: int) -> Budget:
    """The budget with ``n`` more healthy operations in its latest slice (which must exist):
    :func:`budget_deposit`'s count in place, ``n`` times."""
    slices = b.slices
    current, deposits, withdrawals = slices[-1]
    return Budget((*slices[:-1], (current, deposits + n, withdrawals)))


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
