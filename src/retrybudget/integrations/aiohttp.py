"""An aiohttp client middleware that runs every request as one bounded logical operation.

::

    import aiohttp
    import retrybudget as rb
    from retrybudget.integrations.aiohttp import RetryMiddleware

    retry = RetryMiddleware(retrier=rb.Retrier(policy=rb.interactive()))
    async with aiohttp.ClientSession(middlewares=(retry,)) as session:
        async with session.get("https://api.example.com/rentals/1/availability") as response:
            print(response.status, response.retrybudget["attempts"])

:class:`RetryMiddleware` is an aiohttp client middleware (aiohttp 3.12 or later): each
request is one operation whose attempts, waits and per-attempt timeouts come out of one
budget, with the same rules, stats and outcome → caller mapping as the httpx transports and
the requests adapter. Each attempt (connect, head and, when it is read, the body) is cut at
what is left of the deadline. The session above follows redirects, so each hop is an
operation of its own. List it last among a session's middlewares: the ones before it see
the operation once, the handler after it sees every attempt.

The final response carries the operation's stats and outcome as attributes
(``response.retrybudget``, ``response.retrybudget_outcome``; or
:func:`retrybudget.integrations.stats_of` / :func:`~retrybudget.integrations.outcome_of`).
Outcomes with no response to hand over raise the integration's
:func:`~retrybudget.errors.error_family`: ``Middleware`` and the error's name
(``MiddlewareRateLimited``, ``MiddlewareRetriesExhausted``…), each the
:class:`retrybudget.RetryBudgetError` of its reason and also ``aiohttp.ClientConnectionError``
(``aiohttp.ServerTimeoutError`` for the deadline, ``aiohttp.ClientPayloadError`` for an invalid payload).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import aiohttp
from aiohttp import ClientRequest, ClientResponse
from aiohttp.client_middlewares import ClientHandlerType

from .. import errors
from .._drivers import Begun
from .._native import evidence
from .._native.aiohttp import aiohttp_failure_kind as failure_kind
from ..core.actions import Attempt, AttemptResult
from ..core.outcome import Outcome, first_ok
from ._aiohttp_usage import payload_bytes, watch
from ._common import (
    OUTCOME_ATTRIBUTE,
    STATS_ATTRIBUTE,
    Operation,
    key_of_url,
)
from ._front import Front, Wiring
from ._tokens import begin_costs, token_config

__all__ = [
    "MiddlewareCircuitOpen",
    "MiddlewareDeadlineExceeded",
    "MiddlewareInvalidPayload",
    "MiddlewareNotFound",
    "MiddlewareNotRetried",
    "MiddlewareRateLimited",
    "MiddlewareRejected",
    "MiddlewareRetriesExhausted",
    "MiddlewareRetryBudgetRefused",
    "MiddlewareUnexpectedResponse",
    "RetryMiddleware",
    "failure_kind",
]

KeyFunction = Callable[[ClientRequest], str]
"""Names the provider key of a request (default: ``scheme://host[:port]``)."""


_FAMILY = errors.error_family("Middleware", __name__, aiohttp.ClientConnectionError,
                              deadline=aiohttp.ServerTimeoutError, invalid_payload=aiohttp.ClientPayloadError)
MiddlewareRateLimited = _FAMILY.rate_limited
MiddlewareRetriesExhausted = _FAMILY.exhausted
MiddlewareDeadlineExceeded = _FAMILY.deadline
MiddlewareCircuitOpen = _FAMILY.circuit_open
MiddlewareRetryBudgetRefused = _FAMILY.retry_budget
MiddlewareNotRetried = _FAMILY.not_retried
MiddlewareInvalidPayload = _FAMILY.invalid_payload
MiddlewareRejected = _FAMILY.rejected
MiddlewareNotFound = _FAMILY.not_found
MiddlewareUnexpectedResponse = _FAMILY.unexpected
_ERRORS = _FAMILY.table()


def _attach(response: ClientResponse, outcome: Outcome[object]) -> None:
    setattr(response, STATS_ATTRIBUTE, outcome.stats())
    setattr(response, OUTCOME_ATTRIBUTE, outcome)


@dataclass(slots=True)
class _Read:
    """What the shared code and validators read of an aiohttp response: its status, headers
    and, once read, its body as bytes and text (aiohttp's own are coroutines)."""

    response: ClientResponse
    status_code: int
    content: bytes = b""

    @property
    def headers(self) -> Any:
        return self.response.headers

    @property
    def text(self) -> str:
        return self.content.decode(self.response.get_encoding(), "replace")


def _evidence(view: _Read) -> tuple[tuple[str, str], ...]:
    return _evidence_later(view.response.headers)


def _evidence_later(headers: Any) -> tuple[tuple[str, str], ...]:
    """The classifier's headers of a response's (read-only) headers."""
    return evidence([(name.lower(), value) for name, value in headers.items()])


def _quota_headers(view: _Read) -> Any:
    return view.response.headers


def _read_body(view: _Read) -> bytes | None:
    return view.content or None


def _default_key(request: ClientRequest) -> str:
    return key_of_url(str(request.url))


class RetryMiddleware(Front[ClientRequest]):
    """An aiohttp client middleware: each request is one bounded, provider-aware operation.

    It takes the options every integration takes (their shared base class :class:`Front`):
    ``retrier``, ``policy``, ``key``, ``generate_idempotency_keys`` and ``redirects_ok``.
    """

    _wiring = Wiring(_ERRORS, failure_kind, _attach, _evidence, _default_key,
                     _quota_headers, _read_body)
    _key: KeyFunction

    async def __call__(self, request: ClientRequest, handler: ClientHandlerType) -> ClientResponse:
        """Run the request as one operation; return its final response or raise."""
        tokens = token_config(self)
        if tokens is not None:  # token pacing: the request's cost current while it runs
            costs = begin_costs(tokens, request.method.upper(), str(request.url),
                                partial(payload_bytes, request.body), watch)
            if costs is not None:
                with costs:
                    return costs.hand(await self._operate(request, handler))
        return await self._operate(request, handler)

    async def _operate(self, request: ClientRequest, handler: ClientHandlerType
                       ) -> ClientResponse:
        """:meth:`__call__`'s operation."""
        method = request.method.upper()
        url = str(request.url)
        quick = self._engine.unread_of(url, method)
        if quick is None:
            return await self._call(request, handler, method, url)
        # A quick first attempt: sent before the operation is built, and a 2xx handed over
        # with its outcome built from the readings, its headers read when its evidence is.
        unread, host = quick
        key = host if self._key is _default_key else self._key(request)
        begun = Begun(unread.retrier)
        if begun.refused:
            return await self._call(request, handler, method, url, (key, begun, None))
        plan = begun.timeout
        op: Operation | None = None
        try:
            exchange = self._first(request, handler, method, url, key, plan)
            response, op, result = await (exchange if plan is None
                                          else asyncio.wait_for(exchange, plan))
        except Exception as exc:
            op = Operation(self._engine, method, url, request.headers, key)
            result = op.failed(exc)
        if op is None:
            outcome = first_ok(begun.unread(response, response.status, _evidence_later,
                                            response.headers, method, key, None))
            _attach(response, outcome)
            return response
        return await self._call(request, handler, method, url, (key, begun, result), op)

    async def _first(self, request: ClientRequest, handler: ClientHandlerType, method: str,
                     url: str, key: str, plan: float | None,
                     ) -> tuple[ClientResponse, Operation | None, AttemptResult | None]:
        """A quick first attempt: a 2xx as it came, any other answer read as an attempt is."""
        response = await handler(request)
        if 200 <= response.status < 300:
            return response, None, None  # no 2xx body is read: its headers say the rest
        op = Operation(self._engine, method, url, request.headers, key)
        return response, op, await self._read(op, response, Attempt(1, plan))

    async def _call(self, request: ClientRequest, handler: ClientHandlerType, method: str,
                    url: str, first: tuple[str, Begun, AttemptResult | None] | None = None,
                    op: Operation | None = None) -> ClientResponse:
        """The operation in the generic flow; after a quick ``first`` attempt (its key, its
        readings and its result: None when its plan refused it), from that attempt on."""
        if op is None:
            op = Operation(self._engine, method, url, request.headers,
                           self._key(request) if first is None else first[0])
        perform = partial(self._attempt, op, request, handler)
        if first is None:
            outcome = await op.retrier.arun(perform, op.info)
        else:  # the next step after the quick first attempt
            outcome = await first[1].ago_on(op.info, perform, first[2])
        response: ClientResponse = op.finish(outcome, request)
        return response

    async def _attempt(self, op: Operation, request: ClientRequest, handler: ClientHandlerType,
                       attempt: Attempt) -> AttemptResult:
        try:
            if attempt.timeout is None:
                return await self._exchange(op, request, handler, attempt)
            return await asyncio.wait_for(self._exchange(op, request, handler, attempt),
                                          attempt.timeout)
        except Exception as exc:
            return op.failed(exc)

    @classmethod
    async def _exchange(cls, op: Operation, request: ClientRequest, handler: ClientHandlerType,
                        attempt: Attempt) -> AttemptResult:
        """One attempt: send, and read the body now when the shared rules want it read."""
        return await cls._read(op, await handler(request), attempt)

    @staticmethod
    async def _read(op: Operation, response: ClientResponse, attempt: Attempt) -> AttemptResult:
        """An attempt's response, its body read now when the shared rules want it read."""
        view = _Read(response, response.status)
        body: bytes | None = None
        if op.wants_body(view, attempt):
            try:
                body = await response.read()
            except BaseException:
                response.close()
                raise
            view = _Read(response, response.status, body)
        result = op.seen(view, body)
        result.value = response
        return result
