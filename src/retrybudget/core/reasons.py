"""Why an operation ended (:class:`Reason`) and what each reason says, by name; what a wait
was for (:class:`WaitReason`).

What a reason says is written here once, as its properties, and asked everywhere else: the
queue defers what is :attr:`~Reason.deferrable` and completes what is :attr:`~Reason.final`;
the breaker counts :attr:`~Reason.is_provider_failure` and leaves what is
:attr:`~Reason.neutral` out; the gateway hints ``Retry-After`` for a :attr:`~Reason.retry_hint`.
"""

from __future__ import annotations

import enum

__all__ = ["Reason", "WaitReason"]


class Reason(str, enum.Enum):
    """Why an operation ended; exactly one per operation."""

    OK = "ok"
    NOT_FOUND = "not_found"
    RATE_LIMITED = "rate_limited"
    EXHAUSTED = "exhausted"
    DEADLINE = "deadline"
    CIRCUIT_OPEN = "circuit_open"
    RETRY_BUDGET = "retry_budget"
    REJECTED = "rejected"
    UNEXPECTED = "unexpected"
    INVALID_PAYLOAD = "invalid_payload"
    NOT_RETRIED = "not_retried"

    def __str__(self) -> str:
        value: str = self.value
        return value

    # What each reason says: attributes of each member, set once below (read as plainly as a
    # field, with no call on the paths every operation takes).
    final: bool
    """A failure another try would not change (rejected, not found, an invalid payload,
    unexpected, a write not replayed): a queue completes it at once."""
    deferrable: bool
    """A failure a later try may not meet (rate limited, exhausted, deadline, the breaker or
    the shared retry budget refusing): a queue defers it."""
    is_provider_failure: bool
    """The outcome speaks of the provider's health (exhausted, deadline, unexpected): what a
    breaker counts."""
    neutral: bool
    """Cut short by our own rules (the breaker, the shared retry budget, a write not
    replayed): says nothing of the provider's health either way."""
    retry_hint: bool
    """The outcome's ``retry_at`` is a time to come back worth telling a caller (the
    provider's rate limit, the breaker's reopening)."""


_DEFERRABLE = frozenset({Reason.RATE_LIMITED, Reason.EXHAUSTED, Reason.DEADLINE,
                         Reason.CIRCUIT_OPEN, Reason.RETRY_BUDGET})
for _reason in Reason:
    _reason.deferrable = _reason in _DEFERRABLE
    _reason.final = _reason is not Reason.OK and not _reason.deferrable
    _reason.is_provider_failure = _reason in (Reason.EXHAUSTED, Reason.DEADLINE, Reason.UNEXPECTED)
    _reason.neutral = _reason in (Reason.CIRCUIT_OPEN, Reason.RETRY_BUDGET, Reason.NOT_RETRIED)
    _reason.retry_hint = _reason in (Reason.RATE_LIMITED, Reason.CIRCUIT_OPEN)
del _reason


class WaitReason(str, enum.Enum):
    """What a wait was for."""

    RETRY_AFTER = "retry_after"
    RATE_LIMIT_RESET = "rate_limit_reset"
    RATE_LIMIT_BACKOFF = "rate_limit_backoff"
    BACKOFF = "backoff"
    GATE = "gate"
    PACING = "pacing"
    CONCURRENCY = "concurrency"

    def __str__(self) -> str:
        value: str = self.value
        return value
