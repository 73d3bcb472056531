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

from ..coordination import (
    TokenCall,
    TokenConfig,
    begin_request,
    current_call,
    end_request,
    may_cost,
)
from ..core.tokens import TokenUsage

__all__ = ["Watch", "acosted", "begin_costs", "costed", "record_answers", "token_config",
           "uncosted"]

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


def token_config(transport: Any) -> TokenConfig | None:
    """The token pacing of an integration's coordinator (None: none)."""
    config = getattr(transport._engine.retrier.coordinator, "config", None)
    tokens: TokenConfig | None = getattr(config, "tokens", None)
    return tokens


def begin_costs(tokens: TokenConfig, method: str, url: str, body: Callable[[], bytes],
                watch: Watch) -> _Costed | None:
    """The request's cost made current (unless one is declared), or None: the request costs
    nothing (it runs as it came). Run the request inside the :class:`_Costed` and hand its
    response over through :meth:`_Costed.hand`."""
    token, call = begin_request(tokens, method, url, body)
    return None if call is None else _Costed(token, call, watch)


def _begin(transport: Any, request: Any, watch: Watch) -> _Costed | None:
    """An httpx request's costs (as :func:`begin_costs`), or None: no token pacing, or none.
    On every httpx request's path, so in as few calls as :func:`token_config` and
    :func:`begin_costs` take apart."""
    config = getattr(transport._engine.retrier.coordinator, "config", None)
    tokens: TokenConfig | None = getattr(config, "tokens", None)
    if tokens is None or not may_cost(tokens, request.method):
        return None  # costs nothing: its URL and body are not read
    token, call = begin_request(tokens, request.method, str(request.url), lambda: request.content)
    return None if call is None else _Costed(token, call, watch)


def uncosted(coordinator: object) -> bool:
    """Whether no request run under ``coordinator`` is given a token cost (it has no
    configuration to name one: a passive coordinator's), so :func:`costed` would add nothing."""
    return not hasattr(coordinator, "config")


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


def _multi_items(response: Any) -> Any:
    return response.headers.multi_items()


def record_answers(engine: Any, pairs: Callable[[Any], Any] | None = None,
                   body: Callable[[Any], object] | None = None) -> None:
    """Have ``engine`` record each answer whose headers it reads on the operation's token
    call, when it has one (the status, the quota headers ``pairs`` reads (default: httpx's
    ``multi_items()``), at the engine's wall time, and the body ``body`` gives when it was read
    already: its usage)."""
    headers_of = engine.headers
    pairs = pairs or _multi_items

    def read(response: Any) -> Any:
        call = current_call()
        if call is not None:
            call.record(response.status_code, pairs(response), engine.clock.wall(),
                        None if body is None else body(response))
        return headers_of(response)

    engine.headers = read
