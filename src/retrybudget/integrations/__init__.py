"""Integrations with HTTP clients: httpx and httpx2 transports, a requests adapter, an aiohttp
middleware.

The client modules import their library, so import the one you use:

- :mod:`retrybudget.integrations.httpx`: ``RetryTransport`` and ``AsyncRetryTransport``;
- :mod:`retrybudget.integrations.httpx2`: the same for httpx2 (anthropic's and openai's);
- :mod:`retrybudget.integrations.requests`: ``RetryAdapter``;
- :mod:`retrybudget.integrations.urllib3`: ``BudgetRetry``, for a library that takes only a
  urllib3 ``Retry`` (PyGithub);
- :mod:`retrybudget.integrations.aiohttp`: ``RetryMiddleware``.

This package itself needs none of these libraries. It holds what they share: reading the
operation's stats and outcome back from a response or an error, one result shape for every
ending (``send_with_outcome`` / ``asend_with_outcome``: the outcome, and the response or
None), and payload validators.
"""

from ._common import (
    IDEMPOTENCY_HEADER,
    JOB_ID,
    OUTCOME,
    STATS,
    VALIDATOR,
    asend_with_outcome,
    outcome_of,
    send_with_outcome,
    stats_of,
)
from .validators import json_object

__all__ = [
    "IDEMPOTENCY_HEADER",
    "JOB_ID",
    "OUTCOME",
    "STATS",
    "VALIDATOR",
    "asend_with_outcome",
    "json_object",
    "outcome_of",
    "send_with_outcome",
    "stats_of",
]
