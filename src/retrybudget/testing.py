"""Test helpers: an in-process scripted provider, and the acceptance-fixture format.

:class:`ScriptedProvider` answers calls from a script in the format of the public
acceptance fixtures (``acceptance.json``). It uses the injected clock, so with a
:class:`FakeClock` a script with long delays runs in microseconds. It does no network I/O;
the sandbox provider (:mod:`retrybudget.sandbox`) serves the same scripts over HTTP.

This module is the face users import from. The format has one home,
:mod:`retrybudget.acceptance.fixtures` (the step parser :func:`parse_script`, :class:`Step`,
:class:`FixtureError`, the placeholder grammar :func:`expand_placeholders` and the JSON check
:func:`json_payload`), and the provider lives in :mod:`retrybudget.acceptance.provider`.
"""

from __future__ import annotations

from .acceptance.fixtures import (
    FixtureError,
    Step,
    expand_placeholders,
    json_payload,
    parse_script,
)
from .acceptance.provider import ScriptedProvider, ScriptedResponse

__all__ = [
    "FixtureError",
    "ScriptedProvider",
    "ScriptedResponse",
    "Step",
    "expand_placeholders",
    "json_payload",
    "parse_script",
]
