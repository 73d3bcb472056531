"""An uncoordinated operation's first attempt made without the generic flow (the fast
path), and the generic flow gone on from its readings when it does not end ok.

:class:`Begun` is the one sequence of such an operation, run by :meth:`Retrier.call`,
:meth:`Retrier.acall`, :meth:`Retrier.run`, :meth:`Retrier.arun` and each HTTP integration's
quick first attempt alike.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .._clock import monotonic_reader
from ..core.actions import Attempt, AttemptResult, RequestInfo
from ..core.classify import Classified, Kind, classify
from ..core.decide import Stop, decide, plan_next
from ..core.flow import FlowGen
from ..core.outcome import FirstAttempt, Outcome, Reason, first_ok
from ..core.outcome import operation_id as _format_id
from ..core.policy import Policy
from ..core.state import OperationState
from ._interpret import _PLAIN_VALUE, CallInterpreter, Interpreter
from ._loop import Loop, _operation_id


class Described(Protocol):
    """What a first attempt's outcome reads of its request: its method, key and job id (a
    :class:`RequestInfo` is one; an integration's quick first attempt builds one only when the
    operation goes on)."""

    @property
    def method(self) -> str | None: ...
    @property
    def key(self) -> str: ...
    @property
    def job_id(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class _FirstSuccess:
    """What the rules say of a plain value returned at the first attempt, worked out once.

    A plain value (no validator, no status to read) is the constant observation
    ``_PLAIN_VALUE``: its classification has no headers, so no clock or state in it, and the
    decision after it is a terminal ``ok``. :func:`_first_success` asks the real
    :func:`classify` and :func:`decide` once per policy, checks the answer does not depend on
    the time, the state or the sample, and the fast path reuses it.
    """

    classified: Classified
    detail: str
    plain: bool = False
    """The interpreter reads every built-in value as ``_PLAIN_VALUE`` (no validator)."""


def _first_success(policy: Policy) -> _FirstSuccess | None:
    """The classification and decision of a plain first-attempt success, or None if they vary."""
    seen = [classify(policy.profile, _PLAIN_VALUE, wall) for wall in (0.0, 1_800_000_000.0)]
    if seen[0] != seen[1]:
        return None
    classified = seen[0]
    if classified.kind is not Kind.OK or classified.conflicts or classified.rate.evidence:
        return None
    decisions = {
        decide(policy, dataclasses.replace(OperationState.start(policy, "probe", now), attempts=n),
               classified, now + 0.5, wall, sample)
        for now, wall, sample, n in ((0.0, 0.0, 0.0, 0), (1e6, 1.8e9, 0.999, policy.max_attempts - 1))
    }
    if len(decisions) != 1:
        return None
    decision = decisions.pop()
    if (not isinstance(decision, Stop) or decision.reason is not Reason.OK
            or decision.retry_at is not None or decision.detail != classified.detail):
        return None
    return _FirstSuccess(classified, decision.detail)


class FirstAttempts(Loop):
    """The first-attempt fast path of :meth:`Retrier.call` and :meth:`Retrier.run`."""

    @functools.cached_property
    def _interpreter(self) -> Interpreter:
        policy = self.policy
        return self.interpreter or CallInterpreter(validator=policy.validator, profile=policy.profile,
                                                   method=self.method)

    @functools.cached_property
    def _fast(self) -> _FirstSuccess | None:
        """The first-attempt fast path's answer, when nobody needs the flow's actions."""
        if self.hooks or not self.coordinator.passive or self.policy.profile.routes:
            return None  # profile="auto" picks the profile per request: the flow resolves it
        found = _first_success(self.policy)
        if found is None:
            return None
        interp = self._interpreter
        plain = type(interp) is CallInterpreter and interp.validator is None
        return dataclasses.replace(found, plain=plain)

    @functools.cached_property
    def _fast_run(self) -> Callable[[], float] | None:
        """The clock reader of :meth:`run`'s first-attempt fast path, when nobody needs the flow."""
        if self.hooks or not self.coordinator.passive or self.policy.profile.routes:
            return None  # profile="auto" picks the profile per request: the flow resolves it
        return monotonic_reader(self.clock)

    def _settled(self, result: AttemptResult, request: Described, wall: float) -> Classified | None:
        """The classification of a first attempt that ends the operation as ok, else None.

        An ``ok`` classification is terminal (the decision stops with its detail, no retry
        time) and, with no conflicting evidence and no method learnt from the attempt, adds
        nothing to the operation's state but its one record.
        """
        seen = result.observation
        if seen.method is not None and request.method is None:
            return None
        classified = classify(self.policy.profile, seen, wall)
        if classified.kind is not Kind.OK or classified.conflicts:
            return None
        return classified


class Begun(FirstAttempt):
    """An uncoordinated operation begun as the flow begins it (its id, its start, its first
    attempt's start and plan), its first attempt made without the generic flow.

    The one sequence of such an operation, for a retrier that takes quick first attempts
    (:func:`quick_first`)::

        begun = Begun(retrier)
        if begun.refused:                   # the plan leaves no room for an attempt
            return begun.go_on(request, perform, None)
        result = ...                        # the first attempt, cut at begun.timeout
        outcome = begun.settle(request, result)
        if outcome is not None:             # it ended the operation ok
            return outcome
        return begun.go_on(request, perform, result)

    ``go_on`` runs the generic flow from the readings already taken (the same clock readings,
    plan and sample: it decides exactly as if it had made the first attempt itself, which it
    never makes again); ``ago_on`` is its async twin. A 2xx handed over before its headers
    are read is :meth:`unread`.
    """

    __slots__ = ("refused", "retrier", "settled")

    refused: bool
    """The plan refused the first attempt (the deadline leaves no room): ``go_on`` ends it."""
    retrier: FirstAttempts
    settled: bool
    """:meth:`settle` found the first attempt did not end the operation ok."""

    def __init__(self, retrier: FirstAttempts) -> None:
        ids = _operation_id
        self.prefix = ids.prefix
        self.number = next(ids.counter)
        monotonic = retrier._readers[0]
        self.started = t0 = monotonic()
        self.attempt_started = t1 = monotonic()
        policy = retrier.policy
        deadline = policy.deadline  # the plan of a fresh state (OperationState.start's)
        plan = plan_next(policy, 0, None if deadline is None else t0 + deadline - t1, None)
        self.retrier = retrier
        self.settled = False
        if isinstance(plan, Stop):
            self.refused = True
            self.timeout = None
        else:
            self.refused = False
            self.timeout = plan

    def settle(self, request: Described, result: AttemptResult) -> Outcome[Any] | None:
        """After the first attempt: the operation's outcome when the attempt ended it ok, else
        None (its readings kept for :meth:`go_on`)."""
        retrier = self.retrier
        monotonic = retrier._readers[0]
        self.attempt_ended = monotonic()
        fast = retrier._fast if result.observation is _PLAIN_VALUE else None
        if fast is not None:  # worked out once for the policy
            seen = fast.classified
        else:
            self.wall = wall = retrier._readers[1]()
            found = retrier._settled(result, request, wall)
            if found is None:
                self.settled = True
                return None
            seen = found
        return self._ok(request, result.value, seen, result.payload)

    def _ok(self, request: Described, value: object, seen: Classified,
            payload: object) -> Outcome[Any]:
        """The outcome of a first attempt that ended the operation ok (its end read now)."""
        retrier = self.retrier
        retrier.random.random()  # the flow draws one sample per decision
        self.ended = retrier._readers[0]()
        self.value = value
        self.seen = seen
        self.method = request.method
        self.key = request.key
        self.job_id = request.job_id
        self.policy = retrier.policy
        self.payload = payload
        return first_ok(self)

    def unread(self, value: object, status: int, read: Callable[[Any], tuple[tuple[str, str], ...]],
               headers: object, method: str, key: str, job_id: str | None) -> FirstAttempt:
        """A first attempt's 2xx handed over before its headers are read (the retrier's profile
        reads every 2xx nobody reads the body of as ``ok``: see
        :func:`~retrybudget.core.classify.ok_unread`): the readings the flow would take now,
        and ``headers`` (a snapshot of the response's) read by ``read`` when the outcome's
        evidence is. :func:`~retrybudget.core.outcome.first_ok` of it is the outcome, built
        when first read. ``job_id`` None: the retrier's."""
        retrier = self.retrier
        monotonic, wall = retrier._readers
        self.attempt_ended = monotonic()
        self.status = status
        self.read = read
        self.headers = headers
        self.wall = wall()
        retrier.random.random()  # the flow draws one sample per decision
        self.ended = monotonic()
        self.value = value
        self.seen = None
        self.method = method
        self.key = key
        self.job_id = retrier.job_id if job_id is None else job_id
        self.policy = retrier.policy
        self.payload = None
        return self

    def _flow(self, request: RequestInfo, result: AttemptResult | None) -> FlowGen | Outcome[Any]:
        """The generic flow from where the first attempt left it (its outcome, when an
        attempt not settled yet ended it ok)."""
        op_id = _format_id(self.prefix, self.number)
        retrier = self.retrier
        if result is None:  # refused: the flow ends the operation from the same plan
            return retrier._replayed(op_id, request, [self.started, self.attempt_started], [])
        if not self.settled:
            outcome = self.settle(request, result)
            if outcome is not None:
                return outcome
        flow = retrier._replayed(op_id, request,
                                 [self.started, self.attempt_started, self.attempt_ended],
                                 [self.wall])
        action = flow.send(None)
        assert isinstance(action, Attempt)  # noqa: S101 - the same readings, the same plan
        return flow

    def go_on(self, request: RequestInfo, perform: Callable[[Attempt], AttemptResult],
              result: AttemptResult | None) -> Outcome[object]:
        """The operation to its end from its first attempt (``result``; None: the plan refused
        it), in the generic flow, ``perform`` making each further attempt. An attempt not
        settled yet is settled first (one that ended ok ends the operation here)."""
        flow = self._flow(request, result)
        if isinstance(flow, Outcome):
            return flow
        return self.retrier._drive(flow, perform, result)

    async def ago_on(self, request: RequestInfo,
                     perform: Callable[[Attempt], Awaitable[AttemptResult]],
                     result: AttemptResult | None) -> Outcome[object]:
        """The async twin of :meth:`go_on`."""
        flow = self._flow(request, result)
        if isinstance(flow, Outcome):
            return flow
        return await self.retrier._adrive(flow, perform, result)

    def run(self, request: RequestInfo,
            perform: Callable[[Attempt], AttemptResult]) -> Outcome[object]:
        """The whole sequence, ``perform`` making every attempt (the first one included)."""
        if self.refused:
            return self.go_on(request, perform, None)
        result = perform(Attempt(1, self.timeout))
        outcome = self.settle(request, result)
        return outcome if outcome is not None else self.go_on(request, perform, result)

    async def arun(self, request: RequestInfo,
                   perform: Callable[[Attempt], Awaitable[AttemptResult]]) -> Outcome[object]:
        """The async twin of :meth:`run`."""
        if self.refused:
            return await self.ago_on(request, perform, None)
        result = await perform(Attempt(1, self.timeout))
        outcome = self.settle(request, result)
        return outcome if outcome is not None else await self.ago_on(request, perform, result)


def quick_first(retrier: FirstAttempts) -> bool:
    """Whether ``retrier`` takes quick first attempts (:class:`Begun`): no hook, a passive
    coordinator, one profile (``profile="auto"`` resolves per request, in the flow)."""
    return retrier._fast_run is not None
