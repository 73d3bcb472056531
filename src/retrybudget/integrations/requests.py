"""A requests adapter that runs every request as one bounded logical operation.

::

    import requests
    import retrybudget as rb
    from retrybudget.integrations.requests import RetryAdapter

    session = requests.Session()
    session.mount("https://", RetryAdapter(retrier=rb.Retrier(policy=rb.interactive())))
    response = session.get("https://api.example.com/rentals/1/availability", timeout=5)
    print(response.status_code, response.retrybudget["attempts"])

:class:`RetryAdapter` is an ``HTTPAdapter`` with urllib3's own retries turned off: each
request is one operation whose attempts, waits and per-attempt timeouts come out of one
budget, with the same rules, the same stats and the same outcome → caller mapping as the
httpx transports. The whole exchange of an attempt (connect, status line, headers and any
body the adapter reads) ends at the attempt's absolute end: a watchdog closes a connection
still busy at that instant. The session above follows redirects, so each hop is an operation
of its own. Outcomes with no response to hand over raise the integration's
:func:`~retrybudget.errors.error_family`: ``Adapter`` and the error's name
(``AdapterRateLimited``, ``AdapterRetriesExhausted``…), each the
:class:`retrybudget.RetryBudgetError` of its reason and also ``requests.ConnectionError``
(``requests.Timeout`` for the deadline, ``requests.RequestException`` for an invalid payload).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import requests
import urllib3
from requests.adapters import DEFAULT_POOLBLOCK, DEFAULT_POOLSIZE, HTTPAdapter
from urllib3 import connection as u3_connection
from urllib3 import connectionpool as u3_pool

from .. import errors
from .._drivers import Begun, Retrier
from .._native import evidence
from .._native.requests import requests_evidence as _evidence
from .._native.requests import requests_failure_kind as failure_kind
from ..core.actions import Attempt, AttemptResult
from ..core.outcome import Outcome
from ._common import (
    OUTCOME_ATTRIBUTE,
    STATS_ATTRIBUTE,
    Engine,
    Operation,
    key_of_url,
)
from ._deadline import _DEADLINE, Deadline, bounded
from ._front import Front, Wiring
from ._requests_handed import hand_unread

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._front import Options
from ._requests_usage import read_body, watch
from ._tokens import begin_costs, token_config

__all__ = [
    "AdapterCircuitOpen",
    "AdapterDeadlineExceeded",
    "AdapterInvalidPayload",
    "AdapterNotFound",
    "AdapterNotRetried",
    "AdapterRateLimited",
    "AdapterRejected",
    "AdapterRetriesExhausted",
    "AdapterRetryBudgetRefused",
    "AdapterUnexpectedResponse",
    "RetryAdapter",
    "failure_kind",
]

KeyFunction = Callable[[requests.PreparedRequest], str]
"""Names the provider key of a request (default: ``scheme://host[:port]``)."""

TimeoutValue = float | tuple[float, float] | tuple[float, None] | None
"""What requests accepts as ``timeout=`` (and urllib3's ``Timeout``)."""


_FAMILY = errors.error_family("Adapter", __name__, requests.exceptions.ConnectionError,
                              deadline=requests.exceptions.Timeout,
                              invalid_payload=requests.exceptions.RequestException)
AdapterRateLimited = _FAMILY.rate_limited
AdapterRetriesExhausted = _FAMILY.exhausted
AdapterDeadlineExceeded = _FAMILY.deadline
AdapterCircuitOpen = _FAMILY.circuit_open
AdapterRetryBudgetRefused = _FAMILY.retry_budget
AdapterNotRetried = _FAMILY.not_retried
AdapterInvalidPayload = _FAMILY.invalid_payload
AdapterRejected = _FAMILY.rejected
AdapterNotFound = _FAMILY.not_found
AdapterUnexpectedResponse = _FAMILY.unexpected
_ERRORS = _FAMILY.table()


def _attach(response: requests.Response, outcome: Outcome[object]) -> None:
    setattr(response, STATS_ATTRIBUTE, outcome.stats())
    setattr(response, OUTCOME_ATTRIBUTE, outcome)


def _quota_headers(response: requests.Response) -> Any:
    return response.headers


def _body_bytes(request: requests.PreparedRequest) -> bytes:
    """The request's body as bytes (a stream or a file: none, so no cost read from it)."""
    body = request.body
    if isinstance(body, bytes):
        return body
    return body.encode() if isinstance(body, str) else b""


def _default_key(request: requests.PreparedRequest) -> str:
    return key_of_url(request.url or "")


# A response's headers are copied as they came (the outcome reads its evidence later) from
# requests' own store of them; another requests without it: the generic path's reading.
_INTERNALS = isinstance(getattr(requests.structures.CaseInsensitiveDict(), "_store", None), dict)


def _evidence_later(store: dict[str, tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The classifier's headers of a response's header store copied when it came."""
    return evidence([(name, value) for name, (_given, value) in store.items()])


def _clip(given: Any, limit: float | None) -> Any:
    """``given`` (None, seconds, a (connect, read) pair or urllib3's Timeout) cut to ``limit``."""
    if limit is None:
        return given
    if isinstance(given, urllib3.Timeout):
        given = (given.connect_timeout, given.read_timeout)
    if isinstance(given, tuple):
        return tuple(v if isinstance(v, (int, float)) and v <= limit else limit for v in given)
    return limit if given is None or given > limit else given


class _Guarded:
    """A urllib3 connection that the watchdog closes at the end of the attempt using it.

    http.client reads the status line and headers inside one blocking call; a read timeout
    bounds each socket read, not that call. Each request on the connection arms the running
    attempt's watchdog; the watchdog shuts the socket down only while that attempt still owns
    the connection (the next request on it takes the ownership first, under the lock).

    The socket shut is the one the connection last connected (``held``), not ``sock``:
    http.client lets go of ``sock`` as soon as a response's head says the connection closes
    after it, and a body delimited by that close is then read through the response alone.
    """

    sock: socket.socket | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._guard = threading.Lock()
        self._owner: Deadline | None = None
        self._held: socket.socket | None = None

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        with self._guard:
            self._held = self.sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        deadline = _DEADLINE.get()  # current_deadline()
        with self._guard:
            self._owner = deadline
            if self.sock is None:  # the last socket went with its response: a new one comes
                self._held = None
        if deadline is not None:
            deadline.watch(partial(_shut, self, deadline))
        super().request(*args, **kwargs)  # type: ignore[misc]


class _Watched(Deadline):
    """An attempt's end that knows whether the watchdog cut its connection (``cut``).

    A body delimited by the connection's close reads a cut as its end: only ``cut`` tells a
    truncated answer from a whole one.
    """

    cut = False  # set on the instance when the watchdog cuts (no __init__ of its own to run)

    def check(self, response: requests.Response) -> None:
        """Raise the attempt's timeout, the response closed, when the watchdog cut it."""
        if self.cut:
            response.close()  # its connection is shut: closed, never back in the pool
            raise requests.exceptions.ReadTimeout("the attempt's deadline passed before "
                                                  "the exchange ended")


def _shut(connection: _Guarded, deadline: Deadline) -> None:
    with connection._guard:
        sock = connection._held
        if connection._owner is deadline and sock is not None:
            if isinstance(deadline, _Watched):
                deadline.cut = True
            # The plain socket's shutdown (an SSL socket's own would reset its TLS state
            # under the reading thread); the blocked read then ends at once.
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _HTTPConnection(_Guarded, u3_connection.HTTPConnection):
    """An HTTP connection the watchdog guards."""


class _HTTPSConnection(_Guarded, u3_connection.HTTPSConnection):
    """An HTTPS connection the watchdog guards."""


class _HTTPPool(u3_pool.HTTPConnectionPool):
    """An HTTP pool of guarded connections."""

    ConnectionCls = _HTTPConnection


class _HTTPSPool(u3_pool.HTTPSConnectionPool):
    """An HTTPS pool of guarded connections."""

    ConnectionCls = _HTTPSConnection


_POOLS = {"http": _HTTPPool, "https": _HTTPSPool}


def _timed_out(error: Exception, deadline: Deadline | None) -> Exception:
    """An error raised once the attempt's end passed is its timeout (the watchdog's doing)."""
    if deadline is None or deadline.remaining() > 0 or isinstance(error, requests.Timeout):
        return error
    timeout = requests.exceptions.ReadTimeout("the attempt's deadline passed before the "
                                              "exchange ended")
    timeout.__cause__ = error
    return timeout


class _Operation(Operation):
    """A requests request's operation: clips each attempt's ``timeout=``."""

    __slots__ = ("request", "timeout")

    def __init__(
        self, engine: Engine, request: requests.PreparedRequest, key: KeyFunction, timeout: Any,
        known: str | None = None,
    ) -> None:
        super().__init__(engine, (request.method or "GET").upper(), request.url or "",
                         request.headers, key(request) if known is None else known)
        self.request = request
        self.timeout = timeout

    def timeout_for(self, attempt: Attempt) -> Any:
        """The ``timeout=`` for ``attempt``: the caller's, at most what is left of the deadline."""
        return _clip(self.timeout, attempt.timeout)


class RetryAdapter(Front[requests.PreparedRequest], HTTPAdapter):
    """A requests transport adapter: each request is one bounded, provider-aware operation.

    Mount it on a session for the prefixes it should serve. urllib3's own retries are off
    (``max_retries=0``): every attempt is the retrier's.

    Args:
        retrier: as for every integration (their shared base class :class:`Front`), and so
            are ``policy``, ``key``, ``generate_idempotency_keys`` and ``redirects_ok``.
        pool_connections: as for ``HTTPAdapter``.
        pool_maxsize: as for ``HTTPAdapter``.
        pool_block: as for ``HTTPAdapter``.
    """

    _wiring = Wiring(_ERRORS, failure_kind, _attach, _evidence, _default_key,
                     _quota_headers, read_body)
    _key: KeyFunction

    def __init__(
        self,
        retrier: Retrier | None = None,
        *,
        pool_connections: int = DEFAULT_POOLSIZE,
        pool_maxsize: int = DEFAULT_POOLSIZE,
        pool_block: bool = DEFAULT_POOLBLOCK,
        **options: Unpack[Options[requests.PreparedRequest]],
    ) -> None:
        HTTPAdapter.__init__(self, pool_connections, pool_maxsize, 0, pool_block)
        Front.__init__(self, retrier, **options)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        """As ``HTTPAdapter``'s, with connections the attempt's watchdog can close."""
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        """As ``HTTPAdapter``'s; an HTTP(S) proxy's connections are guarded too."""
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        if isinstance(manager, urllib3.ProxyManager):
            manager.pool_classes_by_scheme = _POOLS
        return manager

    def send(
        self,
        request: requests.PreparedRequest,
        stream: bool = False,
        timeout: TimeoutValue = None,
        verify: bool | str = True,
        cert: bytes | str | tuple[bytes | str, bytes | str] | None = None,
        proxies: Mapping[str, str] | None = None,
    ) -> requests.Response:
        """Run the request as one operation; return its final response or raise."""
        tokens = token_config(self)
        if tokens is not None:  # token pacing: the request's cost current while it runs
            costs = begin_costs(tokens, (request.method or "GET").upper(), request.url or "",
                                partial(_body_bytes, request), watch)
            if costs is not None:
                with costs:
                    return costs.hand(self._operate(request, stream, timeout, verify, cert,
                                                    proxies))
        return self._operate(request, stream, timeout, verify, cert, proxies)

    def _operate(self, request: requests.PreparedRequest, stream: bool, timeout: TimeoutValue,
                 verify: bool | str, cert: bytes | str | tuple[bytes | str, bytes | str] | None,
                 proxies: Mapping[str, str] | None) -> requests.Response:
        """:meth:`send`'s operation."""
        method = (request.method or "GET").upper()
        # The shape a 2xx is handed over unread in, or None: the generic path.
        quick = self._engine.unread_of(request.url or "", method) if _INTERNALS else None
        if quick is None:
            return self._send(request, stream, timeout, verify, cert, proxies)
        # A quick first attempt: sent before the operation is built, and a 2xx handed over
        # with its outcome built from the readings, its headers read when its evidence is.
        unread, key = quick
        if self._key is not _default_key:
            key = self._key(request)
        begun = Begun(unread.retrier)
        if begun.refused:
            return self._send(request, stream, timeout, verify, cert, proxies, (key, begun, None))
        plan = begun.timeout
        deadline = (None if plan is None
                    else _Watched(self._engine.clock, plan, unread.retrier._readers[0]))
        op: _Operation | None = None
        try:
            token = _DEADLINE.set(deadline)  # bounded(deadline), its context inlined
            try:
                response = HTTPAdapter.send(self, request, stream, _clip(timeout, plan), verify,
                                            cert, proxies)
                status = response.status_code
                if not 200 <= status < 300:  # read as the generic path's attempt reads it
                    op = _Operation(self._engine, request, self._key, timeout, key)
                    body = response.content if op.wants_body(response, Attempt(1, plan)) else None
                if not stream:  # the session reads it next: read it inside the budget
                    response.content  # noqa: B018 - requests caches what it read
                if deadline is not None and deadline.cut:
                    deadline.check(response)
            finally:
                _DEADLINE.reset(token)
                if deadline is not None:
                    deadline.release()
            if op is None:  # its stats and outcome built when first read
                return hand_unread(response, begun.unread(
                    None, status, _evidence_later,
                    dict(response.headers._store),  # type: ignore[attr-defined]
                    method, key, None))
            result = op.seen(response, body)
        except Exception as exc:
            if op is None:
                op = _Operation(self._engine, request, self._key, timeout, key)
            result = op.failed(_timed_out(exc, deadline))
        return self._send(request, stream, timeout, verify, cert, proxies, (key, begun, result),
                          op)

    def _send(self, request: requests.PreparedRequest, stream: bool, timeout: TimeoutValue,
              verify: bool | str, cert: bytes | str | tuple[bytes | str, bytes | str] | None,
              proxies: Mapping[str, str] | None,
              first: tuple[str, Begun, AttemptResult | None] | None = None,
              op: _Operation | None = None) -> requests.Response:
        """The operation in the generic flow; after a quick ``first`` attempt (its key, its
        readings and its result: None when its plan refused it), from that attempt on."""
        if op is None:
            op = _Operation(self._engine, request, self._key, timeout,
                            None if first is None else first[0])

        def perform(attempt: Attempt) -> AttemptResult:
            deadline = (None if attempt.timeout is None
                        else _Watched(self._engine.clock, attempt.timeout))
            try:
                with bounded(deadline):
                    response = HTTPAdapter.send(self, request, stream, op.timeout_for(attempt),
                                                verify, cert, proxies)
                    body = response.content if op.wants_body(response, attempt) else None
                    if not stream:  # the session reads it next: read it inside the budget
                        response.content  # noqa: B018 - requests caches what it read
                    if deadline is not None:
                        deadline.check(response)
                return op.seen(response, body)
            except Exception as exc:
                return op.failed(_timed_out(exc, deadline))

        if first is None:
            outcome = op.retrier.run(perform, op.info)
        else:  # the next step after the quick first attempt
            outcome = first[1].go_on(op.info, perform, first[2])
        final: requests.Response = op.finish(outcome, request)
        return final
