"""The acceptance-fixture format and the in-process scripted provider, below every user.

The format (:func:`parse_script`, :class:`Step`, :class:`FixtureError`, the placeholder
grammar :func:`expand_placeholders`, the JSON check :func:`json_payload` and
:func:`load_fixture_file`) has one home, :mod:`._format`; the in-process
:class:`ScriptedProvider` lives in :mod:`._provider`. The HTTP sandbox, the acceptance cases
and :mod:`retrybudget.testing` (the face users import them from) all read them here, so the
sandbox never reads the acceptance package, and acceptance may use the sandbox.
"""

from . import _format, _provider
from ._format import *  # noqa: F403 - the format, as its __all__ names it
from ._provider import *  # noqa: F403 - the provider, as its __all__ names it

__all__ = _format.__all__ + _provider.__all__
