"""What an outcome says about the provider's health (what the breaker counts)."""

from __future__ import annotations

import enum
from typing import Any

from ...core.classify import Kind
from ...core.outcome import Outcome, Reason


class Health(str, enum.Enum):
    """What one finished operation tells the breaker."""

    SUCCESS = "success"
    FAILURE = "failure"
    NEUTRAL = "neutral"


def health(outcome: Outcome[Any]) -> Health:
    """Classify a finished operation for the breaker.

    A failure is an outcome whose reason is a provider-health failure (exhausted, deadline,
    unexpected: :attr:`Reason.is_provider_failure`), or an operation the shared retry budget
    cut short right after a transient failure (a 503, a timeout): in an outage the budget
    runs dry first, and those operations are the outage's failed operations. Operations that
    never reached the provider (0 attempts), breaker refusals, and operations cut short by
    our own rules otherwise (a retry budget refusal after anything else, a write not
    replayed) say nothing either way. Everything else (ok, not_found, rejected, rate_limited,
    invalid_payload) shows a provider that answers.
    """
    if outcome.reason.is_provider_failure and outcome.attempts > 0:
        return Health.FAILURE
    if (outcome.reason is Reason.RETRY_BUDGET and outcome.history
            and outcome.history[-1].kind is Kind.TRANSIENT):
        return Health.FAILURE
    if outcome.attempts == 0 or outcome.reason.neutral:
        return Health.NEUTRAL
    return Health.SUCCESS
