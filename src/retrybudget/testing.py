"""Test helpers: an in-process scripted provider, and the acceptance-fixture format.

:class:`ScriptedProvider` answers calls from a script in the format of the public
acceptance fixtures (``acceptance.json``). It uses the injected clock, so with a
:class:`FakeClock` a script with long delays runs in microseconds. It does no network I/O;
the sandbox provider (:mod:`retrybudget.sandbox`) serves the same scripts over HTTP.

This module is the face users import from. The format (the step parser :func:`parse_script`,
:class:`Step`, :class:`FixtureError`, the placeholder grammar :func:`expand_placeholders` and
the JSON check :func:`json_payload`) and the provider have one home, ``retrybudget._fixtures``,
below the sandbox and the acceptance cases that read them too.
"""

from __future__ import annotations

from ._fixtures import (
    FixtureError,
    ScriptedProvider,
    ScriptedResponse,
    Step,
    expand_placeholders,
    json_payload,
    parse_script,
)

__all__ = [
    "FixtureError",
    "ScriptedProvider",
    "ScriptedResponse",
    "Step",
    "expand_placeholders",
    "json_payload",
    "parse_script",
]
