"""A coordinated httpx request's attempts, its first one sent before its operation is built.

Library-free (the transport sends; this only routes its attempts): httpx's and httpx2's
transports share it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from .._drivers import Gated
from .._drivers import Retrier as _Retrier
from ..core.actions import Attempt, AttemptResult, RequestInfo
from ..core.classify import ResponseSeen
from ..core.outcome import Outcome, Reason
from ._common import JOB_ID as _JOB_ID
from ._deadline import _DEADLINE, Deadline, bounded
from ._handed import carry

if TYPE_CHECKING:
    import httpx

__all__ = ["AsyncLazy", "Lazy", "Sent", "asend_gated", "send_gated"]

L = TypeVar("L", bound="Lazy")

Sent = tuple["httpx.Response | None", Any, "AttemptResult | None"]
"""A quick first attempt sent: its response (if any), and for anything but an unread 2xx its
operation (the transport's) and result."""


class Lazy:
    """A coordinated request's attempts: the first sent as it came (its 2xx seen by its headers,
    no :class:`Operation` built), any other through the operation built when first needed
    (an answer that is not a 2xx, an error, a second attempt, an error to raise)."""

    __slots__ = ("info", "key", "op", "request", "transport")

    def __init__(self, transport: Any, request: httpx.Request, info: RequestInfo) -> None:
        self.transport: Any = transport
        self.request = request
        self.info = info
        self.key = info.key
        self.op: Any = None  # the transport's operation, once built

    def operation(self) -> Any:
        """The request's operation, built once."""
        op = self.op
        if op is None:
            op = self.op = self.transport._start(self.request, self.key)
        return op

    def __call__(self, attempt: Attempt) -> AttemptResult:
        transport = self.transport  # a RetryTransport (its module imports this one)
        if self.op is not None or attempt.number != 1:
            result: AttemptResult = transport._attempt(self.operation(), attempt)
            return result
        with bounded(transport._engine.deadline(attempt)):
            return self._seen(transport._first(self.request, self.key, attempt.timeout))

    def _seen(self, sent: Sent) -> AttemptResult:
        """The first attempt's result: its operation's, or a 2xx seen by its headers."""
        if sent[1] is not None:
            self.op = sent[1]
        return _result(self.transport, sent)

    def hand_over(self, outcome: Outcome[object]) -> httpx.Response:
        """The response with its outcome (:meth:`Operation.finish`'s), or the raised error."""
        response: Any = outcome.last  # a response of ours, or None
        if self.op is None and response is not None and outcome.reason is not Reason.INVALID_PAYLOAD:
            handed: httpx.Response = carry(response, outcome)
            return handed
        final: httpx.Response = self.operation().hand_over(outcome)
        return final


class AsyncLazy(Lazy):
    """:class:`Lazy` for :class:`AsyncRetryTransport`: the first attempt sent and cut at its
    end as a quick first attempt is (``_bounded_first``)."""

    __slots__ = ()

    async def __call__(self, attempt: Attempt) -> AttemptResult:  # type: ignore[override]
        transport = self.transport  # an AsyncRetryTransport
        if self.op is not None or attempt.number != 1:
            result: AttemptResult = await transport._attempt(self.operation(), attempt)
            return result
        started = transport._engine.clock.monotonic()  # the flow's attempt starts here
        return self._seen(await transport._bounded_first(self.request, self.key, attempt.timeout,
                                                         started))


def send_gated(transport: Any, request: httpx.Request, retrier: _Retrier,
               key: str) -> httpx.Response:
    """A coordinated request run as one operation, its retrier beginning it the quick way
    (:class:`Gated`): admitted and let go by one call of the coordinator, its first attempt
    sent as it came (under its deadline), a 2xx seen by its headers and handed over with no
    operation built; anything else goes on in the flow through :class:`Lazy`."""
    gated = Gated(retrier, key, request.method, request.extensions.get(_JOB_ID))
    if gated.pending:  # refused, told to wait, or no room: the flow sends the first attempt
        lazy = Lazy(transport, request, transport._described(request, retrier, key))
        return lazy.hand_over(gated.go_on(lazy.info, lazy, None))
    plan = gated.timeout
    if not transport._sockets_bounded:  # nothing reads the attempt's end but its timeouts
        sent = transport._first(request, key, plan)
    else:  # httpx's own transport: every socket read and write against the attempt's end
        deadline = None if plan is None else Deadline(transport._engine.clock, plan)
        token = _DEADLINE.set(deadline)
        try:
            sent = transport._first(request, key, plan)
        finally:
            _DEADLINE.reset(token)
            if deadline is not None and deadline.alarms:
                deadline.release()
    ended = _settled(transport, request, retrier, gated, sent, Lazy)
    if not isinstance(ended, tuple):  # it ended the operation ok: handed over
        return ended
    lazy, result = ended
    return lazy.hand_over(gated.go_on(lazy.info, lazy, result))


async def asend_gated(transport: Any, request: httpx.Request, retrier: _Retrier,
                      key: str) -> httpx.Response:
    """The async twin of :func:`send_gated` (the first attempt cut at its end as a quick
    first attempt is)."""
    gated = Gated(retrier, key, request.method, request.extensions.get(_JOB_ID))
    if gated.pending:
        lazy = AsyncLazy(transport, request, transport._described(request, retrier, key))
        return lazy.hand_over(await gated.ago_on(lazy.info, lazy, None))
    sent = await transport._bounded_first(request, key, gated.timeout, gated.attempt_started)
    ended = _settled(transport, request, retrier, gated, sent, AsyncLazy)
    if not isinstance(ended, tuple):  # it ended the operation ok: handed over
        return ended
    lazy, result = ended
    return lazy.hand_over(await gated.ago_on(lazy.info, lazy, result))


def _settled(transport: Any, request: httpx.Request, retrier: _Retrier, gated: Gated,
             sent: Sent, lazy_of: type[L]) -> httpx.Response | tuple[L, AttemptResult]:
    """After a coordinated quick first attempt: the response of one that ended the operation
    ok, handed over (a 2xx with no operation built), else the :class:`Lazy` attempts the flow
    goes on with and the result it goes on from."""
    response, op, _ = sent
    outcome: Outcome[Any] | None
    if op is None and retrier._ok_unread:  # a 2xx, classified when its outcome's is read
        assert response is not None  # noqa: S101 - a 2xx
        ended = gated.settle_unread(response, response.status_code,
                                    transport._engine.headers(response))
        if isinstance(ended, Outcome):
            return carry(response, ended)
        result, outcome = ended, None
    else:
        result = _result(transport, sent)
        outcome = gated.settle(result)
        if outcome is not None and op is None:
            assert response is not None  # noqa: S101 - a 2xx
            return carry(response, outcome)
    lazy = lazy_of(transport, request, transport._described(request, retrier, gated.key))
    lazy.op = op
    if outcome is not None:
        return lazy.hand_over(outcome)
    return lazy, result


def _result(transport: Any, sent: Sent) -> AttemptResult:
    """A first attempt's result: its operation's, or a 2xx seen by its headers (its body
    unread, as :meth:`Operation.seen` sees it)."""
    response, op, result = sent
    if op is not None:
        assert result is not None  # noqa: S101 - _first's: an operation comes with its result
        return result
    assert response is not None  # noqa: S101 - a 2xx, its body unread
    return AttemptResult(ResponseSeen(response.status_code, transport._engine.headers(response)),
                         response, None)
