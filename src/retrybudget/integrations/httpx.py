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
each hop is an operation of its own. Outcomes with no response to hand over raise the
errors below, which are both :class:`retrybudget.RetryBudgetError` and httpx errors::

    TransportRateLimited         RateLimited + httpx.TransportError
    TransportRetriesExhausted    RetriesExhausted + httpx.TransportError
    TransportDeadlineExceeded    DeadlineExceeded + httpx.TimeoutException
    TransportCircuitOpen         CircuitOpen + httpx.TransportError
    TransportRetryBudgetRefused  RetryBudgetRefused + httpx.TransportError
    TransportNotRetried          NotRetried + httpx.TransportError
    TransportInvalidPayload      InvalidPayload + httpx.ProtocolError
    TransportRejected            Rejected + httpx.TransportError (not raised: a response exists)
    TransportNotFound            NotFound + httpx.TransportError (not raised: a response exists)
    TransportUnexpectedResponse  UnexpectedResponse + httpx.TransportError (not raised)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, Generic, TypeVar

import anyio
import httpcore
import httpx

from .. import errors
from .._clock import Clock
from .._drivers import PLAIN_OK, Begun, Retrier
from .._native import httpx_evidence as _evidence
from .._native import httpx_evidence_of
from .._native import httpx_failure_kind as failure_kind
from ..core.actions import Attempt, AttemptResult, RequestInfo
from ..core.classify import ResponseSeen
from ..core.outcome import FirstAttempt, Outcome, Reason, first_ok
from ..core.policy import Policy
from ..observe import log_hooks, logs_steps
from ._common import (
    _DEADLINE,
    JOB_ID,
    OUTCOME,
    STATS,
    VALIDATOR,
    Deadline,
    Described,
    Engine,
    Operation,
    UnreadShape,
    bounded,
    current_deadline,
    key_of_url,
    safe_url,
)

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
    return httpx_evidence_of([(raw, value) for raw, _lower, value in headers])


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


def _carry(response: httpx.Response, pending: Outcome[object] | FirstAttempt) -> httpx.Response:
    """Hand ``response`` over with its operation's stats and outcome in its extensions (built
    when first read: :class:`_HandedExtensions`); every hand-over path's (the caller's request
    extensions were never changed)."""
    handed = _HandedExtensions(response.extensions)  # dict's own copy, no frame of ours
    _set_pending(handed, pending)
    response.extensions = handed
    return response


def _clip(timeout: float | None, error: type[Exception]) -> float | None:
    """A socket operation's timeout cut to the running attempt's end; ``error`` once it passed."""
    deadline = _DEADLINE.get()  # current_deadline(), read at every socket operation
    return timeout if deadline is None else deadline.clip(timeout, error)


class _BoundedStream(httpcore.NetworkStream):
    """A connection whose every read and write ends by the attempt's absolute end.

    httpcore reads a response in many socket reads, each with the same read timeout; a
    trickle keeps each one short. Cutting each read to what is left bounds the sum.
    """

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream
        # httpcore asks these of every exchange: the stream's own, without a frame of ours
        self.get_extra_info = stream.get_extra_info  # type: ignore[method-assign]

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        deadline = _DEADLINE.get()  # _clip(), inline: every read and write reads it
        if deadline is not None:
            timeout = deadline.clip(timeout, httpcore.ReadTimeout)
        return self._stream.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        deadline = _DEADLINE.get()
        if deadline is not None:
            timeout = deadline.clip(timeout, httpcore.WriteTimeout)
        self._stream.write(buffer, timeout)

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _BoundedStream(self._stream.start_tls(
            ssl_context, server_hostname, _clip(timeout, httpcore.ConnectTimeout)))


class _BoundedBackend(httpcore.NetworkBackend):
    """httpcore's network backend with every connection bounded by the attempt's end."""

    def __init__(self, backend: httpcore.NetworkBackend) -> None:
        self._backend = backend

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None, socket_options: Any = None,
                    ) -> httpcore.NetworkStream:
        return _BoundedStream(self._backend.connect_tcp(
            host, port, _clip(timeout, httpcore.ConnectTimeout), local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> httpcore.NetworkStream:
        return _BoundedStream(self._backend.connect_unix_socket(
            path, _clip(timeout, httpcore.ConnectTimeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


class _BoundedAsyncStream(httpcore.AsyncNetworkStream):
    """The async twin of :class:`_BoundedStream`."""

    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self._stream = stream

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109 - httpcore's
        return await self._stream.read(max_bytes, _clip(timeout, httpcore.ReadTimeout))

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109 - httpcore's
        deadline = current_deadline()
        if isinstance(deadline, _Cut):
            deadline.sent = True
        await self._stream.write(buffer, _clip(timeout, httpcore.WriteTimeout))

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:  # noqa: ASYNC109 - httpcore's
        return _BoundedAsyncStream(await self._stream.start_tls(
            ssl_context, server_hostname, _clip(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _BoundedAsyncBackend(httpcore.AsyncNetworkBackend):
    """The async twin of :class:`_BoundedBackend`."""

    def __init__(self, backend: httpcore.AsyncNetworkBackend) -> None:
        self._backend = backend

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,  # noqa: ASYNC109 - httpcore's
                          local_address: str | None = None, socket_options: Any = None,
                          ) -> httpcore.AsyncNetworkStream:
        return _BoundedAsyncStream(await self._backend.connect_tcp(
            host, port, _clip(timeout, httpcore.ConnectTimeout), local_address, socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,  # noqa: ASYNC109 - httpcore's
                                  socket_options: Any = None) -> httpcore.AsyncNetworkStream:
        return _BoundedAsyncStream(await self._backend.connect_unix_socket(
            path, _clip(timeout, httpcore.ConnectTimeout), socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)


def _bound_sockets(transport: object) -> bool:
    """Give an httpx ``HTTPTransport``'s (or ``AsyncHTTPTransport``'s) pool the bounded backend.

    httpx builds its httpcore pool itself and exposes no backend option, so the pool's
    backend is wrapped in place (once). True: every socket read and write of the transport
    ends by the running attempt's end. Other transports read as their own timeouts say.
    """
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if isinstance(backend, _BoundedBackend | _BoundedAsyncBackend):
        return True
    if isinstance(backend, httpcore.NetworkBackend):
        pool._network_backend = _BoundedBackend(backend)  # type: ignore[union-attr]
        return True
    if isinstance(backend, httpcore.AsyncNetworkBackend):
        pool._network_backend = _BoundedAsyncBackend(backend)  # type: ignore[union-attr]
        return True
    return False


def _deadline_error(request: httpx.Request) -> httpx.ReadTimeout:
    return httpx.ReadTimeout("the attempt's deadline passed before the exchange ended",
                             request=request)


class _Cut(Deadline):
    """An async attempt's end, at which :meth:`AsyncRetryTransport._within` cuts its exchange.

    ``sent``: a byte of the request was written to a bounded socket. A cut before that is a
    connect timeout (nothing was sent, so even a write may be sent again); after it, a read
    timeout (it may have been sent).
    """

    __slots__ = ("sent",)

    def __init__(self, clock: Clock, timeout: float) -> None:
        super().__init__(clock, timeout)
        self.sent = False

    def error(self, request: httpx.Request) -> httpx.TimeoutException:
        """The timeout an attempt cut at this end failed with."""
        if not self.sent:
            return httpx.ConnectTimeout("the attempt's deadline passed before the request "
                                        "was sent", request=request)
        return _deadline_error(request)


def _clipped(extensions: dict[str, Any], limit: float | None) -> dict[str, Any]:
    """A request's extensions with each timeout at most ``limit`` (the attempt's timeout)."""
    if limit is None:
        return extensions
    given = extensions.get("timeout")
    if not given:
        return {**extensions, "timeout": dict.fromkeys(_TIMEOUTS, limit)}
    connect, read, write, pool = (given.get("connect"), given.get("read"), given.get("write"),
                                  given.get("pool"))  # _TIMEOUTS, without a generator
    if (connect is not None and connect <= limit and read is not None and read <= limit
            and write is not None and write <= limit and pool is not None and pool <= limit):
        return extensions  # the caller's timeouts fit already
    clipped = {name: limit if (value := given.get(name)) is None else min(value, limit)
               for name in _TIMEOUTS}
    return {**extensions, "timeout": clipped}


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
        self.request.extensions = _clipped(self.extensions, attempt.timeout)
        self.count_retry(attempt)
        return self.request

    def hand_over(self, outcome: Outcome[object]) -> httpx.Response:
        """Restore the caller's extensions (a redirect reuses them) and finish."""
        self.request.extensions = self.extensions
        response: httpx.Response = self.finish(outcome, self.request)
        return response


class _Base(Generic[T]):
    """Construction shared by both transports; ``T`` is the inner transport's type."""

    _default_transport: Callable[[], T]

    def __init__(
        self,
        transport: T | None = None,
        *,
        retrier: Retrier | None = None,
        policy: Policy | None = None,
        key: KeyFunction | None = None,
        generate_idempotency_keys: bool = False,
        redirects_ok: bool = True,
    ) -> None:
        self._transport: T = transport if transport is not None else self._default_transport()
        # httpx's own transports: every socket read and write ends by the attempt's end (the
        # async one also cuts each exchange there, see AsyncRetryTransport._within).
        self._sockets_bounded = _bound_sockets(self._transport)
        self._engine = Engine(retrier, policy, generate_idempotency_keys=generate_idempotency_keys,
                              redirects_ok=redirects_ok,
                              errors=ERRORS, failure_kind=failure_kind, attach=_carry,
                              headers=_evidence)
        self._key = key

    def _unread_of(self, request: httpx.Request) -> tuple[UnreadShape, str] | None:
        """The shape a request's 2xx is handed over unread in, and the request's key; or None:
        the request takes :meth:`_handle`'s path (a logger that prints sees every step; a
        payload validator reads every 2xx)."""
        if not _INTERNALS:
            return None
        key, unread = self._shape(request)
        method = request.method
        extensions = request.extensions
        if (unread is None or method not in unread.methods or logs_steps()
                or (VALIDATOR in extensions and extensions[VALIDATOR] is not None
                    and method != "HEAD")):
            return None
        return unread, key if self._key is None else self._key(request)

    def _shape(self, request: httpx.Request) -> tuple[str, UnreadShape | None]:
        """:meth:`Engine.shape`'s, remembered by httpx's parsed URL parts (no URL text per
        request): the request's default key and unread shape."""
        ref = request.url._uri_reference
        host = (ref.scheme, ref.host, ref.port)
        engine = self._engine
        return engine.shapes.get(host) or engine.shape(host, str(request.url))

    @property
    def retrier(self) -> Retrier:
        """The retrier every request runs under (its profile also accepts 3xx as final unless
        ``redirects_ok=False``)."""
        return self._engine.retrier

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
        engine = self._engine
        retrier = engine.coordinated
        method = request.method
        if retrier is None or method not in engine.coordinated_methods or log_hooks(()):
            return None
        extensions = request.extensions
        if method != "HEAD" and extensions.get(VALIDATOR) is not None:
            return None
        if self._key is not None:
            key = self._key(request)
        elif _INTERNALS:
            key = self._shape(request)[0]
        else:
            key = key_of_url(str(request.url))
        job_id = extensions.get(JOB_ID)
        return retrier, RequestInfo(
            method, key, False, safe_url(str(request.url)) if engine.coordinated_url else None,
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


_Sent = tuple["httpx.Response | None", "_Operation | None", "AttemptResult | None"]
"""A quick first attempt sent: its response (if any), and for anything but an unread 2xx its
operation and result."""


def _handed_unread(request: httpx.Request, response: httpx.Response, key: str,
                   begun: Begun) -> httpx.Response:
    """A 2xx of a quick first attempt handed over unread (its header list copied as it came)."""
    extensions = request.extensions
    return _carry(response, begun.unread(response, response.status_code, _evidence_later,
                                         [*response.headers._list], request.method, key,
                                         extensions.get(JOB_ID) if extensions else None))


class _Lazy:
    """A coordinated request's attempts: the first sent as it came (its 2xx seen by its headers,
    no :class:`_Operation` built), any other through the operation built when first needed
    (an answer that is not a 2xx, an error, a second attempt, an error to raise)."""

    __slots__ = ("info", "key", "op", "request", "transport")

    def __init__(self, transport: Any, request: httpx.Request, info: RequestInfo) -> None:
        self.transport: Any = transport
        self.request = request
        self.info = info
        self.key = info.key
        self.op: _Operation | None = None

    def operation(self) -> _Operation:
        """The request's operation, built once."""
        op = self.op
        if op is None:
            op = self.op = self.transport._start(self.request, self.key)
        return op

    def __call__(self, attempt: Attempt) -> AttemptResult:
        transport: RetryTransport = self.transport
        if self.op is not None or attempt.number != 1:
            return transport._attempt(self.operation(), attempt)
        with bounded(transport._engine.deadline(attempt)):
            return self._seen(transport._first(self.request, self.key, attempt.timeout))

    def _seen(self, sent: _Sent) -> AttemptResult:
        """The first attempt's result: its operation's, or a 2xx seen by its headers."""
        response, op, result = sent
        if op is not None:
            self.op = op
            assert result is not None  # noqa: S101 - _first's: an operation comes with its result
            return result
        assert response is not None  # noqa: S101 - a 2xx, its body unread (Operation.seen's)
        return AttemptResult(ResponseSeen(response.status_code,
                                          self.transport._engine.headers(response)),
                             response, None)

    def hand_over(self, outcome: Outcome[object]) -> httpx.Response:
        """The response with its outcome (:meth:`Operation.finish`'s), or the raised error."""
        response = outcome.last
        if self.op is None and response is not None and outcome.reason is not Reason.INVALID_PAYLOAD:
            return _carry(response, outcome)  # type: ignore[arg-type]  # a response of ours
        return self.operation().hand_over(outcome)


class _AsyncLazy(_Lazy):
    """:class:`_Lazy` for :class:`AsyncRetryTransport`: the first attempt sent and cut at its
    end as a quick first attempt is (``_bounded_first``)."""

    __slots__ = ()

    async def __call__(self, attempt: Attempt) -> AttemptResult:  # type: ignore[override]
        transport: AsyncRetryTransport = self.transport
        if self.op is not None or attempt.number != 1:
            return await transport._attempt(self.operation(), attempt)
        return self._seen(await transport._bounded_first(self.request, self.key, attempt.timeout))


class RetryTransport(_Base[httpx.BaseTransport], httpx.BaseTransport):
    """A sync httpx transport: each request is one bounded, provider-aware operation.

    Args:
        transport: the transport that sends each attempt (default ``httpx.HTTPTransport()``).
        retrier: the retrier: policy, clock, coordinator, hooks and random source.
        policy: a policy that replaces the retrier's (a shortcut for ``Retrier(policy=...)``).
        key: names a request's provider key (default ``scheme://host[:port]``).
        generate_idempotency_keys: give requests whose method is not idempotent under the
            policy (POST, PATCH…) a UUID4 ``Idempotency-Key`` when they carry none; it is sent
            unchanged on every attempt. A write is still only retried with
            ``policy.retry_writes_with_key=True``.
        redirects_ok: a 3xx answer ends the operation as ``ok`` and is handed over (the
            client above follows it; each hop is its own operation). False: a 3xx is what the
            profile makes of it (``unexpected`` unless the profile lists it).
    """

    _default_transport = httpx.HTTPTransport

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Run the request as one operation; return its final response or raise."""
        quick = self._unread_of(request)
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
        return _handed_unread(request, response, key, begun)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        """Run the request as one operation (a quick first attempt when it may take one)."""
        quick = self._quick(request)
        if quick is None:
            coordinated = self._coordinated(request)
            if coordinated is not None:  # the coordinated first attempt, no Operation yet
                lazy = _Lazy(self, request, coordinated[1])
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
               sent: _Sent) -> httpx.Response:
        """After a quick first attempt: its plain success handed over, or the flow gone on."""
        ended = self._settle(key, request, begun, *sent)
        if isinstance(ended, Outcome):
            assert sent[0] is not None  # noqa: S101 - an ok first attempt has its response
            return _carry(sent[0], ended)
        full, result = ended
        return full.hand_over(begun.go_on(full.info, partial(self._attempt, full), result))

    def _first(self, request: httpx.Request, key: str, plan: float | None) -> _Sent:
        """Send a quick first attempt (under its deadline): what :meth:`_settle` reads."""
        extensions = request.extensions
        response: httpx.Response | None = None
        try:
            request.extensions = _clipped(extensions, plan)
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
               response: httpx.Response) -> _Sent:
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
        retrier: the retrier: policy, clock, coordinator, hooks and random source.
        policy: a policy that replaces the retrier's.
        key: names a request's provider key (default ``scheme://host[:port]``).
        generate_idempotency_keys: as for :class:`RetryTransport`.
        redirects_ok: as for :class:`RetryTransport`.
    """

    _default_transport = httpx.AsyncHTTPTransport

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Run the request as one operation; return its final response or raise."""
        unread = self._unread_of(request)
        if unread is None:
            quick = self._quick(request)
            if quick is None:
                coordinated = self._coordinated(request)
                if coordinated is not None:  # the coordinated first attempt, no Operation yet
                    lazy = _AsyncLazy(self, request, coordinated[1])
                    return lazy.hand_over(await coordinated[0].arun(lazy, lazy.info))
                full = self._start(request)
                return full.hand_over(await full.retrier.arun(partial(self._attempt, full),
                                                              full.info))
            retrier, key = quick
        else:
            retrier, key = unread[0].retrier, unread[1]
        # A quick first attempt, as in RetryTransport.handle_request.
        begun = Begun(retrier)
        if begun.refused:
            full = self._start(request, key)
            return full.hand_over(await begun.ago_on(full.info, partial(self._attempt, full), None))
        sent = await self._bounded_first(request, key, begun.timeout)
        response = sent[0]
        if unread is not None and sent[1] is None and response is not None:
            return _handed_unread(request, response, key, begun)
        ended = self._settle(key, request, begun, *sent)
        if isinstance(ended, Outcome):
            assert response is not None  # noqa: S101 - an ok first attempt has its response
            return _carry(response, ended)
        full, result = ended
        return full.hand_over(await begun.ago_on(full.info, partial(self._attempt, full), result))

    async def _bounded_first(self, request: httpx.Request, key: str, plan: float | None) -> _Sent:
        """A quick first attempt sent and ended by its attempt's end: what :meth:`_settle` reads."""
        if plan is None:
            return await self._first(request, key, plan)
        if self._sockets_bounded:
            deadline = _Cut(self._engine.clock, plan)
            extensions = request.extensions
            sent = await self._within(self._first(request, key, plan), deadline, _sent)
            if sent is None:  # cut at the attempt's end: the caller's extensions are put back
                request.extensions = extensions
                op = self._start(request, key)
                sent = None, op, op.failed(deadline.error(request))
            return sent
        cancelled = None
        with anyio.move_on_after(plan):
            cancelled = await self._first(request, key, plan)
        if cancelled is None:  # cancelled at the attempt's end
            op = self._start(request, key)
            return None, op, op.failed(_deadline_error(request))
        return cancelled

    async def _first(self, request: httpx.Request, key: str, plan: float | None) -> _Sent:
        """Send a quick first attempt: what :meth:`_settle` reads (as the sync transport's)."""
        extensions = request.extensions
        response: httpx.Response | None = None
        op: _Operation | None = None
        try:
            request.extensions = clipped = _clipped(extensions, plan)
            try:
                response = await self._transport.handle_async_request(request)
            finally:
                if request.extensions is clipped:  # not yet restored by a cut (see _within)
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
            deadline = _Cut(self._engine.clock, timeout)
            result = await self._within(self._exchange(op, attempt), deadline, _response)
            if result is None:  # cut at the attempt's end
                return op.failed(deadline.error(op.request))
            return result
        # Any other inner transport: a cancel scope bounds the whole exchange.
        with anyio.move_on_after(timeout):
            return await self._exchange(op, attempt)
        return op.failed(_deadline_error(op.request))  # cancelled at the attempt's end

    async def _within(self, exchange: Coroutine[Any, Any, R], deadline: _Cut,
                      response_of: Callable[[R], object]) -> R | None:
        """What ``exchange`` returns by ``deadline``'s end, or None: it was cut there.

        The exchange runs as a task of its own with ``deadline`` as its attempt's end (every
        socket read and write of httpx's own transport is clipped to it). Nothing it waits
        on can hold the attempt past that end: on a loaded machine, a connect to a provider
        whose accept queue is full was seen to hold its attempt seconds past its end, in
        anyio's ``connect_tcp``, its cancellation taking effect only once the connect attempt
        ended. An exchange still running at the end is cancelled (its scope: see
        :func:`_scoped`) and left behind; a response it still returns (``response_of`` finds
        it in what the exchange returns) is closed unread.
        """
        loop = asyncio.get_running_loop()
        token = _DEADLINE.set(deadline)
        scope = anyio.CancelScope()
        try:
            task = loop.create_task(_scoped(exchange, scope))  # runs in a copy of this context
        finally:
            _DEADLINE.reset(token)
        ended = loop.create_future()
        wake = partial(_wake, ended)
        task.add_done_callback(wake)
        timer = loop.call_at(loop.time() + deadline.remaining(), wake, None)
        try:
            await ended
        except BaseException:  # the operation itself was cancelled (or dropped unfinished)
            if not loop.is_closed():
                _leave_behind(task, scope, response_of)
            raise
        finally:
            timer.cancel()
            task.remove_done_callback(wake)
        if task.done():
            return task.result()
        _leave_behind(task, scope, response_of)
        return None

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


_LEFT_BEHIND: set[asyncio.Future[Any]] = set()
"""Exchanges cut at their attempt's end and still running, and late responses being closed
(held here until they end: the event loop keeps only weak references to tasks)."""


def _wake(ended: asyncio.Future[None], _: object) -> None:
    if not ended.done():
        ended.set_result(None)


async def _scoped(exchange: Coroutine[Any, Any, R], scope: anyio.CancelScope) -> R | None:
    """``exchange`` inside ``scope``; None once the scope was cancelled.

    The exchange is cut by cancelling its scope, never its task: a task's own cancellation
    also breaks into what httpcore shields, the close of a connection an exchange was cut
    on included (its read timed out at the same instant), and the connection then stays open,
    the provider still sending into it. A cancelled scope lets a shielded close finish.
    """
    with scope:
        return await exchange
    return None


def _leave_behind(task: asyncio.Task[R | None], scope: anyio.CancelScope,
                  response_of: Callable[[R], object]) -> None:
    """Cancel ``task``'s exchange without waiting for it; close the response it may still
    return."""
    scope.cancel()
    _LEFT_BEHIND.add(task)
    task.add_done_callback(partial(_ended_behind, response_of))


def _ended_behind(response_of: Callable[[R], object], task: asyncio.Task[R | None]) -> None:
    _LEFT_BEHIND.discard(task)
    if task.cancelled() or task.exception() is not None:
        return
    result = task.result()
    if result is None:  # cut: whatever it held is closed
        return
    response = response_of(result)
    if isinstance(response, httpx.Response):
        closing = asyncio.ensure_future(response.aclose())
        _LEFT_BEHIND.add(closing)
        closing.add_done_callback(_LEFT_BEHIND.discard)


def _response(result: AttemptResult) -> object:
    return result.value


def _sent(sent: _Sent) -> object:
    return sent[0]
