"""A coordinated operation's first attempt made without the generic flow: the coordinator
handed the flow's own actions (merged when the backend merges them)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, cast

from ..core.actions import (
    Acquire,
    Action,
    Admission,
    Admit,
    Attempt,
    AttemptResult,
    Finish,
    Learn,
    Permit,
    RequestInfo,
)
from ..core.classify import (
    Classified,
    Kind,
    ResponseSeen,
    classify,
    ok_unread,
)
from ..core.decide import Retry, Stop, decide, patience, plan_attempt, plan_next, plan_wait
from ..core.flow import FlowGen
from ..core.headers import NO_RATE_LIMIT_INFO, parse_rate_limit_headers
from ..core.outcome import FirstAttempt, Outcome, Reason, first_ok
from ..core.outcome import operation_id as _format_id
from ..core.policy import RateLimitMode
from ..core.state import OperationState
from ..core.throttle import Throttle, ok_throttle, throttle_of
from ._loop import Loop, _operation_id


class _CoordinatedFirst(FirstAttempt):
    """A coordinated operation's first attempt under way: its id (``prefix``, ``number``),
    ``request``, start ``state``, the monotonic and wall readings taken and the samples drawn
    (for a replay); once it ends ok, the rest of the :class:`FirstAttempt` its outcome reads."""

    __slots__ = ("readings", "request", "samples", "state", "walls")

    request: RequestInfo
    state: OperationState
    readings: list[float]
    walls: list[float]
    samples: list[float]


class FirstGate(Protocol):
    """A coordinator's merged admit and acquire of a first attempt (the in-process backend's
    ``_first_gate``): the admission, and the permit when it admits."""

    def __call__(self, key: str, bucket: str, write_gap: float, max_wait: float | None,
                 fail_fast: bool, /) -> tuple[Admission, Permit | None]: ...


class FirstDone(Protocol):
    """A coordinator's merged final learn and finish of an operation (``_first_done``)."""

    def __call__(self, bucket: str, throttle: Throttle | None, lease: str | None, key: str,
                 outcome: Outcome[Any], probe: bool, /) -> None: ...



_GateParts = tuple[FirstGate, FirstDone, "float | None", float, bool, bool]
"""A retrier's :class:`Gated` parts: the merged gate and done calls, the policy's deadline,
what a fresh operation's attempt needs left (:func:`~retrybudget.core.decide.attempt_needs`),
whether it fails fast (its :func:`~retrybudget.core.decide.patience`) and whether its profile
spaces writes."""


class CoordinatedFirst(Loop):
    """The coordinated first attempt of :meth:`Retrier.run` and :meth:`Retrier.arun`."""

    @functools.cached_property
    def _coordinated_first(self) -> bool:
        """Whether :meth:`run` takes the coordinated first-attempt path: an active coordinator,
        no hook, one profile (``profile="auto"`` resolves per request in the flow)."""
        return not self.hooks and not self.coordinator.passive and not self.policy.profile.routes

    @functools.cached_property
    def _gated(self) -> _GateParts | None:
        """What a coordinated first attempt begun the quick way (:class:`Gated`) reads of the
        retrier, worked out once: the coordinator's merged calls and the plan of a fresh
        operation; None when it may not be begun so (the merged calls do not answer it, or the
        profile's gate is not the provider key's own: a bucket or route read from the URL)."""
        policy = self.policy
        profile = policy.profile
        merged = self._merged
        if (not self._coordinated_first or merged is None or profile.bucket_path
                or profile.route_majors):
            return None
        return (*merged, policy.deadline, max(policy.min_attempt_time, 0.0),  # attempt_needs
                policy.rate_limit is RateLimitMode.FAIL_FAST, bool(profile.write_pacing))

    @functools.cached_property
    def _ok_unread(self) -> bool:
        """Whether every 2xx nobody reads the body of classifies as ``ok`` under the profile
        (:func:`~retrybudget.core.classify.ok_unread`): a coordinated 2xx is then classified
        when its outcome's classification is first read (:meth:`Gated.settle_unread`)."""
        return ok_unread(self.policy.profile)

    def _coordinated_gate(self, request: RequestInfo) -> str | None:
        """The one gate a coordinated operation asks (its rate-limit bucket), or None when it
        asks two (a route's bucket and the provider key's): the generic flow then runs."""
        profile = self.policy.profile
        bucket = profile.coordination_key(request.key, request.url, request.method)
        return None if bucket != request.key and profile.route_majors else bucket

    def _coordinated_ok(self, first: _CoordinatedFirst, result: AttemptResult) -> Classified | None:
        """After a coordinated first attempt: its classification when the flow would end the
        operation ok at once, else None. The readings taken (attempt end, wall) go on
        ``first``, and the sample drawn too when the generic flow goes on (it is replayed)."""
        policy, (monotonic, wall) = self.policy, self._readers
        req, state, walls = first.request, first.state, first.walls
        t2, w2 = monotonic(), wall()
        state = state.with_method(result.observation.method)
        classified = classify(policy.profile, result.observation, w2)
        sample = self.random.random()
        decision = decide(policy, state, classified, t2, w2, sample)
        first.readings.append(t2)
        walls.append(w2)
        if (classified.kind is Kind.OK and not classified.conflicts and result.error is None
                and state.method == req.method and isinstance(decision, Stop)
                and decision.reason is Reason.OK and decision.retry_at is None
                and decision.detail == classified.detail):
            return classified
        first.samples.append(sample)  # the generic flow draws it again: replayed
        return None

    def _coordinated_outcome(self, first: _CoordinatedFirst, plan: float | None,
                             result: AttemptResult, classified: Classified) -> Outcome[Any]:
        """The outcome of a coordinated first attempt that ended ok (read after the learn)."""
        req = first.request
        first.started, _ta, first.attempt_started, first.attempt_ended = first.readings
        first.ended = self._readers[0]()
        first.timeout = plan
        first.value = result.value
        first.seen = classified
        first.method = req.method
        first.key = req.key
        first.job_id = req.job_id
        first.policy = self.policy
        first.payload = result.payload
        return first_ok(first)

    def _coordinated_flow(self, first: _CoordinatedFirst, replies: list[object],
                          ) -> tuple[FlowGen, Action]:
        """The generic flow of a coordinated operation, up to where the first attempt's path
        left it: the same clock readings, coordinator answers and sample; its next action."""
        samples, draw = first.samples, self.random.random
        flow = self._replayed(_format_id(first.prefix, first.number), first.request,
                              first.readings, first.walls,
                              lambda: samples.pop() if samples else draw(), coordinated=True)
        action = flow.send(None)
        for reply in replies:
            action = flow.send(reply)
        return flow, action

    def _coordinated_start(self, request: RequestInfo) -> _CoordinatedFirst:
        """A coordinated operation begun as the flow begins it (its id and start reading)."""
        ids = _operation_id
        prefix, number = ids.prefix, next(ids.counter)
        t0 = self._readers[0]()
        state = OperationState.start(self.policy, _format_id(prefix, number), t0,
                                     method=request.method,
                                     has_idempotency_key=request.has_idempotency_key)
        first = _CoordinatedFirst()  # no __init__: filled here, as a tuple would be
        first.prefix, first.number, first.request, first.state = prefix, number, request, state
        first.readings, first.walls, first.samples = [t0], [], []
        return first

    def _coordinated_plan(self, first: _CoordinatedFirst, permit: Permit,
                          ) -> float | Stop | Retry | None:
        """After the gate's permit: the first attempt's plan, or the wait or stop it calls for."""
        (monotonic, wall), state = self._readers, first.state
        ta, wa = monotonic(), wall()
        first.readings.append(ta)
        first.walls.append(wa)
        step = plan_wait(self.policy, state, ta, permit.wait, permit.reason, permit.retry_at, wa)
        if step is not None:
            return step
        t1 = monotonic()
        first.readings.append(t1)
        return plan_attempt(self.policy, state, t1)

    def _run_coordinated(self, perform: Callable[[Attempt], AttemptResult],
                         request: RequestInfo) -> Outcome[object]:
        """:meth:`run` of a coordinated operation: its first attempt without the generic flow.

        The coordinator is handed the actions the flow yields (admit, acquire, the final learn,
        finish: a backend that merges round trips merges these), with the same clock readings
        and sample; an operation that does not end ok at its first attempt goes on in the
        generic flow from those answers (nothing asked twice).
        """
        if self._gated is not None:  # begun the quick way, the same sequence
            return Gated(self, request.key, request.method, request.job_id).run(request, perform)
        coordinator = self.coordinator
        bucket = self._coordinated_gate(request)
        if bucket is None:
            op_id = _operation_id()
            flow, req = self._flow(request, op_id)
            return self._drive(flow, perform, None, req, op_id)
        first = self._coordinated_start(request)
        patient = patience(self.policy, first.state, first.state.started)
        merged = self._merged
        if merged is not None:  # one call admits and acquires, one learns and finishes
            return self._run_merged(perform, request, bucket, first, patient, merged)
        admission = coordinator.handle(Admit(request.key, *patient))
        assert isinstance(admission, Admission)  # noqa: S101 - the coordinators' contract
        if not admission.allowed:
            flow, pending = self._coordinated_flow(first, [admission])
            return self._drive(flow, perform, None, pending=pending)
        permit = coordinator.handle(
            Acquire(bucket, 1, self.policy.profile.write_gap(request.method), *patient))
        assert isinstance(permit, Permit)  # noqa: S101 - the coordinators' contract
        plan = self._coordinated_plan(first, permit)
        if isinstance(plan, Stop | Retry):
            flow, pending = self._coordinated_flow(first, [admission, permit])
            return self._drive(flow, perform, None, pending=pending)
        result = perform(Attempt(1, plan))
        classified = self._coordinated_ok(first, result)
        if classified is None:
            flow, _attempt = self._coordinated_flow(first, [admission, permit])
            return self._drive(flow, perform, result)
        coordinator.handle(Learn(bucket, throttle_of(self.policy.profile, classified), permit.lease,
                                 True))
        outcome = self._coordinated_outcome(first, plan, result, classified)
        coordinator.handle(Finish(request.key, outcome, admission.probe))
        return outcome

    async def _arun_coordinated(self, perform: Callable[[Attempt], Awaitable[AttemptResult]],
                                request: RequestInfo) -> Outcome[object]:
        """The async twin of :meth:`_run_coordinated`."""
        if self._gated is not None:  # begun the quick way, the same sequence
            gated = Gated(self, request.key, request.method, request.job_id)
            return await gated.arun(request, perform)
        coordinator = self.coordinator
        bucket = self._coordinated_gate(request)
        if bucket is None:
            op_id = _operation_id()
            flow, req = self._flow(request, op_id)
            return await self._adrive(flow, perform, None, req, op_id)
        first = self._coordinated_start(request)
        patient = patience(self.policy, first.state, first.state.started)
        merged = self._merged
        if merged is not None:  # one call admits and acquires, one learns and finishes
            return await self._arun_merged(perform, request, bucket, first, patient, merged)
        admission = await coordinator.ahandle(Admit(request.key, *patient))
        assert isinstance(admission, Admission)  # noqa: S101 - the coordinators' contract
        if not admission.allowed:
            flow, pending = self._coordinated_flow(first, [admission])
            return await self._adrive(flow, perform, None, pending=pending)
        permit = await coordinator.ahandle(
            Acquire(bucket, 1, self.policy.profile.write_gap(request.method), *patient))
        assert isinstance(permit, Permit)  # noqa: S101 - the coordinators' contract
        plan = self._coordinated_plan(first, permit)
        if isinstance(plan, Stop | Retry):
            flow, pending = self._coordinated_flow(first, [admission, permit])
            return await self._adrive(flow, perform, None, pending=pending)
        result = await perform(Attempt(1, plan))
        classified = self._coordinated_ok(first, result)
        if classified is None:
            flow, _attempt = self._coordinated_flow(first, [admission, permit])
            return await self._adrive(flow, perform, result)
        await coordinator.ahandle(Learn(bucket, throttle_of(self.policy.profile, classified),
                                        permit.lease, True))
        outcome = self._coordinated_outcome(first, plan, result, classified)
        await coordinator.ahandle(Finish(request.key, outcome, admission.probe))
        return outcome

    @functools.cached_property
    def _merged(self) -> tuple[FirstGate, FirstDone] | None:
        """The coordinator's two merged calls for a first attempt (the in-process backend's),
        or None: each action goes to its ``handle``."""
        found = getattr(self.coordinator, "_first_calls", None)
        return None if found is None else cast("tuple[FirstGate, FirstDone] | None", found())

    def _merged_gate(self, request: RequestInfo, bucket: str, first: _CoordinatedFirst,
                     patient: tuple[float | None, bool], gate: FirstGate,
                     ) -> tuple[Admission, Permit, float | None] | tuple[FlowGen, Action]:
        """The merged admit and acquire of a coordinated first attempt: the admission, permit
        and plan of an attempt to make, or the generic flow and its next action."""
        admission, permit = gate(request.key, bucket, self.policy.profile.write_gap(request.method),
                                 *patient)
        if permit is None:
            return self._coordinated_flow(first, [admission])
        plan = self._coordinated_plan(first, permit)
        if isinstance(plan, Stop | Retry):
            return self._coordinated_flow(first, [admission, permit])
        return admission, permit, plan

    def _merged_end(self, request: RequestInfo, bucket: str, first: _CoordinatedFirst,
                    answers: tuple[Admission, Permit, float | None], result: AttemptResult,
                    classified: Classified, done: FirstDone) -> Outcome[object]:
        """A coordinated first attempt that ended ok: its outcome, learnt and finished in one
        call."""
        admission, permit, plan = answers
        outcome = self._coordinated_outcome(first, plan, result, classified)
        done(bucket, throttle_of(self.policy.profile, classified), permit.lease, request.key,
             outcome, admission.probe)
        return outcome

    def _run_merged(self, perform: Callable[[Attempt], AttemptResult], request: RequestInfo,
                    bucket: str, first: _CoordinatedFirst, patient: tuple[float | None, bool],
                    merged: tuple[FirstGate, FirstDone]) -> Outcome[object]:
        """:meth:`_run_coordinated` with the coordinator's merged calls."""
        answers = self._merged_gate(request, bucket, first, patient, merged[0])
        if len(answers) == 2:
            return self._drive(answers[0], perform, None, pending=answers[1])
        result = perform(Attempt(1, answers[2]))
        classified = self._coordinated_ok(first, result)
        if classified is None:
            flow, _attempt = self._coordinated_flow(first, list(answers[:2]))
            return self._drive(flow, perform, result)
        return self._merged_end(request, bucket, first, answers, result, classified, merged[1])

    async def _arun_merged(self, perform: Callable[[Attempt], Awaitable[AttemptResult]],
                           request: RequestInfo, bucket: str, first: _CoordinatedFirst,
                           patient: tuple[float | None, bool],
                           merged: tuple[FirstGate, FirstDone]) -> Outcome[object]:
        """The async twin of :meth:`_run_merged` (the merged calls never block)."""
        answers = self._merged_gate(request, bucket, first, patient, merged[0])
        if len(answers) == 2:
            return await self._adrive(answers[0], perform, None, pending=answers[1])
        result = await perform(Attempt(1, answers[2]))
        classified = self._coordinated_ok(first, result)
        if classified is None:
            flow, _attempt = self._coordinated_flow(first, list(answers[:2]))
            return await self._adrive(flow, perform, result)
        return self._merged_end(request, bucket, first, answers, result, classified, merged[1])


class Gated(_CoordinatedFirst):
    """A coordinated operation begun the quick way: no :class:`RequestInfo` or state built,
    admitted and its first attempt let go by one call of the coordinator (its merged admit
    and acquire), and an attempt that ends it ok learnt and finished by one more. The same
    clock readings, coordinator answers and sample as the generic flow, in the same order.

    The one sequence of such an operation, for a retrier whose :func:`gated_first` holds::

        gated = Gated(retrier, key, method, job_id)
        if gated.pending:                   # refused, told to wait, or no room for an attempt
            return gated.go_on(request, perform, None)
        result = ...                        # the first attempt, cut at gated.timeout
        outcome = gated.settle(result)
        if outcome is not None:             # it ended the operation ok
            return outcome
        return gated.go_on(request, perform, result)

    ``go_on`` runs the generic flow from the coordinator's answers and the readings already
    taken (nothing asked or sent twice); ``ago_on`` is its async twin.
    """

    __slots__ = ("admission", "done", "pending", "permit", "retrier", "sample", "ta", "taken",
                 "wa")

    admission: Admission
    permit: Permit | None
    """The coordinator's answers (the permit None when the admission refuses): what the flow
    is told."""
    pending: bool
    """The first attempt is not made here: ``go_on`` takes the operation from the answers."""
    taken: int
    """The monotonic readings taken so far (``started``, ``ta``, ``attempt_started``,
    ``attempt_ended``), in the flow's order; the wall readings ``wa`` and ``wall`` with the
    second and the fourth."""

    def __init__(self, retrier: CoordinatedFirst, key: str, method: str | None,
                 job_id: str | None) -> None:
        ids = _operation_id
        self.prefix = ids.prefix
        self.number = next(ids.counter)
        self.retrier = retrier
        self.key = key
        self.method = method
        self.job_id = retrier.job_id if job_id is None else job_id
        self.policy = policy = retrier.policy
        monotonic, wall = retrier._readers
        self.started = t0 = monotonic()
        parts = retrier._gated
        assert parts is not None  # noqa: S101 - gated_first(retrier): the caller's check
        gate, self.done, deadline, needs, fail_fast, writes = parts
        room = None if deadline is None or not fail_fast else (t0 + deadline) - needs - t0
        admission, permit = gate(key, key, policy.profile.write_gap(method) if writes else 0.0,
                                 room, fail_fast)
        self.pending = True
        self.admission, self.permit = admission, permit
        if permit is None:  # refused
            self.taken = 1
            return
        self.ta, self.wa = monotonic(), wall()
        if permit.wait > 0:  # plan_wait's: a wait, or a stop
            self.taken = 2
            return
        self.attempt_started = t1 = monotonic()
        self.taken = 3
        plan = plan_next(policy, 0, None if deadline is None else (t0 + deadline) - t1, None,
                         needs)
        if isinstance(plan, Stop):
            return
        self.timeout = plan
        self.pending = False

    def settle(self, result: AttemptResult) -> Outcome[Any] | None:
        """After the first attempt: the operation's outcome when the attempt ended it ok
        (learnt and finished), else None (its readings and sample kept for :meth:`go_on`)."""
        monotonic, wall = self.retrier._readers
        t2, w2 = monotonic(), wall()
        return self._seen_ok(result, t2, w2)

    def settle_unread(self, value: object, status: int,
                      evidence: tuple[tuple[str, str], ...]) -> Outcome[Any] | AttemptResult:
        """:meth:`settle` of a 2xx whose body nobody read (``evidence``: the classifier's
        headers of it), for a retrier whose :attr:`~CoordinatedFirst._ok_unread` holds: its
        outcome, or the result :meth:`go_on` goes on from. Its rate-limit headers are read
        now (what the coordinator learns), its classification (of kind ``ok``, the same)
        when the outcome's is first read; one whose headers conflict or say its quota is
        exhausted is classified now, as :meth:`settle` classifies it."""
        retrier = self.retrier
        monotonic, wall = retrier._readers
        t2, w2 = monotonic(), wall()
        profile = self.policy.profile
        rate = (parse_rate_limit_headers(evidence, w2, profile.header_rules) if evidence
                else NO_RATE_LIMIT_INFO)
        if rate.conflicts or (rate.remaining == 0 and rate.reset is not None):
            result = AttemptResult(ResponseSeen(status, evidence), value, None)
            outcome = self._seen_ok(result, t2, w2)
            return result if outcome is None else outcome
        retrier.random.random()  # the flow draws one sample per decision
        self.attempt_ended = t2
        self.ended = monotonic()
        self.value = value
        self.seen = None
        self.status, self.read, self.headers, self.wall = status, _as_read, evidence, w2
        self.payload = None
        outcome = first_ok(self)
        key = self.key
        self.done(key, ok_throttle(profile, rate), self.permit.lease,  # type: ignore[union-attr]
                  key, outcome, self.admission.probe)
        return outcome

    def _seen_ok(self, result: AttemptResult, t2: float, w2: float) -> Outcome[Any] | None:
        """:meth:`settle` from the attempt's end read at ``t2`` (wall ``w2``)."""
        retrier = self.retrier
        monotonic = retrier._readers[0]
        seen = result.observation
        profile = self.policy.profile
        classified = classify(profile, seen, w2)
        sample = retrier.random.random()
        # an ok classification stops the operation ok (decide's terminal answer): nothing
        # else to learn of it but its throttle, unless the attempt names a method of its own
        if (classified.kind is not Kind.OK or classified.conflicts or result.error is not None
                or (seen.method is not None and self.method is None)):
            self.attempt_ended, self.wall, self.sample, self.taken = t2, w2, sample, 4
            return None
        self.attempt_ended = t2
        self.ended = monotonic()
        self.value = result.value
        self.seen = classified
        self.payload = result.payload
        outcome = first_ok(self)
        key = self.key
        self.done(key, throttle_of(profile, classified), self.permit.lease,  # type: ignore[union-attr]
                  key, outcome, self.admission.probe)
        return outcome

    def _flow(self, request: RequestInfo) -> tuple[FlowGen, Action | None]:
        """The generic flow from the coordinator's answers (and the attempt made, when there
        was one): the flow and its pending action (None: the attempt's result comes next)."""
        self.request = request
        taken = self.taken
        self.readings = readings = [self.started]
        self.walls, self.samples = [], []
        if taken > 1:
            readings.append(self.ta)
            self.walls.append(self.wa)
        if taken > 2:
            readings.append(self.attempt_started)
        if taken > 3:
            readings.append(self.attempt_ended)
            self.walls.append(self.wall)
            self.samples.append(self.sample)
        permit = self.permit
        answers: list[object] = [self.admission] if permit is None else [self.admission, permit]
        flow, action = self.retrier._coordinated_flow(self, answers)
        return flow, (action if self.pending else None)

    def go_on(self, request: RequestInfo, perform: Callable[[Attempt], AttemptResult],
              result: AttemptResult | None) -> Outcome[object]:
        """The operation to its end in the generic flow, from the answers and readings taken
        (``result``: the first attempt's, None when it was not made here)."""
        flow, pending = self._flow(request)
        return self.retrier._drive(flow, perform, result, pending=pending)

    async def ago_on(self, request: RequestInfo,
                     perform: Callable[[Attempt], Awaitable[AttemptResult]],
                     result: AttemptResult | None) -> Outcome[object]:
        """The async twin of :meth:`go_on`."""
        flow, pending = self._flow(request)
        return await self.retrier._adrive(flow, perform, result, pending=pending)

    def run(self, request: RequestInfo,
            perform: Callable[[Attempt], AttemptResult]) -> Outcome[object]:
        """The whole sequence, ``perform`` making every attempt (the first one included)."""
        if self.pending:
            return self.go_on(request, perform, None)
        result = perform(Attempt(1, self.timeout))
        outcome = self.settle(result)
        return outcome if outcome is not None else self.go_on(request, perform, result)

    async def arun(self, request: RequestInfo,
                   perform: Callable[[Attempt], Awaitable[AttemptResult]]) -> Outcome[object]:
        """The async twin of :meth:`run`."""
        if self.pending:
            return await self.ago_on(request, perform, None)
        result = await perform(Attempt(1, self.timeout))
        outcome = self.settle(result)
        return outcome if outcome is not None else await self.ago_on(request, perform, result)


def _as_read(evidence: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The classifier's headers of a 2xx kept as they were read (:meth:`Gated.settle_unread`)."""
    return evidence


def gated_first(retrier: CoordinatedFirst) -> bool:
    """Whether ``retrier``'s coordinated first attempts may be begun the quick way
    (:class:`Gated`): a transport may then send the first attempt before anything of its
    operation is built."""
    return retrier._gated is not None


def coordinated_first(retrier: CoordinatedFirst) -> bool:
    """Whether :meth:`Retrier.run` makes ``retrier``'s first attempts the coordinated way (an
    active coordinator, no hook, one profile): a transport may then send the first attempt
    before it builds its operation."""
    return retrier._coordinated_first
