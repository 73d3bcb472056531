"""Celery hand-off (the ``celery`` extra): a ``rate_limited`` outcome becomes ``retry(eta=…)``.

::

    @app.task(bind=True)
    def sync_rental(self, rental_id):
        outcome = retrier.call(fetch_availability, rental_id)
        return settle(self, outcome)   # the value, a retry at retry_at, or a failure
"""

from __future__ import annotations

import datetime as dt
from typing import Any, TypeVar

from .._clock import SYSTEM_CLOCK, Clock
from ..core.outcome import Outcome
from ..errors import error_for
from ._decide import QueueConfig
from ._handoff import Step, handoff

__all__ = ["settle"]

T = TypeVar("T")


def settle(task: Any, outcome: Outcome[T], *, config: QueueConfig | None = None,
           clock: Clock = SYSTEM_CLOCK) -> T | None:
    """Finish a bound Celery task with ``outcome``.

    Returns the value of an ok outcome. A deferrable outcome raises ``task.retry(eta=…)``
    at its ``retry_at`` (plus jitter), at most ``config.max_deferrals`` times. Anything
    else raises the outcome's :class:`~retrybudget.RetryBudgetError` without a retry (keep
    it out of the task's ``autoretry_for``).
    """
    config = config if config is not None else QueueConfig(jitter=0.0)
    retries = int(getattr(task.request, "retries", 0) or 0)
    step = handoff(outcome, retries=retries, now=clock.wall(), config=config)
    if step.step is Step.DONE:
        return outcome.value
    if step.step is Step.RETRY:
        assert step.at is not None  # noqa: S101 - a retry always has a time
        eta = dt.datetime.fromtimestamp(step.at, tz=dt.timezone.utc)
        raise task.retry(eta=eta, max_retries=config.max_deferrals, exc=error_for(outcome))
    raise error_for(outcome)
