"""arq hand-off (the ``arq`` extra): a ``rate_limited`` outcome becomes ``Retry(defer=…)``.

::

    async def sync_rental(ctx, rental_id):
        outcome = await retrier.acall(fetch_availability, rental_id)
        return settle(ctx, outcome)   # the value, a deferred retry, or a failure
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, TypeVar

from arq import Retry

from .._clock import SYSTEM_CLOCK, Clock
from ..core.outcome import Outcome
from ..errors import error_for
from ._decide import QueueConfig
from ._handoff import Step, handoff

__all__ = ["settle"]

T = TypeVar("T")


def settle(ctx: Mapping[str, Any], outcome: Outcome[T], *, config: QueueConfig | None = None,
           clock: Clock = SYSTEM_CLOCK) -> T | None:
    """Finish an arq job with ``outcome`` (``ctx`` is the job's context).

    Returns the value of an ok outcome. A deferrable outcome raises ``arq.Retry`` deferred
    to its ``retry_at``, at most ``config.max_deferrals`` times (set the worker's
    ``max_tries`` above that). Anything else raises the outcome's
    :class:`~retrybudget.RetryBudgetError`: arq fails the job without a retry.
    """
    config = config if config is not None else QueueConfig(jitter=0.0)
    retries = max(0, int(ctx.get("job_try", 1) or 1) - 1)
    step = handoff(outcome, retries=retries, now=clock.wall(), config=config)
    if step.step is Step.DONE:
        return outcome.value
    if step.step is Step.RETRY:
        assert step.delay is not None  # noqa: S101 - a retry always has a delay
        raise Retry(defer=dt.timedelta(seconds=step.delay))
    raise error_for(outcome)
