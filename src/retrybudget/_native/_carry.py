"""The outcome an object carries: a response's, an error's."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from ..core.outcome import Outcome
from ..errors import RetryBudgetError
from ._sdks import _wrapped

OUTCOME = "retrybudget.outcome"
"""Where the operation's :class:`~retrybudget.Outcome` is attached to the final response."""

OUTCOME_ATTRIBUTE = "retrybudget_outcome"
"""The attribute of a requests response (or a raised error) that holds the
:class:`~retrybudget.Outcome`."""


class Carried:
    """An outcome attached to an error raised again as it was; it stays behind when pickled."""

    __slots__ = ("outcome",)

    def __init__(self, outcome: Outcome[object] | None) -> None:
        self.outcome = outcome

    def __reduce__(self) -> tuple[Any, ...]:
        return (Carried, (None,))


def carry(error: BaseException, outcome: Outcome[Any]) -> None:
    """Attach ``outcome`` to ``error`` (``error.retrybudget_outcome``; not for a class without
    a ``__dict__``)."""
    with contextlib.suppress(AttributeError, TypeError):
        setattr(error, OUTCOME_ATTRIBUTE, Carried(outcome))


def outcome_of(response: object) -> Outcome[object] | None:
    """The :class:`~retrybudget.Outcome` of the operation that produced ``response`` (or raised
    it, for an error), or None.

    httpx and httpx2: ``response.extensions["retrybudget.outcome"]``; requests and aiohttp:
    ``response.retrybudget_outcome``. Every other ending of an operation carries it too: a
    :class:`~retrybudget.RetryBudgetError` as ``error.outcome``, an error raised again as it
    was (a bug, an invalid URL, an SDK's error that ended the operation) as
    ``error.retrybudget_outcome``, an SDK's error raised over a response a transport
    handed over (``anthropic.RateLimitError``, ``openai.APIStatusError``, githubkit's
    ``RequestFailed``…) by the response it carries, and an SDK's connection error raised
    from a transport's typed error (``APIConnectionError`` from ``TransportRetriesExhausted``)
    by that error.
    """
    if isinstance(response, RetryBudgetError):
        return response.outcome
    extensions = getattr(response, "extensions", None)
    found = extensions.get(OUTCOME) if isinstance(extensions, Mapping) else None
    if found is None:
        found = getattr(response, OUTCOME_ATTRIBUTE, None)
    if isinstance(found, Carried):
        found = found.outcome
    if found is None and isinstance(response, BaseException):
        carried = getattr(response, "response", None)  # the response an SDK's error holds
        if carried is not None and not isinstance(carried, BaseException):
            raw = getattr(carried, "raw_response", None)  # githubkit's wraps httpx's
            return outcome_of(raw if raw is not None else carried)
        cause = _wrapped(response)  # an SDK's connection error over a transport's typed one
        if cause is not None and (isinstance(cause, RetryBudgetError)
                                  or isinstance(_wrapped(cause), RetryBudgetError)):
            return outcome_of(cause if isinstance(cause, RetryBudgetError) else _wrapped(cause))
    return found if isinstance(found, Outcome) else None
