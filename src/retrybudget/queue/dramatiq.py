"""Dramatiq hand-off (the ``dramatiq`` extra): a ``rate_limited`` outcome becomes
``dramatiq.Retry(delay=…)`` at its ``retry_at``.

::

    @dramatiq.actor(**ACTOR_OPTIONS)
    def sync_rental(rental_id):
        outcome = retrier.call(fetch_availability, rental_id)
        settle(outcome)   # returns the value, or raises a delayed Retry, or fails
"""

from __future__ import annotations

from typing import Any, TypeVar

import dramatiq
from dramatiq.middleware import CurrentMessage

from .._clock import SYSTEM_CLOCK, Clock
from ..core.outcome import Outcome
from ..errors import RetryBudgetError, error_for
from ._decide import QueueConfig
from ._handoff import Step, handoff

__all__ = ["ACTOR_OPTIONS", "settle"]

T = TypeVar("T")

ACTOR_OPTIONS: dict[str, Any] = {"throws": (RetryBudgetError,), "max_retries": 5}
"""Actor options that make a final failure fail at once (``throws``) and bound the retries;
the broker needs the ``CurrentMessage`` middleware for the retry count."""


def _retries() -> int:
    message = CurrentMessage.get_current_message()
    return 0 if message is None else int(message.options.get("retries", 0))


def settle(outcome: Outcome[T], *, config: QueueConfig | None = None,
           clock: Clock = SYSTEM_CLOCK) -> T | None:
    """Finish a Dramatiq actor with ``outcome``.

    Returns the value of an ok outcome. A deferrable outcome raises ``dramatiq.Retry``
    delayed to its ``retry_at``, at most ``config.max_deferrals`` times. Anything else
    raises the outcome's :class:`~retrybudget.RetryBudgetError`, which ``ACTOR_OPTIONS``'s
    ``throws`` turns into a failure without retries.
    """
    config = config if config is not None else QueueConfig(jitter=0.0)
    step = handoff(outcome, retries=_retries(), now=clock.wall(), config=config)
    if step.step is Step.DONE:
        return outcome.value
    if step.step is Step.RETRY:
        assert step.delay is not None  # noqa: S101 - a retry always has a delay
        raise dramatiq.Retry(f"{outcome.reason}: retry at {step.at}",
                             delay=max(1, int(step.delay * 1000) + 1))
    raise error_for(outcome)
