"""httpx transports that run every request as one bounded logical operation.

::

    import httpx
    import retrybudget as rb
    from retrybudget.integrations.httpx import RetryTransport

    transport = RetryTransport(retrier=rb.Retrier(policy=rb.interactive()))
    with httpx.Client(transport=transport, timeout=5.0) as client:
        response = client.get("https://api.example.com/rentals/1/availability")
        print(response.status_code, response.extensions["retrybudget"]["attempts"])

:class:`RetryTransport` and :class:`AsyncRetryTransport` wrap any inner transport
(``httpx.HTTPTransport()`` / ``httpx.AsyncHTTPTransport()`` by default). Each request is
one operation: its attempts, waits and per-attempt timeouts come out of one budget, and
the final response carries the operation's stats. The whole exchange of an attempt (connect,
status line, headers and any body the transport reads) ends at the attempt's absolute end:
every socket read and write of an ``httpx.HTTPTransport`` / ``httpx.AsyncHTTPTransport`` is
clipped to what is left, and over ``httpx.AsyncHTTPTransport`` each attempt's exchange runs
as a task of its own, cut at that end whatever it waits on (a connect deaf to its
cancellation, say); the async transport reads through any other inner transport under a
cancel scope. With no hook, audit sink or active coordinator, a request's first
attempt is sent before the operation is built; only an answer that is not a plain success
builds it (and goes on from that attempt). The client above follows redirects, so
each hop is an operation of its own. Outcomes with no response to hand over raise the integration's
:func:`~retrybudget.errors.error_family`: ``Transport`` and the error's name
(``TransportRateLimited``, ``TransportRetriesExhausted``…), each the
:class:`retrybudget.RetryBudgetError` of its reason and also ``httpx.TransportError``
(``httpx.TimeoutException`` for the deadline, ``httpx.ProtocolError`` for an invalid payload).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio
import httpx

from .. import errors
from .._drivers import PLAIN_OK, Begun, Retrier, gated_first
from .._native.httpx import httpx_evidence as _evidence
from .._native.httpx import httpx_evidence_of
from .._native.httpx import httpx_failure_kind as failure_kind
from ..core.actions import Attempt, AttemptResult, RequestInfo
from ..core.classify import ResponseSeen
from ..core.outcome import Outcome
from ..observe import log_hooks, logs_steps
from ._common import (
    JOB_ID,
    VALIDATOR,
    Described,
    Engine,
    Operation,
    UnreadShape,
    key_of_url,
    safe_url,
)
from ._deadline import _DEADLINE, Deadline, bounded
from ._front import Front, Wiring
from ._handed import carry, carry_unread
from ._httpx_io import Cut, bound_sockets, clipped, deadline_error, scoped, within
from ._httpx_lazy import AsyncLazy, Lazy, Sent, asend_gated, send_gated
from ._httpx_usage import awatch, watch
from ._tokens import acosted, costed, uncosted

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._front import Options

__all__ = [
    "ERRORS",
    "AsyncRetryTransport",
    "RetryTransport",
    "TransportCircuitOpen",
    "TransportDeadlineExceeded",
    "TransportInvalidPayload",
    "TransportNotFound",
    "TransportNotRetried",
    "TransportRateLimited",
    "TransportRejected",
    "TransportRetriesExhausted",
    "TransportRetryBudgetRefused",
    "TransportUnexpectedResponse",
    "failure_kind",
]

KeyFunction = Callable[[httpx.Request], str]
"""Names the provider key of a request (default: ``scheme://host[:port]``)."""

T = TypeVar("T", httpx.BaseTransport, httpx.AsyncBaseTransport)
R = TypeVar("R")

_TIMEOUTS = ("connect", "read", "write", "pool")

# httpx's own structures, read where they save work on every request: a URL's parsed parts
# (a provider key per scheme, host and port, without the URL's text) and a response's header
# list (copied as it came: the outcome reads its evidence later). Either missing (another
# httpx): the public API, by the generic path.
_PROBE = httpx.Response(200, headers=[("a", "b")], request=httpx.Request("GET", "http://a"))
_INTERNALS = (isinstance(getattr(_PROBE.headers, "_list", None), list)
              and hasattr(getattr(_PROBE.request.url, "_uri_reference", None), "host"))
del _PROBE


def _evidence_later(headers: list[tuple[bytes, bytes, bytes]]) -> tuple[tuple[str, str], ...]:
    """The classifier's headers of a response's header list copied when it came."""
    return httpx_evidence_of(headers)


_FAMILY = errors.error_family("Transport", __name__, httpx.TransportError,
                              deadline=httpx.TimeoutException, invalid_payload=httpx.ProtocolError)
TransportRateLimited = _FAMILY.rate_limited
TransportRetriesExhausted = _FAMILY.exhausted
TransportDeadlineExceeded = _FAMILY.deadline
TransportCircuitOpen = _FAMILY.circuit_open
TransportRetryBudgetRefused = _FAMILY.retry_budget
TransportNotRetried = _FAMILY.not_retried
TransportInvalidPayload = _FAMILY.invalid_payload
TransportRejected = _FAMILY.rejected
TransportNotFound = _FAMILY.not_found
TransportUnexpectedResponse = _FAMILY.unexpected
ERRORS = _FAMILY.table()
"""The error class the transports raise for each outcome reason (when no response is handed)."""


class _Operation(Operation):
    """An httpx request's operation: clips each attempt's timeouts through the extension."""

    __slots__ = ("extensions", "request")

    def __init__(self, engine: Engine, request: httpx.Request, key: KeyFunction | None,
                 known: str | None = None) -> None:
        extensions = request.extensions
        url = str(request.url)
        if known is None:
            known = key_of_url(url) if key is None else key(request)
        super().__init__(engine, request.method, url, request.headers, known,
                         extensions.get(VALIDATOR), extensions.get(JOB_ID))
        self.request = request
        self.extensions = extensions

    def begin(self, attempt: Attempt) -> httpx.Request:
        """The request for ``attempt``, each timeout at most what is left of the deadline."""
        self.request.extensions = clipped(self.extensions, attempt.timeout)
        self.count_retry(attempt)
        return self.request

    def hand_over(self, outcome: Outcome[object]) -> httpx.Response:
        """Restore the caller's extensions (a redirect reuses them) and finish."""
        self.request.extensions = self.extensions
        response: httpx.Response = self.finish(outcome, self.request)
        return response


class _Base(Front[httpx.Request], Generic[T]):
    """Construction shared by both transports; ``T`` is the inner transport's type."""

    _default_transport: Callable[[], T]
    _wiring = Wiring(ERRORS, failure_kind, carry, _evidence)

    def __init__(self, transport: T | None = None, *, retrier: Retrier | None = None,
                 **options: Unpack[Options[httpx.Request]]) -> None:
        self._transport: T = transport if transport is not None else self._default_transport()
        # httpx's own transports: every socket read and write ends by the attempt's end (the
        # async one also cuts each exchange there, see AsyncRetryTransport._within).
        self._sockets_bounded = bound_sockets(self._transport)
        Front.__init__(self, retrier, **options)
        # A 2xx may be handed over unread (_unread_of) with no token cost to make current
        self._unread_ok = _INTERNALS and uncosted(self._engine.retrier.coordinator)

    def _unread_of(self, request: httpx.Request) -> tuple[UnreadShape, str] | None:
        """The shape a request's 2xx is handed over unread in, and the request's key; or None:
        the request takes :meth:`_handle`'s path (a logger that prints sees every step; a
        payload validator reads every 2xx). Asked only when ``_unread_ok``: else a coordinator
        that may price requests in tokens has :func:`costed` make each one's cost current."""
        ref = request.url._uri_reference  # _shape(), inline: read on every request
        host = (ref.scheme, ref.host, ref.port)
        engine = self._engine
        key, unread = engine.shapes.get(host) or engine.shape(host, str(request.url))
        method = request.method
        if unread is None or method not in unread.methods or logs_steps():
            return None
        extensions = request.extensions
        if VALIDATOR in extensions and extensions[VALIDATOR] is not None and method != "HEAD":
            return None
        return unread, key if self._key is None else self._key(request)

    def _shape(self, request: httpx.Request) -> tuple[str, UnreadShape | None]:
        """:meth:`Engine.shape`'s, remembered by httpx's parsed URL parts (no URL text per
        request): the request's default key and unread shape."""
        ref = request.url._uri_reference
        host = (ref.scheme, ref.host, ref.port)
        engine = self._engine
        return engine.shapes.get(host) or engine.shape(host, str(request.url))

    def _start(self, request: httpx.Request, key: str | None = None) -> _Operation:
        return _Operation(self._engine, request, self._key, key)

    def _quick(self, request: httpx.Request) -> tuple[Retrier, str] | None:
        """The retrier and key of a request sent by a quick first attempt, or None.

        Quick: the engine's retrier takes the first-attempt fast path (no hook, no audit, a
        passive coordinator, one profile), and the request is sent as it came (no idempotency
        key to add, no payload validator, so no 2xx body is read).
        """
        engine = self._engine
        retrier = engine.quick
        method = request.method
        if log_hooks(()):
            return None  # a logger that prints sees every step: the generic path logs them
        if retrier is not None:
            if method not in engine.quick_methods:
                return None
            url = None
        elif engine.quick_routed:  # profile="auto": the host's profile decides
            url = str(request.url)
            retrier, methods = engine.quick_for(engine.policy.profile.resolve(url, request.headers))
            if retrier is None or method not in methods:
                return None
        else:
            return None
        if method != "HEAD" and request.extensions.get(VALIDATOR) is not None:
            return None
        if self._key is not None:
            return retrier, self._key(request)
        return retrier, key_of_url(str(request.url) if url is None else url)

    def _coordinated(self, request: httpx.Request) -> tuple[Retrier, RequestInfo] | None:
        """The retrier and request description of a request whose coordinated first attempt is
        sent as it came (:class:`_Lazy`), or None.

        As :meth:`_quick`: the retrier takes the coordinated first attempt (no hook, one
        profile) and the request gets nothing added (no idempotency key, no payload validator,
        no 2xx body read), so its :class:`RequestInfo` is what its :class:`_Operation` would
        describe.
        """
        found = self._coordinated_key(request)
        if found is None:
            return None
        return found[0], self._described(request, *found)

    def _coordinated_key(self, request: httpx.Request) -> tuple[Retrier, str] | None:
        """:meth:`_coordinated`'s retrier and the request's key, or None."""
        engine = self._engine
        retrier = engine.coordinated
        method = request.method
        if retrier is None or method not in engine.coordinated_methods or log_hooks(()):
            return None
        if method != "HEAD" and request.extensions.get(VALIDATOR) is not None:
            return None
        if self._key is not None:
            return retrier, self._key(request)
        if _INTERNALS:
            return retrier, self._shape(request)[0]
        return retrier, key_of_url(str(request.url))

    def _described(self, request: httpx.Request, retrier: Retrier, key: str) -> RequestInfo:
        """The :class:`RequestInfo` of a coordinated request sent as it came."""
        job_id = request.extensions.get(JOB_ID)
        return RequestInfo(
            request.method, key, False,
            safe_url(str(request.url)) if self._engine.coordinated_url else None,
            retrier.job_id if job_id is None else job_id)

    def _settle(self, key: str, request: httpx.Request, begun: Begun,
                response: httpx.Response | None, op: _Operation | None,
                result: AttemptResult | None) -> Outcome[object] | tuple[_Operation, AttemptResult]:
        """After a quick first attempt: the outcome of a plain success, else the operation and
        result the flow goes on from (:meth:`Begun.go_on`).

        ``result`` None is a 2xx nobody read the body of: only its headers are read (a 200
        without any classifies as the fast path worked out once). An attempt that did not end
        the operation ok goes on in the generic flow from the readings already taken: it is
        attempt 1, never sent again.
        """
        if result is None:
            assert response is not None  # noqa: S101 - a 2xx was seen
            headers = self._engine.headers(response)
            status = response.status_code
            seen = PLAIN_OK if status == 200 and not headers else ResponseSeen(status, headers)
            result = AttemptResult(seen, response, None)
        if op is None:
            job_id = request.extensions.get(JOB_ID)
            described: Described | RequestInfo = Described(
                request.method, key, self._engine.retrier.job_id if job_id is None else job_id)
        else:
            described = op.info
        outcome = begun.settle(described, result)
        if outcome is not None:
            return outcome
        return (self._start(request, key) if op is None else op), result


class RetryTransport(_Base[httpx.BaseTransport], httpx.BaseTransport):
    """A sync httpx transport: each request is one bounded, provider-aware operation.

    Args:
        transport: the transport that sends each attempt (default ``httpx.HTTPTransport()``).
        retrier: as for every integration (their shared base class :class:`Front`), and so
            are ``policy``, ``key``, ``generate_idempotency_keys`` and ``redirects_ok``.
    """

    _default_transport = httpx.HTTPTransport

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Run the request as one operation; return its final response or raise."""
        quick = self._unread_of(request) if self._unread_ok else None
        if quick is None:
            return self._handle(request)
        # The quick first attempt of _handle, a 2xx handed over unread.
        unread, key = quick
        begun = Begun(unread.retrier)
        if begun.refused:
            return self._planless(request, key, begun)
        plan = begun.timeout
        # httpx's own transport reads every socket against the attempt's end; no other
        # transport reads it (it gets the clipped timeouts).
        bound = self._sockets_bounded
        if bound:
            deadline = None if plan is None else Deadline(self._engine.clock, plan)
            token = _DEADLINE.set(deadline)
        try:
            sent = self._first(request, key, plan)
        finally:
            if bound:
                _DEADLINE.reset(token)
                if deadline is not None and deadline.alarms:
                    deadline.release()
        response = sent[0]
        if sent[1] is not None or response is None:  # no 2xx: the flow's if it goes on
            return self._go_on(request, key, begun, sent)
        return carry_unread(response, begun, _evidence_later, [*response.headers._list],
                            request.method, key, request.extensions.get(JOB_ID))

    @costed(watch)
    def _handle(self, request: httpx.Request) -> httpx.Response:
        """Run the request as one operation (a quick first attempt when it may take one; a
        coordinated one gated: no Operation built unless it goes on)."""
        if self._engine.coordinated is not None:  # no quick retrier: none is unread
            found = self._coordinated_key(request)
            if found is not None and gated_first(found[0]):
                return send_gated(self, request, *found)
        quick = self._quick(request)
        if quick is None:
            coordinated = self._coordinated(request)
            if coordinated is not None:  # the coordinated first attempt, no Operation yet
                lazy = Lazy(self, request, coordinated[1])
                return lazy.hand_over(coordinated[0].run(lazy, lazy.info))
            full = self._start(request)
            return full.hand_over(full.retrier.run(partial(self._attempt, full), full.info))
        # A quick first attempt: sent with its timeouts and deadline, no Operation built
        # unless the answer is not a plain success (then the flow goes on from it).
        retrier, key = quick
        begun = Begun(retrier)
        if begun.refused:
            return self._planless(request, key, begun)
        plan = begun.timeout
        with bounded(None if plan is None else Deadline(self._engine.clock, plan)):
            sent = self._first(request, key, plan)
        return self._go_on(request, key, begun, sent)

    def _planless(self, request: httpx.Request, key: str, begun: Begun) -> httpx.Response:
        """A quick first attempt the plan refused: the generic flow ends the operation."""
        full = self._start(request, key)
        return full.hand_over(begun.go_on(full.info, partial(self._attempt, full), None))

    def _go_on(self, request: httpx.Request, key: str, begun: Begun,
               sent: Sent) -> httpx.Response:
        """After a quick first attempt: its plain success handed over, or the flow gone on."""
        ended = self._settle(key, request, begun, *sent)
        if isinstance(ended, Outcome):
            assert sent[0] is not None  # noqa: S101 - an ok first attempt has its response
            return carry(sent[0], ended)
        full, result = ended
        return full.hand_over(begun.go_on(full.info, partial(self._attempt, full), result))

    def _first(self, request: httpx.Request, key: str, plan: float | None) -> Sent:
        """Send a quick first attempt (under its deadline): what :meth:`_settle` reads."""
        extensions = request.extensions
        response: httpx.Response | None = None
        try:
            request.extensions = clipped(extensions, plan)
            try:
                response = self._transport.handle_request(request)
            finally:
                request.extensions = extensions
        except Exception as exc:
            op = self._start(request, key)
            return response, op, op.failed(exc)
        if 200 <= response.status_code < 300:
            return response, None, None  # no 2xx body is read: its headers say the rest
        return self._other(request, key, plan, response)

    def _other(self, request: httpx.Request, key: str, plan: float | None,
               response: httpx.Response) -> Sent:
        """A quick first attempt answered with no 2xx: its body read if the profile reads it."""
        op = self._start(request, key)
        try:
            body = response.read() if op.wants_body(response, Attempt(1, plan)) else None
            return response, op, op.seen(response, body)
        except Exception as exc:
            return response, op, op.failed(exc)

    def _attempt(self, op: _Operation, attempt: Attempt) -> AttemptResult:
        try:
            with bounded(self._engine.deadline(attempt)):
                response = self._transport.handle_request(op.begin(attempt))
                body = response.read() if op.wants_body(response, attempt) else None
            return op.seen(response, body)
        except Exception as exc:
            return op.failed(exc)

    def close(self) -> None:
        """Close the inner transport."""
        self._transport.close()


class AsyncRetryTransport(_Base[httpx.AsyncBaseTransport], httpx.AsyncBaseTransport):
    """An async httpx transport: each request is one bounded, provider-aware operation.

    The same options and behaviour as :class:`RetryTransport`; waits use the clock's
    ``async_sleep`` and the coordinator's async methods.

    Args:
        transport: the transport that sends each attempt (default ``httpx.AsyncHTTPTransport()``).
        retrier: and the other options, as for :class:`RetryTransport`.
    """

    _default_transport = httpx.AsyncHTTPTransport

    def handle_async_request(
            self, request: httpx.Request) -> Coroutine[Any, Any, httpx.Response]:
        """Run the request as one operation; return its final response or raise (a coroutine:
        the request's own path, awaited by the caller directly)."""
        unread = self._unread_of(request) if self._unread_ok else None
        if unread is None:
            return self._handle(request)
        return self._quickly(request, unread[0].retrier, unread[1], True)

    @acosted(awatch)
    async def _handle(self, request: httpx.Request) -> httpx.Response:
        """Run the request as one operation (a quick first attempt when it may take one; a
        coordinated one gated: no Operation built unless it goes on)."""
        if self._engine.coordinated is not None:  # no quick retrier: none is unread
            found = self._coordinated_key(request)
            if found is not None and gated_first(found[0]):
                return await asend_gated(self, request, *found)
        quick = self._quick(request)
        if quick is None:
            coordinated = self._coordinated(request)
            if coordinated is not None:  # the coordinated first attempt, no Operation yet
                lazy = AsyncLazy(self, request, coordinated[1])
                return lazy.hand_over(await coordinated[0].arun(lazy, lazy.info))
            full = self._start(request)
            return full.hand_over(await full.retrier.arun(partial(self._attempt, full),
                                                          full.info))
        return await self._quickly(request, quick[0], quick[1], False)

    async def _quickly(self, request: httpx.Request, retrier: Retrier, key: str,
                       unread: bool) -> httpx.Response:
        """A quick first attempt, as in RetryTransport.handle_request (``unread``: a 2xx is
        handed over unread)."""
        begun = Begun(retrier)
        if begun.refused:
            full = self._start(request, key)
            return full.hand_over(await begun.ago_on(full.info, partial(self._attempt, full), None))
        sent = await self._bounded_first(request, key, begun.timeout, begun.attempt_started)
        response = sent[0]
        if unread and sent[1] is None and response is not None:
            return carry_unread(response, begun, _evidence_later, [*response.headers._list],
                            request.method, key, request.extensions.get(JOB_ID))
        ended = self._settle(key, request, begun, *sent)
        if isinstance(ended, Outcome):
            assert response is not None  # noqa: S101 - an ok first attempt has its response
            return carry(response, ended)
        full, result = ended
        return full.hand_over(await begun.ago_on(full.info, partial(self._attempt, full), result))

    def _bounded_first(self, request: httpx.Request, key: str, plan: float | None,
                       started: float) -> Awaitable[Sent]:
        """A quick first attempt sent and ended by its attempt's end (``plan`` seconds after
        ``started``, the attempt's start on the engine's clock): what :meth:`_settle` reads."""
        if plan is None:
            return self._first(request, key, plan)
        if self._sockets_bounded:
            return self._within_first(request, key, plan)
        return scoped(self._first(request, key, plan), self._engine.clock, started, plan,
                      self._cut_first, request, key)

    async def _within_first(self, request: httpx.Request, key: str, plan: float) -> Sent:
        """:meth:`_bounded_first` over httpx's own transport (see :func:`within`)."""
        deadline = Cut(self._engine.clock, plan)
        extensions = request.extensions
        sent = await within(self._first(request, key, plan), deadline, _sent)
        if sent is None:  # cut at the attempt's end: the caller's extensions are put back
            request.extensions = extensions
            op = self._start(request, key)
            sent = None, op, op.failed(deadline.error(request))
        return sent

    def _cut_first(self, request: httpx.Request, key: str) -> Sent:
        """A quick first attempt cancelled at its attempt's end."""
        op = self._start(request, key)
        return None, op, op.failed(deadline_error(request))

    async def _first(self, request: httpx.Request, key: str, plan: float | None) -> Sent:
        """Send a quick first attempt: what :meth:`_settle` reads (as the sync transport's)."""
        extensions = request.extensions
        response: httpx.Response | None = None
        op: _Operation | None = None
        try:
            request.extensions = narrowed = clipped(extensions, plan)
            try:
                response = await self._transport.handle_async_request(request)
            finally:
                if request.extensions is narrowed:  # not yet restored by a cut (see _within)
                    request.extensions = extensions
            if 200 <= response.status_code < 300:
                return response, None, None  # no 2xx body is read: its headers say the rest
            op = self._start(request, key)
            body = await response.aread() if op.wants_body(response, Attempt(1, plan)) else None
            return response, op, op.seen(response, body)
        except Exception as exc:
            if op is None:
                op = self._start(request, key)
            return response, op, op.failed(exc)
        except BaseException:  # cancelled at the attempt's end: release the connection
            if response is not None:
                with anyio.CancelScope(shield=True):
                    await response.aclose()
            raise

    async def _attempt(self, op: _Operation, attempt: Attempt) -> AttemptResult:
        timeout = attempt.timeout
        if timeout is None:
            return await self._exchange(op, attempt)
        if self._sockets_bounded:  # httpx's own transport
            deadline = Cut(self._engine.clock, timeout)
            result = await within(self._exchange(op, attempt), deadline, _response)
            if result is None:  # cut at the attempt's end
                return op.failed(deadline.error(op.request))
            return result
        # Any other inner transport: a cancel scope bounds the whole exchange.
        with anyio.move_on_after(timeout):
            return await self._exchange(op, attempt)
        return op.failed(deadline_error(op.request))  # cancelled at the attempt's end

    async def _exchange(self, op: _Operation, attempt: Attempt) -> AttemptResult:
        response: httpx.Response | None = None
        try:
            response = await self._transport.handle_async_request(op.begin(attempt))
            body = await response.aread() if op.wants_body(response, attempt) else None
            return op.seen(response, body)
        except Exception as exc:
            return op.failed(exc)
        except BaseException:  # cancelled at the attempt's end: release the connection
            if response is not None:
                with anyio.CancelScope(shield=True):
                    await response.aclose()
            raise

    async def aclose(self) -> None:
        """Close the inner transport."""
        await self._transport.aclose()


def _response(result: AttemptResult) -> object:
    return result.value


def _sent(sent: Sent) -> object:
    return sent[0]
