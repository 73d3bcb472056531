"""A coordinated httpx request's attempts, its first one sent before its operation is built.

Library-free (the transport sends; this only routes its attempts): httpx's and httpx2's
transports share it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.actions import Attempt, AttemptResult, RequestInfo
from ..core.classify import ResponseSeen
from ..core.outcome import Outcome, Reason
from ._deadline import bounded
from ._handed import carry

if TYPE_CHECKING:
    import httpx

__all__ = ["AsyncLazy", "Lazy", "Sent"]

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
        return self._seen(await transport._bounded_first(self.request, self.key, attempt.timeout))
