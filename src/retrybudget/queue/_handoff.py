"""Hand-off to a task engine: one function that turns an outcome into done / retry at / fail.

It asks the queue's own rule (:func:`~retrybudget.queue.decide`), so a Celery task, a
Dramatiq actor or an arq job treats an outcome exactly as the built-in queue does: a
provider success is done; a final failure fails without retries; a ``rate_limited`` (or
other transient) outcome becomes the engine's own delayed retry at ``retry_at`` until the
deferrals (the engine's retries) or the job deadline run out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ._base import OutcomeLike
from ._decide import Action, Decision, QueueConfig, decide

__all__ = ["Handoff", "Step", "handoff"]


class Step(str, enum.Enum):
    """What the task engine should do."""

    DONE = "done"
    RETRY = "retry"
    FAIL = "fail"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Handoff:
    """The engine's next step for one outcome.

    Attributes:
        step: done, retry or fail.
        at: for a retry, the wall-clock epoch seconds to run again at (never before
            ``retry_at``).
        delay: for a retry, seconds from ``now`` until ``at`` (at least 0).
        decision: the queue rule's decision it came from.
    """

    step: Step
    at: float | None
    delay: float | None
    decision: Decision


def handoff(outcome: OutcomeLike, *, retries: int, now: float, config: QueueConfig | None = None,
            enqueued_at: float | None = None, jitter: float = 0.0) -> Handoff:
    """What a task engine does with ``outcome`` after ``retries`` earlier retries.

    Args:
        outcome: the operation's outcome (its ``reason`` and ``retry_at``).
        retries: how many times the engine already retried this task.
        now: the current wall-clock epoch seconds.
        config: the limits (``max_deferrals`` is the most retries; ``deadline`` counts from
            ``enqueued_at``).
        enqueued_at: when the task was first sent (default: ``now``).
        jitter: a fraction in [0, 1) of ``config.jitter`` added to a retry.
    """
    config = config if config is not None else QueueConfig()
    decision = decide(outcome.reason, outcome.retry_at, now=now, deferrals=retries,
                      enqueued_at=now if enqueued_at is None else enqueued_at, config=config,
                      jitter=jitter)
    if decision.action is Action.DEFER:
        assert decision.at is not None  # noqa: S101 - a deferral always has a time
        return Handoff(Step.RETRY, decision.at, max(0.0, decision.at - now), decision)
    return Handoff(Step.DONE if decision.ok else Step.FAIL, None, None, decision)
