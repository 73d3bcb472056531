"""What the gateway accepts from the provider, and from its own callers.

A provider payload is read into a frozen value or refused with :class:`ValueError`; the
same function serves as the request's payload validator (so a refused payload ends the
operation as ``invalid_payload``, never retried) and reads the payload the gateway then
stores and answers with.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = [
    "RENTAL_ID",
    "Availability",
    "Reservation",
    "idempotency_key_problem",
    "read_availability",
    "read_reservation",
]

RENTAL_ID = re.compile(r"^[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,63}$")
"""Rental ids the gateway accepts: URL-safe without encoding, no leading dot."""

_MAX_PAYLOAD = 64 * 1024
_MAX_KEY = 255


@dataclass(frozen=True, slots=True)
class Availability:
    """An availability the provider just confirmed.

    Attributes:
        rental_id: the rental, as the gateway names it.
        available: what the provider said.
        checked_at: the provider's own timestamp of the check (epoch seconds), if it gave one.
    """

    rental_id: str
    available: bool
    checked_at: float | None


@dataclass(frozen=True, slots=True)
class Reservation:
    """A reservation answer from the provider.

    Attributes:
        rental_id: the rental, as the gateway names it.
        reserved: whether the provider says the reservation is made.
        reservation_id: the provider's id of the reservation (set when ``reserved``).
    """

    rental_id: str
    reserved: bool
    reservation_id: str | None


def _object(response: Any) -> dict[str, Any]:
    content = getattr(response, "content", b"")
    if not isinstance(content, (bytes, bytearray)) or len(content) > _MAX_PAYLOAD:
        raise ValueError("the payload is missing or too large")
    try:
        data = json.loads(content)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError("the payload is not JSON") from None
    if not isinstance(data, dict):
        raise ValueError("the payload is not a JSON object")  # noqa: TRY004 - a payload verdict
    return data


def _confirmation(response: Any, rental_id: str, flag: str) -> tuple[dict[str, Any], bool]:
    """The payload object and its boolean ``flag``, for ``rental_id`` (else ValueError)."""
    data = _object(response)
    got = data.get("rental_id")
    if isinstance(got, bool) or not isinstance(got, (int, str)) or str(got) != rental_id:
        raise ValueError("the payload names another rental, or none")
    value = data.get(flag)
    if not isinstance(value, bool):
        raise ValueError(f"the payload has no boolean {flag!r}")  # noqa: TRY004 - a verdict
    return data, value


def read_availability(response: Any, rental_id: str) -> Availability:
    """Read a lookup's 2xx payload: a JSON object with ``rental_id`` and a boolean ``available``.

    ``checked_at``, when present, must be a finite number (or null).

    Raises:
        ValueError: the payload does not confirm an availability for ``rental_id``.
    """
    data, available = _confirmation(response, rental_id, "available")
    checked = data.get("checked_at")
    if checked is not None and (isinstance(checked, bool) or not isinstance(checked, (int, float))
                                or not math.isfinite(checked)):
        raise ValueError("the payload's 'checked_at' is not a timestamp")
    return Availability(rental_id, available, None if checked is None else float(checked))


def read_reservation(response: Any, rental_id: str) -> Reservation:
    """Read a reservation's 2xx payload: ``rental_id``, a boolean ``reserved`` and, when
    reserved, a non-empty string ``reservation_id``.

    Raises:
        ValueError: the payload neither confirms nor declines a reservation of ``rental_id``.
    """
    data, reserved = _confirmation(response, rental_id, "reserved")
    reservation_id = data.get("reservation_id")
    if reserved and (not isinstance(reservation_id, str) or not 0 < len(reservation_id) <= 200):
        raise ValueError("a confirmed reservation has no 'reservation_id'")
    return Reservation(rental_id, reserved, reservation_id if reserved else None)


def idempotency_key_problem(key: str | None) -> str:
    """Why an ``Idempotency-Key`` header value is unusable, or "" when it is fine."""
    if key is None or not key.strip():
        return "the Idempotency-Key header is required for a reservation"
    if len(key) > _MAX_KEY or not key.isprintable() or not key.isascii():
        return f"the Idempotency-Key must be at most {_MAX_KEY} printable ASCII characters"
    return ""
