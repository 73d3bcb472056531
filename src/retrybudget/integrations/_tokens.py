"""Token pacing at the integrations: a request's cost made current while it runs, and each
attempt's answer recorded on it (:class:`~retrybudget.coordination.TokenCall`).

An integration's ``handle_request`` is wrapped by :func:`costed` (or :func:`acosted`): the
request's cost, from the coordinator's :class:`~retrybudget.coordination.TokenConfig`, is
current for the operation, and :func:`record_answers` has the engine record every answer's
quota headers on it as it reads them, before the coordinator learns the attempt. A 2xx
learned before its body was read is handed over watched (the integration's ``watch``): the
usage its body states corrects the charge once the caller has read it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..coordination import TokenCall, TokenConfig, begin_request, current_call, end_request
from ..core.tokens import TokenUsage

__all__ = ["acosted", "costed", "record_answers"]

S = TypeVar("S")
R = TypeVar("R")


Watch = Callable[[Any, Callable[[TokenUsage], None]], None]
"""Has a response's usage, once the caller has read its body, given to a late correction."""


class _Costed:
    """A request that costs tokens, its cost current while it runs (a context manager)."""

    __slots__ = ("call", "token", "watch")

    def __init__(self, token: Any, call: TokenCall, watch: Watch) -> None:
        self.token, self.call, self.watch = token, call, watch

    def __enter__(self) -> _Costed:
        return self

    def __exit__(self, *_: object) -> None:
        if self.token is not None:
            end_request(self.token)

    def hand(self, response: R) -> R:
        """The response handed over, its body watched when the coordinator left a late
        correction (a 2xx learned before its usage was read)."""
        call = self.call
        late = call.late
        if late is not None:
            call.late = None  # this response's: a later operation under the call sets its own
            self.watch(response, late)
        return response


def _begin(transport: Any, request: Any, watch: Watch) -> _Costed | None:
    """The request's cost made current (unless one is declared), or None: no token pacing,
    or the request costs nothing (it runs as it came)."""
    config = getattr(transport._engine.retrier.coordinator, "config", None)
    tokens: TokenConfig | None = getattr(config, "tokens", None)
    if tokens is None:
        return None
    token, call = begin_request(tokens, request.method, str(request.url), lambda: request.content)
    return None if call is None else _Costed(token, call, watch)


def costed(watch: Watch) -> Callable[[Callable[[S, Any], R]], Callable[[S, Any], R]]:
    """A sync transport's ``handle_request``, run with the request's cost current; the
    response's usage read by ``watch`` as the caller reads its body."""

    def wrap(handle: Callable[[S, Any], R]) -> Callable[[S, Any], R]:
        @functools.wraps(handle)
        def run(self: S, request: Any) -> R:
            costs = _begin(self, request, watch)
            if costs is None:
                return handle(self, request)
            with costs:
                return costs.hand(handle(self, request))

        return run

    return wrap


def acosted(watch: Watch) -> Callable[[Callable[[S, Any], Coroutine[Any, Any, R]]],
                                      Callable[[S, Any], Coroutine[Any, Any, R]]]:
    """An async transport's ``handle_async_request``, as :func:`costed`."""

    def wrap(handle: Callable[[S, Any], Coroutine[Any, Any, R]]
             ) -> Callable[[S, Any], Coroutine[Any, Any, R]]:
        @functools.wraps(handle)
        async def run(self: S, request: Any) -> R:
            costs = _begin(self, request, watch)
            if costs is None:
                return await handle(self, request)
            with costs:
                return costs.hand(await handle(self, request))

        return run

    return wrap


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
