"""An HTTP library's exception read as the observation it stands for, by the library it
comes from."""

from __future__ import annotations

from ..core.classify import Observation
from ..errors import RetryBudgetError
from ._aiohttp import _aiohttp
from ._httpx import _httpx
from ._requests import _requests
from ._sdks import _SDKS, _response_seen, _sdk
from ._shared import Reader, method_of
from ._stdlib import _urllib
from ._urllib3 import _urllib3


def observe_error(error: BaseException) -> Observation | None:
    """The observation an HTTP library's exception stands for, or None if it is none of theirs.

    The library is found from the module of each class in the exception's MRO, so a user's
    subclass of ``httpx.HTTPStatusError`` is read like the original. The library's own
    errors are never imported here before one of them is seen.
    """
    if isinstance(error, RetryBudgetError):
        return None  # an inner operation already decided: not a provider failure to read
    for cls in type(error).__mro__:
        reader = _READERS.get(cls.__module__.partition(".")[0])
        if reader is not None:
            return reader(error)
    # anyone's error that carries an HTTP library's response is that response
    response = getattr(error, "response", None)
    return None if response is None else _response_seen(response, method_of(error))


def _sdk_error(error: BaseException) -> Observation | None:
    """An official SDK's error (:func:`._sdks._sdk`), the transport error it wraps read as any."""
    return _sdk(error, observe_error)


_READERS: dict[str, Reader] = {
    "httpx": _httpx,
    "httpx2": _httpx,
    "requests": _requests,
    "urllib3": _urllib3,
    "aiohttp": _aiohttp,
    "urllib": _urllib,
    **dict.fromkeys(_SDKS, _sdk_error),
}
"""Top-level module of an exception class → the reader of that library's exceptions."""
