"""Provider profiles: how each provider signals rate limits and failures, as data.

A :class:`Profile` is a frozen value. Derive your own from an existing one with
:meth:`Profile.derive` instead of touching internals::

    internal = GENERIC.derive("internal", transient=GENERIC.transient | {500})

The figures come from each provider's published documentation and the
behaviour of its official SDK.

The package's modules, bottom up: ``_model`` (what a profile is, and the generic one),
``_builtins`` (the built-in profiles, the data table), ``_lookup`` (by name, or per request
host: ``auto``) and ``_from_data`` (a profile file's tables).
"""

from __future__ import annotations

from .._dialect import QuotaFamily
from ._builtins import *  # noqa: F403 - each provider's entry, by its constant's name
from ._builtins import _PROVIDER_NAMES, PROFILES, PROVIDERS
from ._from_data import PROFILE_KEYS as PROFILE_KEYS
from ._from_data import profile_changes as profile_changes
from ._from_data import profile_from_mapping as profile_from_mapping
from ._lookup import AUTO, auto, get_profile
from ._model import BODY_KINDS, GENERIC, BodySignal, Profile
from ._model import BODY_LIMIT as BODY_LIMIT
from ._model import SCOPES as SCOPES
from ._model import WRITE_METHODS as WRITE_METHODS

__all__ = [
    "AUTO",
    "BODY_KINDS",
    "GENERIC",
    "PROFILES",
    "PROVIDERS",
    "BodySignal",
    "Profile",
    "QuotaFamily",
    "auto",
    "get_profile",
]
__all__.extend(_PROVIDER_NAMES)  # GITHUB, STRIPE…: each built-in provider's profile, by its entry
