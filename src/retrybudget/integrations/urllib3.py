"""A urllib3 ``Retry`` that decides as retrybudget does, for libraries that take nothing else.

PyGithub (``github.Github(retry=...)``), and any client that accepts only a
``urllib3.util.Retry``, retry through urllib3's own loop: urllib3 sends each attempt, and
asks its ``Retry`` after each failure whether to go on and how long to sleep. :class:`BudgetRetry`
answers with retrybudget's flow::

    import github
    import retrybudget as rb
    from retrybudget.integrations.urllib3 import BudgetRetry

    gh = github.Github(retry=BudgetRetry(policy=rb.Policy(profile="github", deadline=30.0)))

What urllib3's hook allows, it does: the attempts and the deadline of the policy; each
response classified by the profile (``profile="auto"``: the host's) from its status and
headers; a Retry-After or a reset waited for when it fits the budget, else the operation
stopped at once and the response handed over (``raise_on_status=False``: the library raises
its own error for it, PyGithub its ``GithubException``); backoff with jitter; a refused
connect retried for any method, and a write (POST, PATCH…) never replayed once it may have
been sent. The outcome is on the final urllib3 response (``response.retrybudget_outcome``;
requests: ``response.raw``) and, for one that did not end ok, in
:func:`retrybudget.last_failed_outcome`. A first answer the policy would not retry (a 2xx, a
404) is urllib3's alone: no operation is built for it.

What it cannot do (urllib3's hook sees no more):

- the deadline counts from the end of the first failed attempt (urllib3 asks nothing
  before the first attempt), and each attempt's timeout is the client's own (``timeout=``),
  not clipped to what is left of the deadline;
- no body is read to classify a response (urllib3 hands the hook the response unread):
  body signals (a GitHub secondary limit known only by its message, Stripe's lock timeout)
  are not seen, the headers are;
- the request headers are not seen: a write is never replayed, even with an idempotency key;
  ``profile="auto"`` picks by host only;
- no hooks, audit sink or coordinator: the operation is this process's alone.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

from urllib3.exceptions import MaxRetryError, ResponseError
from urllib3.response import BaseHTTPResponse
from urllib3.util.retry import Retry

from .._drivers import Retrier, ended
from .._native import OUTCOME_ATTRIBUTE, evidence
from .._native.urllib3 import urllib3_failure_kind
from ..core.actions import Attempt, AttemptResult, RequestInfo, Sleep
from ..core.classify import FailureSeen, Observation, ResponseSeen
from ..core.flow import FlowGen, operation_flow
from ..core.outcome import Outcome
from ..core.policy import Policy
from ._common import provider_key

__all__ = ["BudgetRetry"]


class _Run:
    """One request's operation under way, shared by the ``Retry`` copies urllib3 makes."""

    __slots__ = ("flow", "retrier", "wait")

    def __init__(self, retrier: Retrier, flow: FlowGen) -> None:
        self.retrier = retrier
        self.flow = flow
        self.wait = 0.0


class BudgetRetry(Retry):
    """A ``urllib3.util.Retry`` whose every decision is retrybudget's (see the module).

    Args:
        retrier: the retrier: policy, clock and random source (hooks and coordinator unused).
        policy: a policy that replaces the retrier's.
    """

    def __init__(self, retrier: Retrier | None = None, *, policy: Policy | None = None,
                 **options: Any) -> None:
        options.setdefault("raise_on_status", False)  # a response that ends it is handed over
        options.setdefault("redirect", 0)
        super().__init__(**options)
        retrier = retrier or Retrier()
        self.retrier = retrier if policy is None else retrier.with_options(policy=policy)
        self._run: _Run | None = None

    def new(self, **changes: Any) -> BudgetRetry:
        """A copy with urllib3's ``changes`` (the operation under way, kept)."""
        made = copy.copy(self)
        for name, value in changes.items():
            setattr(made, name, value)
        return made

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        """Whether :meth:`increment` is to see a response of ``status_code`` (where the flow
        decides): a first answer only when the policy may retry its status (else it is
        urllib3's alone, and costs nothing); once an operation is under way, every answer,
        so that the flow ends it (its outcome recorded, the response handed over)."""
        return self._run is not None or status_code in self.retrier.policy.retried_statuses()

    def is_exhausted(self) -> bool:
        """Never by urllib3's counters: the flow ends the operation."""
        return False

    def increment(self, method: str | None = None, url: str | None = None,
                  response: BaseHTTPResponse | None = None, error: Exception | None = None,
                  _pool: Any = None, _stacktrace: Any = None) -> BudgetRetry:
        """After a failed attempt: the retry to sleep and send again, or MaxRetryError when
        the operation ends (urllib3 then hands a response over as it is)."""
        run = self._run or self._begin(method, url, _pool)
        observation: Observation
        if response is not None:
            pairs = [(name.lower(), value) for name, value in response.headers.items()]
            observation = ResponseSeen(response.status, evidence(pairs), method=_upper(method))
        else:
            failed = error if error is not None else ResponseError("no response")
            observation = FailureSeen(urllib3_failure_kind(failed), type(failed).__name__,
                                      method=_upper(method))
        action = _step(run.flow, AttemptResult(observation, response, error))
        if isinstance(action, Outcome):
            self._end(action, response)
            raise MaxRetryError(_pool, url or "", error or ResponseError(action.detail))
        assert isinstance(action, Sleep)  # noqa: S101 - an uncoordinated flow's next step
        run.wait = action.wait.seconds
        return self.new(_run=run, history=self.history)

    def sleep(self, response: BaseHTTPResponse | None = None) -> None:
        """Wait what the flow decided (on the retrier's clock), then take its next attempt;
        an operation the flow ends instead raises MaxRetryError."""
        run = self._run
        if run is None:
            return
        run.retrier.clock.sleep(run.wait)
        action = _step(run.flow, None)
        if isinstance(action, Outcome):
            self._end(action, response)
            raise MaxRetryError(None, "", ResponseError(action.detail))  # type: ignore[arg-type]

    def _begin(self, method: str | None, url: str | None, pool: Any) -> _Run:
        """The operation of a request whose first attempt just failed."""
        scheme, host, port = (getattr(pool, "scheme", "http"), getattr(pool, "host", ""),
                              getattr(pool, "port", None))
        netloc = host if port is None else f"{host}:{port}"
        full = f"{scheme}://{netloc}{url or ''}"
        retrier = self.retrier
        policy = retrier.policy
        request = RequestInfo(_upper(method), provider_key(scheme, netloc), False, full,
                              retrier.job_id)
        flow = operation_flow(policy, request, retrier.clock, operation_id=uuid.uuid4().hex[:16],
                              sample=retrier.random.random, coordinated=False, report=False)
        first = next(flow)
        assert isinstance(first, Attempt)  # noqa: S101 - an uncoordinated flow starts so
        return _Run(retrier, flow)

    def _end(self, outcome: Outcome[object], response: BaseHTTPResponse | None) -> None:
        ended(outcome)
        if response is not None:
            setattr(response, OUTCOME_ATTRIBUTE, outcome)


def _upper(method: str | None) -> str | None:
    return method.upper() if method else None


def _step(flow: FlowGen, reply: object) -> object:
    """The flow's next action, or its outcome."""
    try:
        return flow.send(reply)
    except StopIteration as stop:
        return stop.value
