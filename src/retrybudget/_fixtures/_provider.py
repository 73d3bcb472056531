"""The in-process scripted provider: answers calls from a script, on the injected clock.

:class:`ScriptedProvider` answers from a script in the acceptance-fixture format
(``retrybudget._fixtures``, which the HTTP sandbox reads too). With a
:class:`~retrybudget.FakeClock` a script with long delays runs in microseconds; it does no
network I/O. Users import it from :mod:`retrybudget.testing`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._clock import SYSTEM_CLOCK, Clock
from .._drivers import attempt_timeout
from ._format import expand_placeholders, parse_script

__all__ = ["ScriptedProvider", "ScriptedResponse"]


@dataclass(frozen=True, slots=True)
class ScriptedResponse:
    """A response in the shape HTTP clients give: ``status_code``, ``headers``, ``text``."""

    status_code: int
    headers: Mapping[str, str] = field(default_factory=dict)
    text: str = ""

    def json(self) -> Any:
        """Decode the body as JSON (raises :class:`ValueError` when it is not)."""
        return json.loads(self.text)


class ScriptedProvider:
    """A callable provider that answers from a script, one step per call.

    Past the end of the script the last step repeats. Every call is logged in
    :attr:`requests` with its arrival time (wall clock) and what was served.

    Args:
        script: the steps, in the acceptance fixture format.
        clock: the clock to read and sleep on.

    Raises:
        FixtureError: the script is not in the format (:func:`parse_script`).
    """

    def __init__(self, script: Sequence[Mapping[str, Any]], clock: Clock = SYSTEM_CLOCK) -> None:
        self._script = parse_script(script)
        self._clock = clock
        self.requests: list[dict[str, Any]] = []

    def __call__(self, method: str = "GET") -> ScriptedResponse:
        """Answer the next step (raising :class:`ConnectionResetError` for a reset)."""
        index = min(len(self.requests), len(self._script) - 1)
        step = self._script[index]
        arrival = self._clock.wall()
        entry: dict[str, Any] = {"method": method, "arrival": arrival, "status": None}
        self.requests.append(entry)
        if step.delay_s > 0:
            timeout = attempt_timeout()
            if timeout is not None and step.delay_s > timeout:
                self._clock.sleep(timeout)
                raise TimeoutError(f"no answer within {timeout:.3f}s")
            self._clock.sleep(step.delay_s)
        if step.reset:
            raise ConnectionResetError("connection reset by peer")
        wall = self._clock.wall()
        headers = {name: expand_placeholders(value, wall) for name, value in step.headers}
        entry["status"] = step.status
        return ScriptedResponse(step.status, headers, step.text)

    @property
    def count(self) -> int:
        """How many requests the provider saw."""
        return len(self.requests)
