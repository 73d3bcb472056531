"""One operation as a sans-I/O flow.

:func:`operation_flow` is a generator that *yields actions* (ask the coordinator,
make an attempt, sleep, report) and receives their results. It never does I/O and
never sleeps: the sync and async drivers perform the actions, so both share every
line of the retry logic (the shape of httpx's ``Auth.auth_flow``).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass

from .._clock import Clock
from ._values import fast_init
from .classify import Kind, Observation, classify
from .decide import OperationState, Retry, Stop, decide, plan_attempt, plan_wait
from .outcome import AttemptRecord, Outcome, Reason, Wait, WaitReason
from .policy import Policy
from .throttle import Throttle, throttle_of

__all__ = [
    "Acquire",
    "Action",
    "Admission",
    "Admit",
    "Attempt",
    "AttemptResult",
    "Finish",
    "Learn",
    "Permit",
    "RequestInfo",
    "Sleep",
    "SpendRetry",
    "draws_on_retry_budget",
    "operation_flow",
]

MAX_COORDINATOR_WAITS = 64
"""Coordinator waits before one attempt at the most (each also pays out of the deadline)."""


@fast_init
@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What the operation is, for decisions, coordination and audit.

    Attributes:
        method: the HTTP method (None for a plain callable: treated as safe to repeat).
        key: the provider key workers coordinate under (host plus rate-limit bucket).
        has_idempotency_key: the request carries an idempotency key.
        url: the request URL, already redacted (never a secret).
        job_id: the caller's fixture or job id.
    """

    method: str | None = None
    key: str = "default"
    has_idempotency_key: bool = False
    url: str | None = None
    job_id: str | None = None


# Actions the flow yields --------------------------------------------------------------


@dataclass(slots=True)
class Admit:
    """Ask the breaker whether this operation may start. Reply: :class:`Admission`."""

    key: str


@dataclass(slots=True)
class Acquire:
    """Ask the gate, pacing and concurrency cap for leave to send. Reply: :class:`Permit`."""

    key: str
    attempt: int


@dataclass(slots=True)
class Attempt:
    """Make attempt ``number`` with ``timeout`` seconds (None: no limit). Reply: :class:`AttemptResult`."""

    number: int
    timeout: float | None


@dataclass(slots=True)
class Sleep:
    """Wait, paid out of the deadline. Reply: None."""

    wait: Wait


@dataclass(slots=True)
class Learn:
    """Report what an attempt showed about the quota (:class:`~retrybudget.core.throttle.Throttle`,
    read with the policy's profile; None if the attempt was not made) and release its lease.
    Reply: None."""

    key: str
    throttle: Throttle | None
    lease: str | None
    final: bool = False
    """True when the operation's :class:`Finish` comes next, with no wait between: a
    coordinator may send this report together with it (one round trip instead of two)."""


@dataclass(slots=True)
class SpendRetry:
    """Ask the shared retry budget for one retry after a failure. Reply: bool.

    Only retries of failures draw on the budget (:func:`draws_on_retry_budget`): a retry
    after a rate limit waits for the instant the provider named, which the coordinator's
    gate already shares with every worker, so it is no part of a retry storm.
    """

    key: str


@dataclass(slots=True)
class Finish:
    """The operation ended: record it (breaker, budget, audit, hooks). Reply: None."""

    key: str
    outcome: Outcome[object]
    probe: bool


def draws_on_retry_budget(kind: Kind) -> bool:
    """Whether a retry after an attempt of this kind asks the shared retry budget.

    Failures do (transient statuses, timeouts, network errors): the budget caps them as a
    share of traffic so an outage cannot become a retry storm. A rate limit does not: its
    retry waits for the provider's own instant behind the shared gate, and refusing it would
    turn a throttled but healthy provider's invitation into a failed operation.
    """
    return kind is not Kind.RATE_LIMITED


Action = Admit | Acquire | Attempt | Sleep | Learn | SpendRetry | Finish
"""Everything the flow may ask a driver to do."""


# Replies -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Admission:
    """The breaker's answer: allowed, as a half-open probe, or refused until ``retry_at``."""

    allowed: bool = True
    probe: bool = False
    retry_at: float | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Permit:
    """The coordinator's answer before an attempt.

    Attributes:
        wait: seconds to wait before asking again (0: go now).
        reason: what the wait is for (gate, pacing, concurrency).
        retry_at: wall-clock time the provider named, for a gate wait.
        lease: a concurrency lease to give back in :class:`Learn`, if one was taken.
    """

    wait: float = 0.0
    reason: WaitReason = WaitReason.GATE
    retry_at: float | None = None
    lease: str | None = None


@dataclass(slots=True)
class AttemptResult:
    """What the driver got from one attempt: the observation and the raw result or error."""

    observation: Observation
    value: object = None
    error: BaseException | None = None


FlowGen = Generator[Action, object, Outcome[object]]


def _conclude(
    policy: Policy,
    request: RequestInfo,
    state: OperationState,
    last: AttemptResult | None,
    reason: Reason,
    retry_at: float | None,
    detail: str,
    now: float,
) -> Outcome[object]:
    """The outcome of an operation that ends now with ``reason``."""
    if last is None:
        value = raw = error = None
    else:
        raw, error = last.value, last.error
        value = raw if reason is Reason.OK else None
    return Outcome(  # positional: the fields in declaration order
        reason, state.operation_id, state.attempts, state.waits, now - state.started,
        retry_at if retry_at is not None else state.retry_at, value, raw, error,
        state.history, detail, state.conflicts, request.key, state.method, request.job_id,
        policy,
    )


def _come_back_at(stop: Stop, wall: float, permit: Permit) -> float | None:
    """When an operation stopped by a coordinator wait should come back: for a rate-limited
    stop, the slot the coordinator offered, never before the gate opens (coming back sooner
    is only told to wait again, and leaves the offered slot unused)."""
    if stop.reason is not Reason.RATE_LIMITED:
        return stop.retry_at
    offered = wall + permit.wait
    return offered if stop.retry_at is None else max(stop.retry_at, offered)


_ADMITTED = Admission()
_GO = Permit()


def operation_flow(
    policy: Policy,
    request: RequestInfo,
    clock: Clock,
    *,
    operation_id: str,
    sample: Callable[[], float],
    coordinated: bool = True,
    report: bool = True,
) -> FlowGen:
    """Run one logical operation as a sequence of actions.

    Args:
        policy: the policy in force.
        request: what the operation is.
        clock: read for the time only; the driver does the sleeping.
        operation_id: this operation's id.
        sample: draws one uniform sample in [0, 1) per decision (jitter).
        coordinated: ask a coordinator (breaker, gate, budget); False skips those actions, as
            if every one answered "go".
        report: yield :class:`Finish` at the end (False when nobody listens).

    Returns:
        The :class:`Outcome`, as the generator's return value.
    """
    key = request.key
    if policy.profile.routes:  # profile="auto": the request host's profile classifies
        policy = policy.replace(profile=policy.profile.resolve(request.url))
    state = OperationState.start(
        policy, operation_id, clock.monotonic(),
        method=request.method, has_idempotency_key=request.has_idempotency_key,
    )
    last: AttemptResult | None = None

    def finish(reason: Reason, retry_at: float | None, detail: str, probe: bool) -> FlowGen:
        outcome = _conclude(policy, request, state, last, reason, retry_at, detail,
                            clock.monotonic())
        if report:
            yield Finish(key, outcome, probe)
        return outcome

    admission = (yield Admit(key)) if coordinated else _ADMITTED
    assert isinstance(admission, Admission)  # noqa: S101 - the drivers' contract
    if not admission.allowed:
        return (yield from finish(Reason.CIRCUIT_OPEN, admission.retry_at,
                                  admission.detail or "circuit open", False))
    probe = admission.probe

    while True:
        permit = _GO
        for _ in range(MAX_COORDINATOR_WAITS if coordinated else 0):
            reply = yield Acquire(key, state.attempts + 1)
            assert isinstance(reply, Permit)  # noqa: S101 - the drivers' contract
            permit = reply
            step = plan_wait(policy, state, clock.monotonic(), permit.wait, permit.reason,
                             permit.retry_at)
            if step is None:
                break
            if isinstance(step, Stop):
                return (yield from finish(step.reason, _come_back_at(step, clock.wall(), permit),
                                          step.detail, probe))
            wait = Wait(step.after, step.reason, step.source, state.attempts)
            yield Sleep(wait)
            state = state.with_wait(wait, step.retry_at)
        else:
            if coordinated:
                return (yield from finish(Reason.DEADLINE, state.retry_at,
                                          "the coordinator kept asking to wait", probe))

        started = clock.monotonic()
        plan = plan_attempt(policy, state, started)
        if isinstance(plan, Stop):
            if coordinated:
                yield Learn(key, None, permit.lease, report)
            return (yield from finish(plan.reason, plan.retry_at, plan.detail, probe))

        result = yield Attempt(state.attempts + 1, plan)
        assert isinstance(result, AttemptResult)  # noqa: S101 - the drivers' contract
        last = result
        state = state.with_method(result.observation.method)
        now, wall = clock.monotonic(), clock.wall()
        classified = classify(policy.profile, result.observation, wall)
        decision = decide(policy, state, classified, now, wall, sample())
        if coordinated:
            yield Learn(key, throttle_of(policy.profile, classified), permit.lease,
                        report and isinstance(decision, Stop))
        if (isinstance(decision, Retry) and coordinated and draws_on_retry_budget(classified.kind)
                and not (yield SpendRetry(key))):
            decision = Stop(Reason.RETRY_BUDGET, decision.retry_at,
                            "the shared retry budget refused a retry")
        record = AttemptRecord(  # positional: the fields in declaration order
            state.attempts + 1, started - state.started, now - started, classified.status,
            None if result.error is None else type(result.error).__name__, classified.kind,
            "retry" if isinstance(decision, Retry) else "stop", decision.detail,
            classified.rate.evidence, plan, classified.sent,
        )
        state = state.with_attempt(record, classified)
        if isinstance(decision, Stop):
            return (yield from finish(decision.reason, decision.retry_at, decision.detail, probe))
        wait = Wait(decision.after, decision.reason, decision.source, state.attempts)
        yield Sleep(wait)
        state = state.with_wait(wait, decision.retry_at)
