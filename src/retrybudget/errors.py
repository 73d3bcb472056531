"""The exceptions retrybudget raises.

::

    RetryBudgetError            an operation ended without success (carries its Outcome)
    ├── RateLimited             rate_limited: the provider throttles; see ``retry_at``
    ├── RetriesExhausted        exhausted: transient failures used every attempt
    ├── DeadlineExceeded        deadline: no room left for another attempt or wait
    ├── CircuitOpen             circuit_open: the breaker refused; 0 attempts
    ├── RetryBudgetRefused      retry_budget: the shared retry budget refused a retry
    ├── Rejected                rejected: 400/401/403 and the like
    ├── NotFound                not_found: 404, a reachable, missing record
    ├── UnexpectedResponse      unexpected: a status outside the contract (e.g. 500)
    ├── InvalidPayload          invalid_payload: a 2xx whose payload failed validation
    └── NotRetried              not_retried: a write failed and was not replayed
    PolicyError (ValueError)    a policy or profile was configured with unusable values

Every error carries the operation id, the outcome reason, the attempts made and
``retry_at``; its message never holds a URL's secrets, a header or a body. The last
error the provider call raised is on ``error.outcome.error``; it is deliberately not
chained as ``__cause__`` (a foreign error's message may quote a secret). Errors
pickle cleanly (the attached :class:`Outcome` stays behind).
"""

from __future__ import annotations

from typing import Any

from .core.outcome import Outcome, Reason
from .core.policy import PolicyError

__all__ = [
    "CircuitOpen",
    "DeadlineExceeded",
    "InvalidPayload",
    "NotFound",
    "NotRetried",
    "PolicyError",
    "RateLimited",
    "Rejected",
    "RetriesExhausted",
    "RetryBudgetError",
    "RetryBudgetRefused",
    "UnexpectedResponse",
    "error_for",
]


class RetryBudgetError(Exception):
    """An operation ended without success.

    Attributes:
        reason: the outcome reason.
        operation_id: the operation's id.
        attempts: outbound attempts made.
        retry_at: wall-clock epoch seconds when the provider said to come back, or None.
        outcome: the full :class:`Outcome` (None after unpickling).
    """

    reason: Reason = Reason.UNEXPECTED

    def __init__(
        self,
        message: str,
        *,
        reason: Reason | None = None,
        operation_id: str = "",
        attempts: int = 0,
        retry_at: float | None = None,
        outcome: Outcome[Any] | None = None,
    ) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason
        self.operation_id = operation_id
        self.attempts = attempts
        self.retry_at = retry_at
        self.outcome = outcome

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (type(self), str(self), self.reason.value, self.operation_id, self.attempts,
             self.retry_at),
        )


def _rebuild(
    cls: type[RetryBudgetError],
    message: str,
    reason: str,
    operation_id: str,
    attempts: int,
    retry_at: float | None,
) -> RetryBudgetError:
    return cls(message, reason=Reason(reason), operation_id=operation_id, attempts=attempts,
               retry_at=retry_at)


class RateLimited(RetryBudgetError):
    """The provider throttles: come back at ``retry_at``."""

    reason = Reason.RATE_LIMITED


class RetriesExhausted(RetryBudgetError):
    """Transient failures used every attempt."""

    reason = Reason.EXHAUSTED


class DeadlineExceeded(RetryBudgetError):
    """The deadline left no room for another attempt or wait."""

    reason = Reason.DEADLINE


class CircuitOpen(RetryBudgetError):
    """The circuit breaker refused the operation: no attempt was made."""

    reason = Reason.CIRCUIT_OPEN


class RetryBudgetRefused(RetryBudgetError):
    """The shared retry budget refused a retry."""

    reason = Reason.RETRY_BUDGET


class Rejected(RetryBudgetError):
    """The provider rejected the request (400/401/403…): not retried."""

    reason = Reason.REJECTED


class NotFound(RetryBudgetError):
    """A reachable, missing record (404): not retried."""

    reason = Reason.NOT_FOUND


class UnexpectedResponse(RetryBudgetError):
    """A status outside the contract, or an error the library does not know: not retried."""

    reason = Reason.UNEXPECTED


class InvalidPayload(RetryBudgetError):
    """A 2xx whose payload failed validation, or a protocol error: not a success, not retried."""

    reason = Reason.INVALID_PAYLOAD


class NotRetried(RetryBudgetError):
    """A write failed transiently and was not replayed."""

    reason = Reason.NOT_RETRIED


ERRORS: dict[Reason, type[RetryBudgetError]] = {
    cls.reason: cls
    for cls in (RateLimited, RetriesExhausted, DeadlineExceeded, CircuitOpen, RetryBudgetRefused,
                Rejected, NotFound, UnexpectedResponse, InvalidPayload, NotRetried)
}


def describe(outcome: Outcome[Any]) -> str:
    """A one-line, secret-free description of a failed outcome."""
    parts = [f"{outcome.reason.value}: {outcome.detail or 'operation failed'}",
             f"operation {outcome.operation_id}", f"{outcome.attempts} attempt(s)"]
    if outcome.key:
        parts.append(f"key {outcome.key}")
    if outcome.retry_at is not None:
        parts.append(f"retry_at {outcome.retry_at:.3f}")
    return "; ".join(parts)


def error_for(
    outcome: Outcome[Any], base: dict[Reason, type[RetryBudgetError]] | None = None
) -> RetryBudgetError:
    """The exception matching a failed outcome (an ok outcome is a programming error).

    Args:
        outcome: a failed outcome.
        base: a replacement table of exception classes (integrations pass subclasses that
            also derive from their library's exceptions).
    """
    if outcome.reason is Reason.OK:
        raise ValueError("an ok outcome is not an error")
    cls = (base or ERRORS)[outcome.reason]
    err = cls(
        describe(outcome), reason=outcome.reason, operation_id=outcome.operation_id,
        attempts=outcome.attempts, retry_at=outcome.retry_at, outcome=outcome,
    )
    # The original error stays on ``err.outcome.error``; it is not chained, because a foreign
    # error's message may quote a URL with its secrets and chained tracebacks get logged.
    err.__suppress_context__ = True
    return err
