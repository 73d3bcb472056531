"""The acceptance-fixture format and the in-process scripted provider, below every user.

The format (:func:`parse_script`, :class:`Step`, :class:`FixtureError`, the placeholder
grammar :func:`expand_placeholders`, the JSON check :func:`json_payload` and
:func:`load_fixture_file`) has one home, :mod:`._format`; the in-process
:class:`ScriptedProvider` lives in :mod:`._provider`. The HTTP sandbox, the acceptance cases
and :mod:`retrybudget.testing` (the face users import them from) all read them here, so the
sandbox never reads the acceptance package, and acceptance may use the sandbox.
"""

from ._format import (
    FixtureError,
    Step,
    expand_placeholders,
    json_payload,
    load_fixture_file,
    parse_script,
    resolve_placeholders,
)
from ._provider import ScriptedProvider, ScriptedResponse

__all__ = [
    "FixtureError",
    "ScriptedProvider",
    "ScriptedResponse",
    "Step",
    "expand_placeholders",
    "json_payload",
    "load_fixture_file",
    "parse_script",
    "resolve_placeholders",
]
