"""Integrations with HTTP client libraries: each request sent through one is a bounded,
provider-aware operation.

Each library has a module of its own, named as the library
(:mod:`retrybudget.integrations.httpx` serves httpx) and importing it, so import the one you
use; docs/http.md shows each. A transport, adapter or middleware builds on one base class,
``Front`` (the options every integration takes, its engine and its retrier), and takes its
library's failure kinds and headers from the library's reader in ``retrybudget._native``.

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
