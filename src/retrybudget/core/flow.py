"""One operation as a sans-I/O flow.

:func:`operation_flow` is a generator that *yields actions* (ask the coordinator,
make an attempt, sleep, report) and receives their results. It never does I/O and
never sleeps: the sync and async drivers perform the actions, so both share every
line of the retry logic (the shape of httpx's ``Auth.auth_flow``).
"""

from __future__ import annotations

from collections.abc import Callable, Generator

from .._clock import Clock
from . import actions
from .classify import classify
from .decide import (
    MAX_COORDINATOR_WAITS,
    Retry,
    Stop,
    decide,
    draws_on_retry_budget,
    patience,
    plan_acquire,
    plan_attempt,
    plan_wait,
    retry_refused,
)
from .outcome import AttemptRecord, Outcome, Reason, Wait
from .policy import Policy
from .state import OperationState
from .throttle import Throttle, throttle_of

__all__ = ["FlowGen", "operation_flow"]

FlowGen = Generator[actions.Action, object, Outcome[object]]
"""What :func:`operation_flow` returns: yields actions, is sent their replies, returns the outcome."""


def _conclude(
    policy: Policy,
    request: actions.RequestInfo,
    state: OperationState,
    last: actions.AttemptResult | None,
    reason: Reason,
    retry_at: float | None,
    detail: str,
    now: float,
) -> Outcome[object]:
    """The outcome of an operation that ends now with ``reason``."""
    if last is None:
        value = raw = error = payload = None
    else:
        raw, error = last.value, last.error
        value, payload = (raw, last.payload) if reason is Reason.OK else (None, None)
    return Outcome(
        reason=reason, operation_id=state.operation_id, attempts=state.attempts,
        waits=state.waits, elapsed=now - state.started,
        retry_at=retry_at if retry_at is not None else state.retry_at, value=value, last=raw,
        error=error, history=state.history, detail=detail, conflicts=state.conflicts,
        key=request.key, method=state.method, job_id=request.job_id, policy=policy,
        payload=payload,
    )


_ADMITTED = actions.Admission()
_GO = actions.Permit()
_Asked = Generator[actions.Action, object, "tuple[actions.Permit, Retry | Stop | None]"]


def _ask_gates(policy: Policy, state: OperationState, clock: Clock, gates: tuple[str, ...],
               bucket: str, first: bool) -> _Asked:
    """Ask each gate in turn (the provider key's, then the route's); the permit of the last
    one asked and the wait or stop it calls for (None: go). The provider key's gate is only
    looked at: a lease it hands out is given back at once. Each is told the longest wait the
    operation takes (``first``: the operation's first acquire, at its start)."""
    permit, step = _GO, None
    # what the operation would wait (its first acquire's at its start: no reading taken)
    room, fail_fast = patience(policy, state, state.started if first else clock.monotonic())
    for gate in gates:
        own = gate == bucket
        reply = yield actions.Acquire(gate, state.attempts + 1,
                              policy.profile.write_gap(state.method) if own else 0.0,
                              room, fail_fast)
        assert isinstance(reply, actions.Permit)  # noqa: S101 - the drivers' contract
        permit = reply
        step = plan_wait(policy, state, clock.monotonic(), permit.wait, permit.reason,
                         permit.retry_at, clock.wall())
        if not own and permit.lease is not None:
            yield actions.Learn(gate, None, permit.lease)
            permit = _GO
        if step is not None:
            break
    return permit, step


def _learn(gates: tuple[str, ...], scope: str, throttle: Throttle, lease: str | None,
           final: bool) -> Generator[actions.Action, object, None]:
    """Report an attempt's throttle under its bucket, or, for a rate limit of the global scope
    when the bucket is a route, under the provider key (every route waits), the route's lease
    given back."""
    if len(gates) == 2 and scope == "global":
        yield actions.Learn(gates[1], None, lease)
        yield actions.Learn(gates[0], throttle, None, final)
    else:
        yield actions.Learn(gates[-1], throttle, lease, final)


def _after_attempt(policy: Policy, state: OperationState, clock: Clock, sample: Callable[[], float],
                   result: actions.AttemptResult, attempt: tuple[float, float | None],
                   coordinated: tuple[str, tuple[str, ...], str | None] | None, report: bool,
                   ) -> Generator[actions.Action, object, tuple[OperationState, Retry | Stop]]:
    """After an attempt (started at ``attempt[0]`` with timeout ``attempt[1]``): classify it,
    decide, tell the coordinator (``coordinated``: the provider key, the gates and the
    permit's lease; None: uncoordinated), ask the shared budget for a retry of a failure; the
    state with the attempt's record, and the decision."""
    started, plan = attempt
    state = state.with_method(result.observation.method)
    now, wall = clock.monotonic(), clock.wall()
    classified = classify(policy.profile, result.observation, wall)
    decision = decide(policy, state, classified, now, wall, sample(),
                      0.0 if result.bounded else now - started)
    if coordinated is not None:
        key, gates, lease = coordinated
        yield from _learn(gates, classified.scope, throttle_of(policy.profile, classified),
                          lease, report and isinstance(decision, Stop))
        if (isinstance(decision, Retry) and draws_on_retry_budget(classified.kind)
                and not (yield actions.SpendRetry(key))):
            decision = retry_refused(decision)
    record = AttemptRecord(
        number=state.attempts + 1, started=started - state.started, elapsed=now - started,
        status=classified.status,
        error=None if result.error is None else type(result.error).__name__,
        kind=classified.kind, decision="retry" if isinstance(decision, Retry) else "stop",
        detail=decision.detail, evidence=classified.rate.evidence, timeout=plan,
        sent=classified.sent,
    )
    return state.with_attempt(record, classified, result.bounded), decision


def _gates(policy: Policy, request: actions.RequestInfo) -> tuple[Policy, str, tuple[str, ...]]:
    """The policy in force (``profile="auto"``: the request host's profile classifies), the
    rate-limit bucket and the gates an attempt asks.

    The gate and pacing are the rate-limit bucket's (Slack: the Web API method's; Discord:
    the route's). A route's request also passes the provider key's gate, which a rate limit
    of the global scope closes for every route.
    """
    if policy.profile.routes:
        policy = policy.replace(profile=policy.profile.resolve(request.url))
    key = request.key
    bucket = policy.profile.coordination_key(key, request.url, request.method)
    return policy, bucket, (key, bucket) if bucket != key and policy.profile.route_majors else (bucket,)


def _wait(state: OperationState, step: Retry) -> Generator[actions.Action, object, OperationState]:
    """Take a wait the decision functions asked for: yield the Sleep; the state that records it."""
    wait = Wait(step.after, step.reason, step.source, state.attempts)
    yield actions.Sleep(wait)
    return state.with_wait(wait, step.retry_at)


def _acquire(policy: Policy, state: OperationState, clock: Clock, gates: tuple[str, ...], bucket: str,
             ) -> Generator[actions.Action, object, tuple[OperationState, actions.Permit, Stop | None]]:
    """Ask the gates until they let the next attempt go, taking each wait they ask for: the
    state with those waits, the last permit, and the stop when one ends the operation
    (bounded: :func:`plan_acquire` stops it after ``MAX_COORDINATOR_WAITS`` waits)."""
    permit: actions.Permit = _GO
    for waited in range(MAX_COORDINATOR_WAITS + 1):
        if (capped := plan_acquire(state, waited)) is not None:
            return state, permit, capped
        permit, step = yield from _ask_gates(policy, state, clock, gates, bucket,
                                             waited == 0 and state.attempts == 0)
        if step is None:
            break
        if isinstance(step, Stop):
            return state, permit, step
        state = yield from _wait(state, step)
    return state, permit, None


def operation_flow(policy: Policy, request: actions.RequestInfo, clock: Clock, *, operation_id: str,
                   sample: Callable[[], float], coordinated: bool = True,
                   report: bool = True) -> FlowGen:
    """Run one logical operation as a sequence of actions; the generator returns its
    :class:`Outcome`.

    Args:
        policy: the policy in force.
        request: what the operation is.
        clock: read for the time only; the driver does the sleeping.
        operation_id: this operation's id.
        sample: draws one uniform sample in [0, 1) per decision (jitter).
        coordinated: ask a coordinator (breaker, gate, budget); False: as if each said "go".
        report: yield :class:`~.actions.Finish` at the end (False when nobody listens).
    """
    policy, bucket, gates = _gates(policy, request)
    key = request.key
    state = OperationState.start(
        policy, operation_id, clock.monotonic(),
        method=request.method, has_idempotency_key=request.has_idempotency_key,
    )
    last: actions.AttemptResult | None = None

    def finish(stop: Stop, probe: bool) -> FlowGen:  # end as ``stop`` says, and report it
        outcome = _conclude(policy, request, state, last, stop.reason, stop.retry_at, stop.detail,
                            clock.monotonic())
        if report:
            yield actions.Finish(key, outcome, probe)
        return outcome

    admission = (yield actions.Admit(key, *patience(policy, state, state.started))
                 ) if coordinated else _ADMITTED
    assert isinstance(admission, actions.Admission)  # noqa: S101 - the drivers' contract
    if not admission.allowed:
        return (yield from finish(Stop(Reason.CIRCUIT_OPEN, admission.retry_at,
                                       admission.detail or "circuit open"), False))
    probe = admission.probe

    while True:
        permit = _GO
        if coordinated:
            state, permit, step = yield from _acquire(policy, state, clock, gates, bucket)
            if step is not None:
                return (yield from finish(step, probe))
        started = clock.monotonic()
        plan = plan_attempt(policy, state, started)
        if isinstance(plan, Stop):
            if coordinated:
                yield actions.Learn(bucket, None, permit.lease, report)
            return (yield from finish(plan, probe))

        result = yield actions.Attempt(state.attempts + 1, plan)
        assert isinstance(result, actions.AttemptResult)  # noqa: S101 - the drivers' contract
        last = result
        state, decision = yield from _after_attempt(
            policy, state, clock, sample, result, (started, plan),
            (key, gates, permit.lease) if coordinated else None, report)
        if isinstance(decision, Stop):
            return (yield from finish(decision, probe))
        state = yield from _wait(state, decision)
