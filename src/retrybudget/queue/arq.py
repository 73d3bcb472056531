"""arq hand-off (the ``arq`` extra): a ``rate_limited`` outcome becomes ``Retry(defer=…)``.

::

    @on_time                          # never starts the job before its deferral is due
    async def sync_rental(ctx, rental_id):
        outcome = await retrier.acall(fetch_availability, rental_id)
        return settle(ctx, outcome)   # the value, a deferred retry, or a failure

Why :func:`on_time`: with two or more workers, arq (0.25 and earlier) can start a job that
was just deferred. A worker reads the due job ids, waits for a free slot, and by then another
worker has run the job and deferred it with ``Retry``; the first worker still starts it
(it checks the job is not running, not that it is due; arq issue #482). The job's context
carries the score it was started under (``ctx["score"]``, the epoch milliseconds it was due),
so the wrapper sees the early start and puts the job back to that time before the task body
sends anything to the provider, without counting the early start as one of the job's tries.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Concatenate, ParamSpec, TypeVar

from arq import Retry
from arq.constants import retry_key_prefix

from .._clock import SYSTEM_CLOCK, Clock
from ..core.outcome import Outcome
from ..errors import error_for
from ._decide import QueueConfig
from ._handoff import Step, handoff

__all__ = ["on_time", "settle"]

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")

MARGIN_MS = 2
"""Milliseconds added to every deferral: arq rounds a deferral and its own clock to whole
milliseconds, which could otherwise start a job up to 1.5 ms before ``retry_at``."""


def _defer(seconds: float) -> dt.timedelta:
    """A deferral arq cannot round to before ``seconds`` from now."""
    return dt.timedelta(milliseconds=math.ceil(max(0.0, seconds) * 1000) + MARGIN_MS)


def on_time(task: Callable[Concatenate[dict[str, Any], P], Awaitable[R]], *,
            clock: Clock = SYSTEM_CLOCK) -> Callable[Concatenate[dict[str, Any], P], Awaitable[R]]:
    """Wrap an arq task so it never runs before the time its job was deferred to.

    A job started early (see the module's note) is deferred again to its due time with
    ``arq.Retry`` before ``task`` runs, and its try count is put back, so the early start
    costs neither a provider request nor one of ``max_tries``. The wrapper keeps the task's
    name (arq names a function by it).
    """

    @functools.wraps(task)
    async def guarded(ctx: dict[str, Any], /, *args: P.args, **kwargs: P.kwargs) -> R:
        due = ctx.get("score")
        if isinstance(due, int) and due / 1000 > clock.wall():
            redis, job_id = ctx.get("redis"), ctx.get("job_id")
            if redis is not None and job_id is not None:
                await redis.decr(retry_key_prefix + str(job_id))
            raise Retry(defer=_defer(due / 1000 - clock.wall()))
        return await task(ctx, *args, **kwargs)

    return guarded


def settle(ctx: Mapping[str, Any], outcome: Outcome[T], *, config: QueueConfig | None = None,
           clock: Clock = SYSTEM_CLOCK) -> T | None:
    """Finish an arq job with ``outcome`` (``ctx`` is the job's context).

    Returns the value of an ok outcome. A deferrable outcome raises ``arq.Retry`` deferred
    to its ``retry_at`` (never a millisecond before), at most ``config.max_deferrals``
    times: set the worker's ``max_tries`` to at least ``max_deferrals + 2`` (one try per
    deferral, the last run, and room for one early start :func:`on_time` puts back).
    Anything else raises the outcome's :class:`~retrybudget.RetryBudgetError`: arq fails
    the job without a retry. Wrap the task in :func:`on_time`.
    """
    config = config if config is not None else QueueConfig(jitter=0.0)
    retries = max(0, int(ctx.get("job_try", 1) or 1) - 1)
    step = handoff(outcome, retries=retries, now=clock.wall(), config=config)
    if step.step is Step.DONE:
        return outcome.value
    if step.step is Step.RETRY:
        assert step.delay is not None  # noqa: S101 - a retry always has a delay
        raise Retry(defer=_defer(step.delay))
    raise error_for(outcome)
