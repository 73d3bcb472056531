"""What the gateway answers: per-operation counters, JSON problems and stored-fact views.

Every answer carries the counters of the one logical operation behind it, in the body and
in ``X-Retrybudget-*`` headers. Failures are JSON problems (RFC 9457,
``application/problem+json``) whose ``code`` is stable: for provider outcomes it is the
code of :data:`~retrybudget.gateway.GATEWAY_MAPPING`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from starlette.responses import JSONResponse

from ..core.outcome import Outcome, Reason
from ..observe import redact_text
from ._store import StoredFact

__all__ = [
    "PROBLEM_TYPE",
    "TITLES",
    "Answer",
    "counters",
    "json_answer",
    "problem",
    "retry_after",
    "stored_view",
]

PROBLEM_TYPE = "urn:retrybudget:gateway:problem:"
"""The prefix of every problem's ``type``; the problem's ``code`` follows it."""

TITLES: Mapping[str, str] = {
    "not_found": "The provider has no such rental",
    "provider_rate_limited": "The provider is rate limiting this gateway",
    "provider_unavailable": "The provider is unavailable",
    "provider_rejected": "The provider rejected the gateway's request",
    "provider_unexpected": "The provider answered outside its contract",
    "provider_invalid_payload": "The provider's answer failed validation",
    "invalid_rental_id": "The rental id is not valid",
    "invalid_request_body": "The request body is not a JSON object",
    "idempotency_key_required": "A reservation needs a usable Idempotency-Key",
    "idempotency_key_conflict": "The Idempotency-Key was used for another request",
    "reservation_in_progress": "A reservation with this Idempotency-Key is in progress",
    "reservation_declined": "The provider declined the reservation",
    "reservation_not_stored": "The confirmed reservation could not be stored",
    "gateway_overloaded": "The gateway is overloaded",
    "request_timeout": "The request head did not arrive in time",
    "internal_error": "The gateway failed",
}
"""The title of each problem code."""

_MAX_HINT = 86_400


@dataclass(slots=True)
class Answer:
    """A handler's response plus what the gateway logs and counts about it.

    Attributes:
        response: what the caller gets.
        code: the problem code, or None for a success.
        outcome: the provider operation's outcome, None when none was made.
        fields: more fields for the log line (rental id, replay…).
    """

    response: JSONResponse
    code: str | None = None
    outcome: Outcome[Any] | None = None
    fields: dict[str, Any] = field(default_factory=dict)


def counters(outcome: Outcome[Any] | None, logical: str,
             reason: Reason | None = None) -> dict[str, Any]:
    """The counters of one logical operation (all zero when none reached the provider).

    Args:
        outcome: the provider operation's outcome, or None when the gateway answered alone.
        logical: the name of the logical count (``"logical_lookups"``…), always 1.
        reason: the outcome to report when the gateway judged it (a 3xx the library passed
            as final is ``unexpected`` here); default the outcome's own.
    """
    if outcome is None:
        return {logical: 1, "operation_id": None, "attempts": 0, "waits": 0, "waited_s": 0.0,
                "outcome": None}
    return {
        logical: 1,
        "operation_id": outcome.operation_id,
        "attempts": outcome.attempts,
        "waits": len(outcome.waits),
        "waited_s": round(outcome.waited, 6),
        "outcome": (reason or outcome.reason).value,
    }


def _headers(counted: Mapping[str, Any], extra: Mapping[str, str] | None) -> dict[str, str]:
    headers = {
        "Cache-Control": "no-store",
        "X-Retrybudget-Attempts": str(counted["attempts"]),
        "X-Retrybudget-Waits": str(counted["waits"]),
        "X-Retrybudget-Outcome": counted["outcome"] or "none",
    }
    if counted["operation_id"]:
        headers["X-Retrybudget-Operation-Id"] = counted["operation_id"]
    return {**headers, **(extra or {})}


def json_answer(status: int, body: Mapping[str, Any], counted: Mapping[str, Any], *,
                headers: Mapping[str, str] | None = None,
                media_type: str = "application/json") -> JSONResponse:
    """A JSON response with the counters merged into the body and mirrored in headers."""
    return JSONResponse({**body, **counted}, status, _headers(counted, headers),
                        media_type=media_type)


def problem(status: int, code: str, detail: str, counted: Mapping[str, Any], *,
            instance: str, extra: Mapping[str, Any] | None = None,
            headers: Mapping[str, str] | None = None, redact: bool = True) -> JSONResponse:
    """A JSON problem: ``type``, ``title``, ``status``, ``detail``, ``instance``, ``code``,
    the counters and ``extra`` fields. ``detail`` is redacted before it is sent, unless
    ``redact`` is False (a constant of the gateway's own, which quotes nothing)."""
    body = {
        "type": PROBLEM_TYPE + code,
        "title": TITLES.get(code, code),
        "status": status,
        "detail": redact_text(detail) if redact else detail,
        "instance": instance,
        "code": code,
        **(extra or {}),
    }
    return json_answer(status, body, counted, headers=headers,
                       media_type="application/problem+json")


def retry_after(retry_at: float | None, now: float) -> str | None:
    """A ``Retry-After`` value (whole seconds, at least 1) for the epoch time ``retry_at``."""
    if retry_at is None or not math.isfinite(retry_at):
        return None
    return str(min(_MAX_HINT, max(1, math.ceil(retry_at - now))))


def stored_view(fact: StoredFact | None, now: float) -> dict[str, Any] | None:
    """A stored fact as a failure answer shows it: labelled, dated, never as live availability.

    The stored value is named ``available_when_confirmed`` so that no failure answer carries
    an ``available`` field.
    """
    if fact is None:
        return None
    confirmed = datetime.fromtimestamp(fact.confirmed_at, tz=timezone.utc)
    return {
        "rental_id": fact.rental_id,
        "available_when_confirmed": fact.available,
        "confirmed_at": fact.confirmed_at,
        "confirmed_at_iso": confirmed.isoformat().replace("+00:00", "Z"),
        "age_s": round(max(0.0, now - fact.confirmed_at), 3),
        "source": fact.source,
        "provider_checked_at": fact.provider_checked_at,
        "note": "the last availability the provider confirmed; stored, not live",
    }
