"""An in-process scripted provider, for tests and the offline demo.

:class:`ScriptedProvider` answers calls from a script in the format of the public
acceptance fixtures (``acceptance.json``): each step is a response
``{status, headers, body, body_text, delay_s}`` or ``{"reset": true}`` (the
connection drops). It uses the injected clock, so with a :class:`FakeClock` a
script with long delays runs in microseconds. It does no network I/O; the
sandbox provider (:mod:`retrybudget.sandbox`) serves the same scripts over HTTP, with the
placeholder grammar defined here (:func:`expand_placeholders`).
"""

from __future__ import annotations

import email.utils
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._clock import SYSTEM_CLOCK, Clock
from ._drivers import attempt_timeout
from .integrations.validators import json_object

__all__ = ["ScriptedProvider", "ScriptedResponse", "expand_placeholders", "json_payload"]

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


@dataclass(frozen=True, slots=True)
class ScriptedResponse:
    """A response in the shape HTTP clients give: ``status_code``, ``headers``, ``text``."""

    status_code: int
    headers: Mapping[str, str] = field(default_factory=dict)
    text: str = ""

    def json(self) -> Any:
        """Decode the body as JSON (raises :class:`ValueError` when it is not)."""
        return json.loads(self.text)


_JSON_OBJECT = json_object()


def json_payload(response: object) -> object:
    """A validator: the payload must be a JSON object (raises when it is not).

    The library's one JSON validator, :func:`retrybudget.integrations.json_object` with no
    required key, for the in-process provider's responses and the sandbox's alike.
    """
    return _JSON_OBJECT(response)


class ScriptedProvider:
    """A callable provider that answers from a script, one step per call.

    Past the end of the script the last step repeats. Every call is logged in
    :attr:`requests` with its arrival time (wall clock) and what was served.

    Args:
        script: the steps, in the acceptance fixture format.
        clock: the clock to read and sleep on.
    """

    def __init__(self, script: Sequence[Mapping[str, Any]], clock: Clock = SYSTEM_CLOCK) -> None:
        if not script:
            raise ValueError("a script needs at least one step")
        self._script = [dict(step) for step in script]
        self._clock = clock
        self.requests: list[dict[str, Any]] = []

    def __call__(self, method: str = "GET") -> ScriptedResponse:
        """Answer the next step (raising :class:`ConnectionResetError` for a reset)."""
        index = min(len(self.requests), len(self._script) - 1)
        step = self._script[index]
        arrival = self._clock.wall()
        entry: dict[str, Any] = {"method": method, "arrival": arrival, "status": None}
        self.requests.append(entry)
        delay = float(step.get("delay_s", 0) or 0)
        if delay > 0:
            timeout = attempt_timeout()
            if timeout is not None and delay > timeout:
                self._clock.sleep(timeout)
                raise TimeoutError(f"no answer within {timeout:.3f}s")
            self._clock.sleep(delay)
        if step.get("reset"):
            raise ConnectionResetError("connection reset by peer")
        wall = self._clock.wall()
        headers = {
            str(k): expand_placeholders(str(v), wall) for k, v in (step.get("headers") or {}).items()
        }
        text = str(step["body_text"]) if "body_text" in step else json.dumps(step.get("body", {}))
        entry["status"] = int(step.get("status", 200))
        return ScriptedResponse(entry["status"], headers, text)

    @property
    def count(self) -> int:
        """How many requests the provider saw."""
        return len(self.requests)
