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

An HTTP integration raises its own family of these (:func:`error_family`): each error is
also its library's (``TransportRateLimited`` is a :class:`RateLimited` and an
``httpx.TransportError``), so code that catches the library's errors catches them too. An
integration raises one only when it has no response to hand over: ``…Rejected``,
``…NotFound`` and ``…UnexpectedResponse`` complete the family but are not raised (those
outcomes have a response, and it is handed over).
"""

from __future__ import annotations

from typing import NamedTuple

# The hierarchy is defined in the core, beside the Outcome each error carries (so the core
# needs nothing above it); this module is its public home.
from .core.outcome import (
    ERRORS,
    CircuitOpen,
    DeadlineExceeded,
    InvalidPayload,
    NotFound,
    NotRetried,
    RateLimited,
    Reason,
    Rejected,
    RetriesExhausted,
    RetryBudgetError,
    RetryBudgetRefused,
    UnexpectedResponse,
    describe,
    error_for,
)
from .core.policy import PolicyError

__all__ = [
    "ERRORS",
    "CircuitOpen",
    "DeadlineExceeded",
    "ErrorFamily",
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
    "describe",
    "error_family",
    "error_for",
]


class ErrorFamily(NamedTuple):
    """An integration's error class for each failed reason, by the reason's name (each also
    derives from the library's errors: see :func:`error_family`)."""

    rate_limited: type[RateLimited]
    exhausted: type[RetriesExhausted]
    deadline: type[DeadlineExceeded]
    circuit_open: type[CircuitOpen]
    retry_budget: type[RetryBudgetRefused]
    rejected: type[Rejected]
    not_found: type[NotFound]
    unexpected: type[UnexpectedResponse]
    invalid_payload: type[InvalidPayload]
    not_retried: type[NotRetried]

    def table(self) -> dict[Reason, type[RetryBudgetError]]:
        """The family as :func:`error_for` takes it: the class of each reason."""
        return {cls.reason: cls for cls in self}


def error_family(prefix: str, module: str, base: type[Exception], *,
                 deadline: type[Exception] | None = None,
                 invalid_payload: type[Exception] | None = None) -> ErrorFamily:
    """An HTTP integration's errors, made once: for each failed reason, the class
    ``prefix + name`` (``TransportRateLimited``) that derives from retrybudget's error of that
    reason and from the library's ``base``, or ``deadline`` for :class:`DeadlineExceeded`
    and ``invalid_payload`` for :class:`InvalidPayload` when given (the library's timeout and
    protocol errors).

    Args:
        prefix: the family's name prefix (``"Transport"``, ``"Adapter"``…).
        module: the module that names them, at its top level under these names (so they
            pickle, and tracebacks name them there).
        base: the library's error each class also derives from.
        deadline: the library's timeout error, for ``DeadlineExceeded``.
        invalid_payload: the library's protocol or payload error, for ``InvalidPayload``.
    """
    theirs = {Reason.DEADLINE: deadline, Reason.INVALID_PAYLOAD: invalid_payload}
    made: dict[str, type[RetryBudgetError]] = {}
    for reason, ours in ERRORS.items():
        other = theirs.get(reason) or base
        name = prefix + ours.__name__
        summary = (ours.__doc__ or "").strip().splitlines()[0]
        made[reason.value] = type(name, (ours, other), {
            "__module__": module, "__qualname__": name,
            "__doc__": f"{summary} Also a ``{other.__module__}.{other.__qualname__}``.",
        })
    return ErrorFamily(**made)  # type: ignore[arg-type]  # each made from its reason's class
