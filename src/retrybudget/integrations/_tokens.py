"""Token pacing at the integrations: a request's cost made current while it runs, and each
attempt's answer recorded on it (:class:`~retrybudget.coordination.TokenCall`).

An integration's ``handle_request`` is wrapped by :func:`costed` (or :func:`acosted`): the
request's cost, from the coordinator's :class:`~retrybudget.coordination.TokenConfig`, is
current for the operation, and :func:`record_answers` has the engine record every answer's
quota headers on it as it reads them, before the coordinator learns the attempt.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..coordination import begin_request, current_call, end_request, may_cost

__all__ = ["acosted", "costed", "record_answers"]

S = TypeVar("S")
R = TypeVar("R")


def _begin(transport: Any, request: Any) -> Any:
    config = getattr(transport._engine.retrier.coordinator, "config", None)
    tokens = getattr(config, "tokens", None)
    if tokens is None or not may_cost(tokens, request.method):
        return None  # costs nothing: its URL and body are not read
    return begin_request(tokens, request.method, str(request.url), lambda: request.content)


def costed(handle: Callable[[S, Any], R]) -> Callable[[S, Any], R]:
    """A sync transport's ``handle_request``, run with the request's cost current."""

    @functools.wraps(handle)
    def run(self: S, request: Any) -> R:
        token = _begin(self, request)
        if token is None:
            return handle(self, request)
        try:
            return handle(self, request)
        finally:
            end_request(token)

    return run


def acosted(handle: Callable[[S, Any], Coroutine[Any, Any, R]]
            ) -> Callable[[S, Any], Coroutine[Any, Any, R]]:
    """An async transport's ``handle_async_request``, run with the request's cost current."""

    @functools.wraps(handle)
    async def run(self: S, request: Any) -> R:
        token = _begin(self, request)
        if token is None:
            return await handle(self, request)
        try:
            return await handle(self, request)
        finally:
            end_request(token)

    return run


def record_answers(engine: Any) -> None:
    """Have ``engine`` record each answer whose headers it reads on the operation's token
    call, when it has one (the status, the quota headers, at the engine's wall time)."""
    headers_of = engine.headers

    def read(response: Any) -> Any:
        call = current_call()
        if call is not None:
            call.record(response.status_code, response.headers.multi_items(), engine.clock.wall())
        return headers_of(response)

    engine.headers = read
