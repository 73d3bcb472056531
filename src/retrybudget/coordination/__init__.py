"""Coordination of every worker that shares a provider: breaker, gate, pacing, retry budget.

Two backends implement one :class:`Coordinator` interface:

* :class:`MemoryCoordinator`: the threads and asyncio tasks of one process (the embedded
  default);
* :class:`RedisCoordinator`: every process and machine sharing a Redis server (needs the
  ``redis`` extra; imported on first use).

Both follow the algorithms of :mod:`retrybudget.coordination._logic`, configured by
:class:`CoordinationConfig`. See docs/coordination.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._base import Coordinator, NoCoordination
from ._config import (
    BreakerConfig,
    ConcurrencyConfig,
    CoordinationConfig,
    GateConfig,
    PacingConfig,
    RetryBudgetConfig,
    TokenConfig,
)
from ._memory import MemoryCoordinator
from ._stats import CoordinationStats
from ._tokens import (
    TokenCall,
    begin_request,
    current_call,
    end_request,
    llm_request_cost,
    may_cost,
    token_cost,
)

if TYPE_CHECKING:
    from ._redis import RedisCoordinator

__all__ = [
    "BreakerConfig",
    "ConcurrencyConfig",
    "CoordinationConfig",
    "CoordinationStats",
    "Coordinator",
    "GateConfig",
    "MemoryCoordinator",
    "NoCoordination",
    "PacingConfig",
    "RedisCoordinator",
    "RetryBudgetConfig",
    "TokenCall",
    "TokenConfig",
    "begin_request",
    "current_call",
    "end_request",
    "llm_request_cost",
    "may_cost",
    "token_cost",
]


def __getattr__(name: str) -> object:
    if name == "RedisCoordinator":  # the redis package is an optional extra
        from ._redis import RedisCoordinator  # noqa: PLC0415

        return RedisCoordinator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
