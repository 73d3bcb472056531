"""What an operation costs in tokens, carried from where it is known to the coordinator.

A coordinator paces every token quota a provider publishes (:mod:`._logic._tokens`), but the
cost of a request is known where the request is built, and its answer's quota headers where
the answer is read: neither reaches the coordinator's calls. A :class:`TokenCall`, current for
the operation (a context variable, so each thread and asyncio task has its own), carries both:

- its cost, declared with :func:`token_cost` or computed by an integration from the request
  (:func:`llm_request_cost` unless the coordinator's :class:`TokenConfig` names another);
- each attempt's answer, :meth:`TokenCall.record`-ed by the integration (or the caller's own
  code) as it arrives: its quota readings and, when read, its usage.

The coordinator charges the cost at :meth:`~retrybudget.coordination.Coordinator.acquire` and
reconciles it when the attempt is learned. A 2xx whose usage was not read by then (its body
is read later: a stream the caller consumes) leaves the call a way to correct the charge
late (:attr:`TokenCall.late`), taken by :meth:`TokenCall.reconcile` once the body is read.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..core.headers import HeaderInput
from ..core.throttle import Throttle
from ..core.tokens import (
    QuotaDimension,
    QuotaReading,
    TokenEstimate,
    TokenUsage,
    estimate_tokens,
    quota_readings,
    usage_from_body,
)
from ._config import TokenConfig
from ._logic import TOKEN_DIMENSIONS

__all__ = ["Charge", "TokenCall", "begin_request", "current_call", "end_request",
           "llm_request_cost", "may_cost", "token_cost"]

Charge = tuple[int, int, int]
"""What a request charges each token dimension: tokens, input tokens, output tokens."""

_LLM_PATHS = re.compile(r"/(chat/completions|completions|messages|responses)/?$")
_LLM_METHOD = "POST"
"""The one method :func:`llm_request_cost` finds a cost in."""


def llm_request_cost(method: str, url: str, body: bytes) -> TokenEstimate | None:
    """The default cost of a request: :func:`~retrybudget.core.tokens.estimate_tokens` of the
    JSON body of a ``POST`` to a chat-completions, completions, messages or responses path
    (OpenAI's, Anthropic's and the many servers that speak their dialects); None for anything
    else."""
    if method != _LLM_METHOD or not body or _LLM_PATHS.search(url.split("?", 1)[0]) is None:
        return None
    return estimate_tokens(body)


def charge_of(cost: TokenEstimate | TokenUsage | int) -> Charge:
    """A cost as a charge: an estimate by dimension; a bare number of tokens charges only the
    ``tokens`` dimension (it says nothing of input and output)."""
    if isinstance(cost, int):
        return (max(cost, 0), 0, 0)
    return (cost.total, cost.input_tokens, cost.output_tokens)


@dataclass(slots=True)
class TokenCall:
    """One operation's token cost and what its latest attempt's answer said.

    Attributes:
        charge: what each attempt charges (tokens, input tokens, output tokens).
        status: the latest answer's HTTP status (None: no answer recorded for the attempt).
        readings: the quota dimensions the latest answer's headers named.
        usage: what the latest answer said was spent, when its body was read.
        read_at: the wall time the latest answer was recorded at.
        late: set by the coordinator when it learned a 2xx whose usage was not read: corrects
            the charge to a usage read later (see :meth:`reconcile`); None otherwise.
    """

    charge: Charge
    status: int | None = None
    readings: dict[QuotaDimension, QuotaReading] = field(default_factory=dict)
    usage: TokenUsage | None = None
    read_at: float = 0.0
    late: Callable[[TokenUsage], None] | None = None

    def record(self, status: int, headers: HeaderInput, wall: float,
               body: object = None) -> None:
        """Record an attempt's answer: its status, its quota headers read at wall time
        ``wall``, and its usage when ``body`` (parsed JSON, text or bytes) is given."""
        self.status = status
        self.readings = quota_readings(headers, wall)
        self.read_at = wall
        self.usage = None if body is None else usage_from_body(body)

    def sent(self) -> None:
        """Forget the previous attempt's answer: a new attempt goes."""
        self.status, self.usage, self.late = None, None, None
        if self.readings:
            self.readings = {}

    def reconcile(self, usage: TokenUsage) -> bool:
        """The latest answer's usage, read from its body after its attempt was learned (a body
        the caller read or streamed later): the coordinator corrects the charge to it, once,
        in the window it was charged in. True if a correction was due; False when none is (the
        attempt was not learned as a 2xx without its usage, or was corrected already): what the
        answer's headers said stands."""
        late, self.late = self.late, None
        if late is None:
            return False
        self.usage = usage
        late(usage)
        return True

    def refused(self) -> frozenset[str]:
        """The quota dimensions a 429 answer refused the attempt on: each whose ``remaining``
        is below what the attempt charges it (requests: none left). Empty for any other
        answer, or when no header says."""
        if self.status != 429:
            return frozenset()
        out = set()
        requests = self.readings.get("requests")
        if requests is not None and requests.remaining == 0:
            out.add("requests")
        for dimension, amount in zip(TOKEN_DIMENSIONS, self.charge, strict=True):
            reading = self.readings.get(dimension)  # type: ignore[call-overload]
            if reading is not None and reading.remaining is not None and (
                    reading.remaining < max(amount, 1)):
                out.add(dimension)
        return frozenset(out)

    def requests_throttle(self, throttle: Throttle) -> Throttle:
        """What the answer says of the requests quota alone, for the key's request schedule.

        ``throttle`` reads every quota family of the answer as one; when the answer names its
        quotas by dimension, the request schedule gets the requests dimension's (the token
        ledgers pace the rest), with the profile's reset slack ``throttle`` carries, and a 429
        that refused tokens only does not close the requests' gate.
        """
        if not self.readings:
            return throttle
        refused = self.refused()
        requests = self.readings.get("requests")
        if self.status == 429:
            throttled = throttle.throttled and (not refused or "requests" in refused)
        else:  # a quota used up: the requests' own, not a token one
            throttled = throttle.throttled and requests is not None and requests.remaining == 0
        resets = [r.reset_at - self.read_at for r in self.readings.values()
                  if r.reset_at is not None]
        slack = 0.0
        if throttle.reset is not None and resets:
            slack = min(max(throttle.reset - max(resets), 0.0), 5.0)
        remaining = limit = reset = None
        if requests is not None and requests.remaining is not None and (
                requests.reset_at is not None):
            remaining, limit = requests.remaining, requests.limit
            reset = max(requests.reset_at - self.read_at, 0.0) + slack
        return Throttle(throttled, throttle.hint if throttled else None, throttle.floor,
                        throttle.multiplier, remaining, limit, reset, throttle.bucket)


_CALL: contextvars.ContextVar[TokenCall | None] = contextvars.ContextVar(
    "retrybudget_token_call", default=None)


def current_call() -> TokenCall | None:
    """The token call of the operation running in this thread or task, if it has a cost."""
    return _CALL.get()


@contextlib.contextmanager
def token_cost(cost: TokenEstimate | TokenUsage | int) -> Iterator[TokenCall]:
    """Declare what the operations started inside the block cost: each of their attempts is
    charged ``cost`` (a :class:`~retrybudget.core.tokens.TokenEstimate` by dimension, or a
    number of tokens) against the token quotas the provider publishes.

    Yields the :class:`TokenCall`: code that makes the attempt itself (a plain callable under
    :meth:`~retrybudget.Retrier.call`) records each answer on it with
    :meth:`TokenCall.record`; the integrations record theirs. A cost declared so takes
    precedence over the one an integration computes from the request.
    """
    call = TokenCall(charge_of(cost))
    token = _CALL.set(call)
    try:
        yield call
    finally:
        _CALL.reset(token)


def may_cost(config: TokenConfig, method: str) -> bool:
    """Whether a request sent with ``method`` may cost anything under ``config`` (False: its
    URL and body need not be read): any request, when a cost function of its own is given or a
    cost is declared around it (:func:`token_cost`); only what :func:`llm_request_cost` reads,
    a ``POST``, by default."""
    return config.cost is not None or method == _LLM_METHOD or _CALL.get() is not None


def begin_request(config: TokenConfig | None, method: str, url: str, body: Callable[[], bytes]
                  ) -> tuple[contextvars.Token[TokenCall | None] | None, TokenCall | None]:
    """Make the request's cost current (an integration's call when a request starts), unless
    a cost is declared already or the request costs nothing: the token to reset the context
    variable with when the request ends (None: nothing to reset), and the operation's token
    call (the declared one, or the one made current; None: the request costs nothing)."""
    declared = _CALL.get()
    if declared is not None or config is None:
        return None, declared
    try:
        cost = (config.cost or llm_request_cost)(method, url, body())
    except Exception:  # a body not read yet, or a cost function's own bug: no cost
        return None, None
    if cost is None:
        return None, None
    call = TokenCall(charge_of(cost))
    return _CALL.set(call), call


def end_request(token: contextvars.Token[TokenCall | None]) -> None:
    """Forget the cost :func:`begin_request` made current."""
    _CALL.reset(token)
