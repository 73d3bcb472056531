"""Integrations with HTTP clients: httpx transports, a requests adapter, an aiohttp middleware.

The client modules import their library, so import the one you use:

- :mod:`retrybudget.integrations.httpx`: ``RetryTransport`` and ``AsyncRetryTransport``;
- :mod:`retrybudget.integrations.requests`: ``RetryAdapter``;
- :mod:`retrybudget.integrations.aiohttp`: ``RetryMiddleware``.

This package itself needs none of these libraries. It holds what they share: reading the
operation's stats and outcome back from a response or an error (``outcome_and_response`` /
``aoutcome_and_response`` return ``(Outcome, response or None)`` for every ending), and
payload validators.
"""

from ._common import (
    IDEMPOTENCY_HEADER,
    JOB_ID,
    OUTCOME,
    STATS,
    VALIDATOR,
    aoutcome_and_response,
    outcome_and_response,
    outcome_of,
    stats_of,
)
from .validators import json_object

__all__ = [
    "IDEMPOTENCY_HEADER",
    "JOB_ID",
    "OUTCOME",
    "STATS",
    "VALIDATOR",
    "aoutcome_and_response",
    "json_object",
    "outcome_and_response",
    "outcome_of",
    "stats_of",
]
