"""An HTTP library's exception read as the observation it stands for, by the library it
comes from.

A library's reader is found by name: the exception's top-level module names this package's
module of the same name (``retrybudget._native.httpx`` for an ``httpx`` exception), whose
``read`` it is. Adding a library is adding that module; nothing here lists them.
"""

from __future__ import annotations

import importlib

from ..core.classify import Observation
from ..errors import RetryBudgetError
from ._sdks import _SDKS, _response_seen, _sdk
from ._shared import Reader, method_of


def observe_error(error: BaseException) -> Observation | None:
    """The observation an HTTP library's exception stands for, or None if it is none of theirs.

    The library is found from the module of each class in the exception's MRO, so a user's
    subclass of ``httpx.HTTPStatusError`` is read like the original. The library's own
    errors are never imported here before one of them is seen.
    """
    if isinstance(error, RetryBudgetError):
        return None  # an inner operation already decided: not a provider failure to read
    readers = _READERS
    for cls in type(error).__mro__:
        top = cls.__module__.partition(".")[0]
        reader = readers[top] if top in readers else _find(top)
        if reader is not None:
            return reader(error)
    # anyone's error that carries an HTTP library's response is that response
    response = getattr(error, "response", None)
    return None if response is None else _response_seen(response, method_of(error))


def _sdk_error(error: BaseException) -> Observation | None:
    """An official SDK's error (:func:`._sdks._sdk`), the transport error it wraps read as any."""
    return _sdk(error, observe_error)


def _find(top: str) -> Reader | None:
    """The reader of the library whose top-level module is ``top`` (``read`` of this package's
    module of that name), or None when it has none; remembered either way."""
    reader: Reader | None = None
    if top.isidentifier() and not top.startswith("_"):
        name = f"{__package__}.{top}"
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as missing:
            if missing.name != name:
                raise  # the library's reader is there but breaks: not to be hidden
        else:
            reader = getattr(module, "read", None)
    _READERS[top] = reader
    return reader


_READERS: dict[str, Reader | None] = dict.fromkeys(_SDKS, _sdk_error)
"""Top-level module of an exception class → the reader of that library's exceptions (None:
no reader), filled as each is first seen; the official SDKs' from :mod:`._sdks`."""
