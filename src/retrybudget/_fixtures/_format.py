"""The acceptance-fixture format, defined once for the in-process and the HTTP provider.

A script is a non-empty list of steps; a step is either a response::

    {"status": 429, "headers": {"Retry-After": "{httpdate+2}"}, "body": {...},
     "body_text": "...", "delay_s": 0.5}

(every key optional but at most one of ``body`` / ``body_text``; ``status`` defaults to
200; a step with neither answers an empty body, :attr:`Step.text`) or a reset,
``{"reset": true}`` (optionally with ``delay_s``): the connection is closed without any
HTTP response. :func:`parse_script` checks a script and raises
:class:`FixtureError` for anything else; header values may hold the placeholders of
:func:`expand_placeholders`, resolved against the provider's wall clock when the step is
answered (after its delay). :func:`json_payload` is the JSON check of the acceptance cases,
and :func:`load_fixture_file` reads a file of scripts for the sandbox.

The in-process :class:`~retrybudget.testing.ScriptedProvider`, the HTTP sandbox
(:mod:`retrybudget.sandbox`) and the acceptance cases all read scripts through this module,
and nothing else defines the format.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..integrations.validators import json_object

__all__ = [
    "FixtureError",
    "Step",
    "expand_placeholders",
    "json_payload",
    "load_fixture_file",
    "parse_script",
    "resolve_placeholders",
]

_RESPONSE_KEYS = frozenset({"status", "headers", "body", "body_text", "delay_s", "reset"})
_RESET_KEYS = frozenset({"reset", "delay_s"})
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_FORBIDDEN_HEADERS = frozenset({"content-length", "transfer-encoding"})
_MAX_DELAY_S = 3600.0


class FixtureError(ValueError):
    """A fixture script (or fixture file) is not in the acceptance-fixture format."""


@dataclass(frozen=True, slots=True)
class Step:
    """One parsed script step: a response to send, or a connection reset.

    Attributes:
        status: the response status (ignored for a reset).
        headers: response headers, values possibly holding placeholders.
        body: the JSON body, meaningful only when ``has_body`` is true.
        has_body: whether the step has a JSON ``body`` (which may be ``null``).
        body_text: a raw text body sent as is, or ``None``.
        delay_s: seconds to wait before answering (or resetting).
        reset: close the connection without an HTTP response.
    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: Any = None
    has_body: bool = False
    body_text: str | None = None
    delay_s: float = 0.0
    reset: bool = False

    @property
    def text(self) -> str:
        """The body the step answers, in process and over HTTP alike: its ``body`` as compact
        JSON, its ``body_text`` as is, or an empty body for a step with neither."""
        if self.body_text is not None:
            return self.body_text
        if not self.has_body:
            return ""
        return json.dumps(self.body, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _parse_delay(raw: object, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise FixtureError(f"{where}: delay_s must be a number")
    delay = float(raw)
    if not (math.isfinite(delay) and 0.0 <= delay <= _MAX_DELAY_S):
        raise FixtureError(f"{where}: delay_s must be between 0 and {_MAX_DELAY_S:g}")
    return delay


def _parse_headers(raw: object, where: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, Mapping):
        raise FixtureError(f"{where}: headers must be an object of name -> value")
    headers: list[tuple[str, str]] = []
    for name, value in raw.items():
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise FixtureError(f"{where}: invalid header name {name!r}")
        if name.lower() in _FORBIDDEN_HEADERS:
            raise FixtureError(f"{where}: {name} is computed by the server and cannot be scripted")
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise FixtureError(f"{where}: header {name} must have a string value")
        text = str(value)
        if any(ch in text for ch in "\r\n\0"):
            raise FixtureError(f"{where}: header {name} holds a line break or NUL")
        try:
            text.encode("latin-1")
        except UnicodeEncodeError:
            raise FixtureError(f"{where}: header {name} is not Latin-1 text") from None
        headers.append((name, text))
    return tuple(headers)


def _parse_step(raw: object, index: int) -> Step:
    where = f"step {index}"
    if not isinstance(raw, Mapping):
        raise FixtureError(f"{where}: a step must be an object")
    unknown = set(raw) - _RESPONSE_KEYS
    if unknown:
        raise FixtureError(f"{where}: unknown keys {sorted(map(str, unknown))}")
    delay = _parse_delay(raw["delay_s"], where) if "delay_s" in raw else 0.0
    reset = raw.get("reset", False)
    if not isinstance(reset, bool):
        raise FixtureError(f"{where}: reset must be true or false")
    if reset:
        extra = set(raw) - _RESET_KEYS
        if extra:
            raise FixtureError(f"{where}: a reset step has no {sorted(map(str, extra))}")
        return Step(reset=True, delay_s=delay)
    status = raw.get("status", 200)
    if isinstance(status, bool) or not isinstance(status, int) or not 200 <= status <= 599:
        raise FixtureError(f"{where}: status must be an integer from 200 to 599")
    headers = _parse_headers(raw.get("headers", {}), where)
    if "body" in raw and "body_text" in raw:
        raise FixtureError(f"{where}: give body or body_text, not both")
    body_text = raw.get("body_text")
    if body_text is not None and not isinstance(body_text, str):
        raise FixtureError(f"{where}: body_text must be a string")
    has_body = "body" in raw
    if (has_body or body_text) and status in (204, 304):
        raise FixtureError(f"{where}: a {status} response has no body")
    body = raw.get("body")
    if has_body:
        try:
            json.dumps(body, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise FixtureError(f"{where}: body is not JSON: {exc}") from None
    return Step(
        status=status,
        headers=headers,
        body=body,
        has_body=has_body,
        body_text=body_text,
        delay_s=delay,
    )


def parse_script(raw: object) -> tuple[Step, ...]:
    """Parse a script (a non-empty list of steps), raising :class:`FixtureError` if invalid."""
    if isinstance(raw, str | bytes) or not isinstance(raw, Sequence):
        raise FixtureError("a script must be a list of steps")
    if not raw:
        raise FixtureError("a script needs at least one step")
    return tuple(_parse_step(step, index) for index, step in enumerate(raw))


_PLACEHOLDER = re.compile(r"\{(epoch|httpdate)(?:([+-])(-?\d{1,12}(?:\.\d{1,9})?))?\}")


def expand_placeholders(value: str, wall: float) -> str:
    """Resolve the fixture format's placeholders in a header value, at wall-clock ``wall``.

    The one grammar of the format, for the in-process provider and the HTTP sandbox alike:
    ``{epoch+N}`` is ``wall`` in whole epoch seconds plus ``N``; ``{httpdate+N}`` is the same
    instant as an IMF-fixdate HTTP-date. ``N`` is a number of seconds (up to 12 digits, and
    up to 9 decimals) and may be negative (``{epoch-5}`` or ``{epoch+-5}``); a fractional
    result is truncated to whole seconds; ``{epoch}`` means ``N = 0``. Anything else in
    braces is kept as written.
    """
    base = math.floor(wall)

    def sub(match: re.Match[str]) -> str:
        kind, sign, number = match.group(1), match.group(2), match.group(3)
        offset = float(number) if number is not None else 0.0
        instant = int(base + (-offset if sign == "-" else offset))
        if kind == "epoch":
            return str(instant)
        return email.utils.formatdate(float(instant), usegmt=True)

    return _PLACEHOLDER.sub(sub, value)


resolve_placeholders = expand_placeholders
"""The sandbox's name for :func:`expand_placeholders` (the same function)."""


_JSON_OBJECT = json_object()


def json_payload(response: object) -> object:
    """A validator: the payload must be a JSON object (raises when it is not).

    The library's one JSON validator, :func:`retrybudget.integrations.json_object` with no
    required key, for the in-process provider's responses and the sandbox's alike.
    """
    return _JSON_OBJECT(response)


def load_fixture_file(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """Read a fixture file and return ``{fixture id: script}``, every script validated.

    The file is either in the acceptance-fixture format (an object whose ``"cases"``
    list holds objects with ``"id"`` and ``"script"``) or a plain object mapping
    fixture ids to scripts.

    Raises:
        FixtureError: the file is not JSON or not in either format.
        OSError: the file cannot be read.
    """
    text = Path(path).read_text(encoding="utf-8")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FixtureError(f"{path}: not JSON: {exc}") from None
    scripts: dict[str, list[dict[str, Any]]] = {}
    if isinstance(document, dict) and isinstance(document.get("cases"), list):
        for position, case in enumerate(document["cases"]):
            if not isinstance(case, dict) or not isinstance(case.get("id"), str):
                raise FixtureError(f"{path}: case {position} has no string id")
            scripts[case["id"]] = case.get("script")  # type: ignore[assignment]  # checked below
    elif isinstance(document, dict):
        scripts = dict(document)
    else:
        raise FixtureError(f"{path}: expected an object with 'cases' or a map of scripts")
    for fixture_id, script in scripts.items():
        _check_script(path, fixture_id, script)
    return scripts


def _check_script(path: str | Path, fixture_id: str, script: object) -> None:
    try:
        parse_script(script)
    except FixtureError as exc:
        raise FixtureError(f"{path}: fixture {fixture_id!r}: {exc}") from None
