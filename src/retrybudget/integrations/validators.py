"""Payload validators for 2xx responses.

A validator is any callable that takes the response (or, for :meth:`Retrier.call`, the
returned value) and returns False or raises to reject the payload as invalid; the
operation then ends with ``invalid_payload`` and is not retried. Set one on the policy
(``Policy(validator=...)``) or, with httpx, per request in the
``"retrybudget.validator"`` extension.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["json_object"]


def _decode(payload: object) -> object:
    if isinstance(payload, (dict, list)):
        return payload
    if isinstance(payload, (str, bytes, bytearray)):
        return json.loads(payload)
    content = getattr(payload, "content", None)  # httpx and requests responses, once read
    if isinstance(content, (bytes, bytearray)):
        return json.loads(content)
    text = getattr(payload, "text", None)
    if isinstance(text, str):
        return json.loads(text)
    raise TypeError(f"cannot read a JSON payload from {type(payload).__name__}")


def json_object(required_keys: Iterable[str] = ()) -> Callable[[object], dict[str, Any]]:
    """A validator: the payload is a JSON object that has every key in ``required_keys``.

    Accepts a response (its ``content`` or ``text``), ``str``/``bytes`` JSON, or an already
    decoded ``dict``. Returns the decoded object; raises :class:`ValueError` (or
    :class:`TypeError`) otherwise.

    Args:
        required_keys: keys the object must have (their values are not checked).
    """
    keys = tuple(required_keys)
    if isinstance(required_keys, str):
        raise TypeError("required_keys must be a collection of keys, not one string")

    def validate(payload: object) -> dict[str, Any]:
        data = _decode(payload)
        if not isinstance(data, dict):
            raise ValueError("the payload is not a JSON object")  # noqa: TRY004 - a payload verdict
        missing = [k for k in keys if k not in data]
        if missing:
            raise ValueError(f"the payload lacks {', '.join(missing)}")
        return data

    validate.__qualname__ = validate.__name__ = f"json_object{keys!r}"
    return validate
