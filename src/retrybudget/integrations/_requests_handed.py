"""A requests response handed over by the adapter's quick first attempt, whose retrybudget
attributes (the stats and the outcome) are built when first read: nobody who never asks pays
for them, and the response and its outcome make no reference cycle until someone does (a
cycle leaves a response to the garbage collector, which then walks it)."""

from __future__ import annotations

from typing import Any

import requests

from ..core.outcome import FirstAttempt, first_ok
from ._common import OUTCOME_ATTRIBUTE, STATS_ATTRIBUTE

__all__ = ["hand_unread"]

_PENDING = "_retrybudget_pending"
_ENTRIES = (STATS_ATTRIBUTE, OUTCOME_ATTRIBUTE)


def _build(response: Any, name: str) -> bool:
    """Build ``response``'s pending attributes (those not set since); False: none pending.

    Threads reading one response at once may each build an outcome: the first stored is
    everyone's (``setdefault``), and the stats, equal whoever built them, likewise.
    """
    if name not in _ENTRIES:
        return False
    state = response.__dict__
    pending: FirstAttempt | None = state.get(_PENDING)
    if pending is None:
        return False
    pending.value = response  # the outcome holds its response from now on (as it came)
    outcome = first_ok(pending)
    state.setdefault(OUTCOME_ATTRIBUTE, outcome)
    state.setdefault(STATS_ATTRIBUTE, outcome.stats())
    state.pop(_PENDING, None)  # last: a reader that finds it gone finds both attributes
    return True


class Response(requests.Response):
    """A ``requests.Response`` in everything but its type: its ``retrybudget`` stats and
    ``retrybudget_outcome`` are built the first time either is read (or deleted), as equal
    to what a hand-over that built them at once would have set. It pickles and copies as a
    plain ``requests.Response`` (whose pickle never kept them)."""

    def __getattr__(self, name: str) -> Any:
        if _build(self, name):
            return self.__dict__[name]
        raise AttributeError(f"'Response' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        _build(self, name)
        super().__delattr__(name)

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        # made as pickle makes a plain one: not initialised, then its state set
        return object.__new__, (requests.Response,), self.__getstate__()


def hand_unread(response: requests.Response, pending: FirstAttempt) -> requests.Response:
    """Hand ``response`` (a plain ``requests.Response``) over with its stats and outcome built
    from ``pending`` (a quick first attempt's readings, its ``value`` not set: the response)
    when first read; a response of another class gets them at once."""
    if type(response) is not requests.Response:  # a subclass of someone else's: keep it
        pending.value = response
        outcome = first_ok(pending)
        setattr(response, STATS_ATTRIBUTE, outcome.stats())
        setattr(response, OUTCOME_ATTRIBUTE, outcome)
        return response
    response.__class__ = Response
    response.__dict__[_PENDING] = pending
    return response
