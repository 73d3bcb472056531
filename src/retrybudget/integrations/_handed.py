"""A handed-over httpx response's extensions whose retrybudget entries (the stats and the
outcome) are built when first read: nobody who never asks pays for them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .._drivers import Begun
from .._native import OUTCOME
from ..core.outcome import FirstAttempt, Outcome, first_ok
from ._common import STATS

__all__ = ["carry", "carry_unread"]

R = TypeVar("R")

_ENTRIES = (STATS, OUTCOME)
_BUILDING = threading.Lock()
"""Held while a response's pending entries are built (rarely contended: the first read)."""


class _HandedExtensions(dict[str, Any]):
    """A handed-over response's extensions, whose two retrybudget entries (the stats dict and
    the outcome) are built the first time either is read, or the dict is read whole or
    changed; until then they hold what those are built from.

    A plain dict in everything but its type: every way of reading or changing one (``[]``,
    ``get``, ``in``, iteration, ``len``, ``keys``/``values``/``items``, ``==``, ``repr``,
    ``dict()``, ``{**...}``, ``|``, copy and pickle, which make a plain dict) builds them
    first, so each sees the same entries, in the same order, as a dict built at hand-over.
    httpx reads only its own entries (``http_version``, ``reason_phrase``), which build
    nothing: a response nobody asks about costs no stats dict and no outcome.
    """

    __slots__ = ("_pending",)
    _pending: Outcome[object] | FirstAttempt | None  # set by _carry, None once built

    def _build(self) -> None:
        if self._pending is None:
            return
        with _BUILDING:  # threads reading one response at once see one outcome, built once
            pending = self._pending
            if pending is not None:
                outcome = pending if isinstance(pending, Outcome) else first_ok(pending)
                dict.__setitem__(self, STATS, outcome.stats())
                dict.__setitem__(self, OUTCOME, outcome)
                self._pending = None  # last: a reader that sees None finds both entries

    def __missing__(self, key: str) -> Any:
        if self._pending is not None and key in _ENTRIES:
            self._build()
            return dict.__getitem__(self, key)
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        if self._pending is not None and key in _ENTRIES:
            self._build()
        return dict.get(self, key, default)

    def __contains__(self, key: object) -> bool:
        if self._pending is not None and key in _ENTRIES:
            return True
        return dict.__contains__(self, key)

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        self._build()
        return dict, (dict(self),)

    @classmethod
    def fromkeys(cls, iterable: Any, value: Any = None) -> dict[Any, Any]:
        return dict.fromkeys(iterable, value)


def _building(name: str) -> Callable[..., Any]:
    """``dict``'s method ``name``, after the pending entries are built."""
    method = getattr(dict, name)

    def built(self: _HandedExtensions, /, *args: Any, **kwargs: Any) -> Any:
        self._build()
        return method(self, *args, **kwargs)

    built.__name__ = built.__qualname__ = name
    return built


# dict's C code copies and merges a dict whose __iter__ is its own by its storage, anyone
# else's through keys(): so dict(), {**...}, copy() and | need nothing more than these.
for _name in ("__iter__", "__reversed__", "__len__", "__eq__", "__ne__", "__repr__", "__ior__",
              "__setitem__", "__delitem__", "keys", "values", "items", "pop", "popitem",
              "setdefault", "update", "clear"):
    setattr(_HandedExtensions, _name, _building(_name))


_set_pending = vars(_HandedExtensions)["_pending"].__set__


def carry(response: R, pending: Outcome[object] | FirstAttempt) -> R:
    """Hand ``response`` over with its operation's stats and outcome in its extensions (built
    when first read: :class:`_HandedExtensions`); every hand-over path's (the caller's request
    extensions were never changed)."""
    target: Any = response  # an httpx (or httpx2) response
    handed = _HandedExtensions(target.extensions)  # dict's own copy, no frame of ours
    _set_pending(handed, pending)
    target.extensions = handed
    return response


def carry_unread(response: R, begun: Begun, read: Callable[[Any], tuple[tuple[str, str], ...]],
                 headers: object, method: str, key: str, job_id: str | None) -> R:
    """:func:`carry` of a quick first attempt's 2xx handed over unread: what its outcome is
    built from is ``begun``'s :meth:`~retrybudget._drivers.Begun.unread` of it (``headers``, a
    snapshot of the response's, read by ``read`` when its evidence is)."""
    target: Any = response
    handed = _HandedExtensions(target.extensions)
    _set_pending(handed, begun.unread(response, target.status_code, read, headers, method, key,
                                      job_id))
    target.extensions = handed
    return response
