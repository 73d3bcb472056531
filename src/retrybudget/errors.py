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
    "error_for",
]
