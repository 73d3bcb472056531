"""What happens to a queued operation given its outcome: the one pure rule every backend uses.

No I/O, no clock, no randomness of its own: the caller passes the time, the operation's
deferrals so far, when it was enqueued and a jitter fraction, and gets a :class:`Decision`
back. The backends only store what was decided.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from ..core.outcome import Reason
from ..core.policy import PolicyError

__all__ = [
    "FINAL_FAILURES",
    "LATER",
    "Action",
    "Decision",
    "QueueConfig",
    "decide",
]

FINAL_FAILURES = frozenset(reason for reason in Reason if reason.final)
"""Reasons that complete an operation as a failure at once: never re-queued.

``not_retried`` is here too: a write that failed transiently was not replayed by the
retrier, and the queue does not replay it either."""

LATER = frozenset(reason for reason in Reason if reason.deferrable)
"""Reasons that defer an operation: to the provider's ``retry_at`` when it named one, else
by the queue's own backoff."""


class Action(str, enum.Enum):
    """What the queue does with an operation after an outcome."""

    COMPLETE = "complete"
    DEFER = "defer"
    DEAD_LETTER = "dead_letter"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """How a queue treats its operations.

    Attributes:
        visibility_timeout: seconds a lease lasts; a worker that has not completed by then
            is presumed dead and another worker may take the operation.
        max_deferrals: deferrals after which the next deferrable outcome dead-letters.
        deadline: seconds from enqueueing after which an operation is not deferred again
            (it is dead-lettered instead); None: no job-level deadline.
        jitter: the most seconds added to a deferral's time (a fraction of it, drawn by
            the caller), so deferred operations do not all start at one instant.
        backoff: seconds of the first deferral when the provider named no time; doubled
            on each further deferral, capped at ``max_backoff``.
        max_backoff: the longest such deferral.
        own_deferrals: whether an outcome that names no ``retry_at`` is deferred by the
            queue's own backoff; False: it completes as a failure at once (the operation's
            policy already spent its attempts and its deadline on it).
    """

    visibility_timeout: float = 30.0
    max_deferrals: int = 5
    deadline: float | None = None
    jitter: float = 1.0
    backoff: float = 5.0
    max_backoff: float = 300.0
    own_deferrals: bool = True

    def __post_init__(self) -> None:
        for name in ("visibility_timeout", "jitter", "backoff", "max_backoff"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise PolicyError(f"QueueConfig.{name} must be a finite number >= 0, not {value!r}")
        if self.visibility_timeout <= 0:
            raise PolicyError("QueueConfig.visibility_timeout must be > 0")
        if not isinstance(self.max_deferrals, int) or self.max_deferrals < 0:
            raise PolicyError(f"QueueConfig.max_deferrals must be an int >= 0, "
                              f"not {self.max_deferrals!r}")
        if self.deadline is not None and (not math.isfinite(self.deadline) or self.deadline <= 0):
            raise PolicyError(f"QueueConfig.deadline must be > 0 or None, not {self.deadline!r}")


@dataclass(frozen=True, slots=True)
class Decision:
    """What was decided for one outcome.

    Attributes:
        action: complete, defer or dead-letter.
        reason: the outcome reason it was decided for.
        ok: True only when the operation completed with a provider success.
        at: for a deferral, the wall-clock epoch seconds before which it does not run.
        why: a short human explanation.
    """

    action: Action
    reason: Reason
    ok: bool = False
    at: float | None = None
    why: str = ""

    @property
    def final(self) -> bool:
        """True when the operation's outcome is recorded (completed or dead-lettered)."""
        return self.action is not Action.DEFER


def decide(
    reason: Reason | str,
    retry_at: float | None,
    *,
    now: float,
    deferrals: int,
    enqueued_at: float,
    config: QueueConfig,
    jitter: float = 0.0,
) -> Decision:
    """Decide what happens to an operation that ended with ``reason``.

    Args:
        reason: the outcome reason (an unknown string counts as ``unexpected``).
        retry_at: the provider's "come back at" instant, epoch seconds, if any.
        now: the current wall-clock epoch seconds.
        deferrals: how many times the operation was deferred already.
        enqueued_at: when it was enqueued (epoch seconds).
        config: the queue's rules.
        jitter: a fraction in [0, 1) of ``config.jitter`` added to a deferral (clamped).

    Returns:
        ``ok`` completes as a success; the final failures complete as failures; the
        deferrable reasons defer to ``max(retry_at, now) + jitter`` (or the queue's own
        backoff), unless that would pass the job deadline or the deferrals are used up,
        when they dead-letter. A deferral is never earlier than ``retry_at``.
    """
    try:
        reason = Reason(reason)
    except ValueError:
        return Decision(Action.COMPLETE, Reason.UNEXPECTED, why=f"unknown outcome {reason!r}")
    if reason is Reason.OK:
        return Decision(Action.COMPLETE, reason, ok=True, why="the provider succeeded")
    if not reason.deferrable:
        return Decision(Action.COMPLETE, reason, why=f"{reason} is not retryable: not re-queued")
    if retry_at is not None and not math.isfinite(retry_at):
        retry_at = None
    if retry_at is None and not config.own_deferrals:
        return Decision(Action.COMPLETE, reason,
                        why=f"{reason} named no time to come back: not re-queued")
    if deferrals >= config.max_deferrals:
        return Decision(Action.DEAD_LETTER, reason,
                        why=f"{reason} after {deferrals} deferral(s), the most allowed")
    fraction = min(max(jitter, 0.0), 1.0) if math.isfinite(jitter) else 0.0
    if retry_at is not None:
        base, source = max(retry_at, now), "the provider's retry_at"
    else:
        base = now + min(config.backoff * 2.0 ** min(deferrals, 64), config.max_backoff)
        source = "the queue's backoff"
    at = base + fraction * config.jitter
    if config.deadline is not None and at > enqueued_at + config.deadline:
        return Decision(Action.DEAD_LETTER, reason,
                        why=f"{reason}: the next run ({source}) would pass the job deadline")
    return Decision(Action.DEFER, reason, at=at, why=f"{reason}: deferred to {source}")
