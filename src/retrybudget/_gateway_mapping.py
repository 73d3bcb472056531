"""What the reference gateway answers for each outcome reason: an HTTP status and a code.

The table belongs to the gateway (users read it as :data:`retrybudget.gateway.GATEWAY_MAPPING`).
It lives in this small module, which needs no extra, so that the acceptance judge checks a
case's ``gateway_status`` and ``gateway_code`` against the same table without the server
extras, and the core holds no HTTP answer.
"""

from __future__ import annotations

from .core.outcome import Reason

__all__ = ["GATEWAY_MAPPING"]

GATEWAY_MAPPING: dict[Reason, tuple[int, str | None]] = {
    Reason.OK: (200, None),
    Reason.NOT_FOUND: (404, "not_found"),
    Reason.RATE_LIMITED: (503, "provider_rate_limited"),
    Reason.EXHAUSTED: (503, "provider_unavailable"),
    Reason.DEADLINE: (503, "provider_unavailable"),
    Reason.CIRCUIT_OPEN: (503, "provider_unavailable"),
    Reason.RETRY_BUDGET: (503, "provider_unavailable"),
    Reason.REJECTED: (502, "provider_rejected"),
    Reason.UNEXPECTED: (502, "provider_unexpected"),
    Reason.INVALID_PAYLOAD: (502, "provider_invalid_payload"),
    Reason.NOT_RETRIED: (503, "provider_unavailable"),
}
"""The HTTP status and problem code a gateway answers for each reason."""
