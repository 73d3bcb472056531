"""The decision function: retry after a wait, or stop with one outcome.

Everything here is pure: time comes in as arguments, randomness as a uniform
sample drawn once by the caller, and state as immutable values. The contract's
rules 1-8 and 12, hold here:

* a wait is only taken if it ends, with room for another attempt, before the deadline;
  otherwise the operation stops *now* (with ``retry_at`` when the provider named a time);
* after an attempt nothing could cut (a sync plain callable that never took its timeout),
  another is only started when one as long would end by the deadline (:func:`attempt_needs`);
* a rate-limit wait is never shorter than the provider asked;
* a write is retried only if it was never sent, or carries an idempotency key and the
  policy allows that;
* exactly one outcome reason ends each operation.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._values import fast_init
from .classify import Classified, FailureKind, Kind
from .headers import Hint
from .outcome import Reason, WaitReason
from .policy import Policy, RateLimitMode
from .profiles import Profile
from .state import OperationState

__all__ = [
    "MAX_COORDINATOR_WAITS",
    "Decision",
    "Retry",
    "Stop",
    "attempt_needs",
    "decide",
    "declines",
    "draws_on_retry_budget",
    "patience",
    "plan_acquire",
    "plan_attempt",
    "plan_next",
    "plan_wait",
    "rate_limit_wait",
    "retry_refused",
    "wait_room",
]

MAX_COORDINATOR_WAITS = 64
"""Coordinator waits before one attempt at the most (each also pays out of the deadline)."""


@fast_init
@dataclass(frozen=True, slots=True)
class Retry:
    """Wait ``after`` seconds, then try again.

    Attributes:
        after: seconds to wait (never negative).
        reason: what the wait is for.
        source: the header that named it, or ``"policy"``.
        retry_at: wall-clock time the provider named, if it did.
        detail: a short human reason.
    """

    after: float
    reason: WaitReason
    source: str
    retry_at: float | None = None
    detail: str = ""


@fast_init
@dataclass(frozen=True, slots=True)
class Stop:
    """End the operation now with ``reason``.

    Attributes:
        reason: the one outcome reason.
        retry_at: wall-clock time the provider named to come back, if any.
        detail: a short human reason.
    """

    reason: Reason
    retry_at: float | None = None
    detail: str = ""


Decision = Retry | Stop
"""What :func:`decide` returns."""

_TERMINAL = {
    Kind.OK: Reason.OK,
    Kind.NOT_FOUND: Reason.NOT_FOUND,
    Kind.REJECTED: Reason.REJECTED,
    Kind.UNEXPECTED: Reason.UNEXPECTED,
    Kind.INVALID_PAYLOAD: Reason.INVALID_PAYLOAD,
}


def attempt_needs(policy: Policy, state: OperationState, took: float = 0.0) -> float:
    """Seconds of the deadline the next attempt needs left to be started.

    ``min_attempt_time``, and at least the longest attempt so far that nothing could cut at
    its timeout (a sync plain callable that never took its timeout), ``took`` included: the
    length of the attempt just made when nothing could cut it (it is not yet in the state).
    Its timeout cannot stop the next such attempt either: a provider that hangs 2.5 s, asked
    again with 0.5 s left, would keep the operation 2 s past its deadline.
    """
    return max(policy.min_attempt_time, state.longest_unbounded, took)


def wait_room(policy: Policy, state: OperationState, now: float,
              took: float = 0.0) -> float | None:
    """The longest wait that fits at ``now``: one after which another attempt can still start
    inside the deadline (:func:`attempt_needs` before it); None when there is no deadline."""
    if state.deadline_at is None:
        return None
    return state.deadline_at - attempt_needs(policy, state, took) - now


def patience(policy: Policy, state: OperationState, now: float) -> tuple[float | None, bool]:
    """What an operation tells a coordinator before it asks for a slot, at ``now``:
    ``(max_wait, fail_fast)``, the longest wait it would reserve a slot for and whether it
    takes no wait behind a closed gate (:func:`declines`).

    A ``fail_fast`` operation stops for good when it declines a wait: it reserves nothing
    (its :func:`wait_room`). A waiting one that stops at its deadline is told the slot as
    ``retry_at`` and is deferred to it (a job queue runs it then): it keeps that place in
    line (None)."""
    if policy.rate_limit is RateLimitMode.FAIL_FAST:
        return wait_room(policy, state, now), True
    return None, False


def _fits(policy: Policy, state: OperationState, now: float, delay: float,
          took: float = 0.0) -> bool:
    """A wait fits if another attempt can still start inside the deadline after it."""
    room = wait_room(policy, state, now, took)
    return room is None or delay <= room


def _waiting(policy: Policy, state: OperationState, now: float, delay: float,
             took: float) -> str:
    """What would end past the deadline when a wait does not fit: the wait, or the wait and
    the attempt after it when only an attempt nothing cuts is what does not fit."""
    said = f"waiting {delay:.3f}s"
    needs = attempt_needs(policy, state, took)
    if (needs == policy.min_attempt_time or state.deadline_at is None
            or now + delay + policy.min_attempt_time > state.deadline_at):
        return said
    return f"{said} and an attempt as long as the longest so far ({needs:.3f}s; nothing cuts it)"


def declines(wait: float, gated: bool, max_wait: float | None, fail_fast: bool) -> bool:
    """Whether an operation stops rather than take a coordinator wait of ``wait`` seconds
    (``gated``: behind a closed gate), as :func:`plan_wait` decides: it takes no wait behind
    a closed gate when ``fail_fast``, and none longer than ``max_wait`` (its
    :func:`wait_room`; None: any). A coordinator reserves no slot for an operation that
    declines it (:class:`~retrybudget.core.actions.Acquire`)."""
    return wait > 0 and ((gated and fail_fast) or (max_wait is not None and wait > max_wait))


def rate_limit_wait(
    profile: Profile, classified: Classified, streak: int
) -> tuple[float, WaitReason, str]:
    """How long a rate limit asks us to wait: ``(seconds, reason, source)``.

    The provider's named time first (:attr:`Classified.hint`: Retry-After, else a reset when
    the quota is exhausted or its state is not given, plus the profile's slack); else the
    profile's floor, doubled for each repeat. A named time that is now or past
    (``Retry-After: 0``, a date already gone) gives 0 here: :func:`decide` then waits the
    policy's backoff (with jitter), at least the profile's ``zero_hint_wait``.
    """
    hint = classified.hint
    if hint is not None:
        if hint is classified.rate.retry_after:
            return hint.delay, WaitReason.RETRY_AFTER, hint.source
        return hint.delay + (profile.reset_slack if hint.delay > 0 else 0.0), \
            WaitReason.RATE_LIMIT_RESET, hint.source
    floor = profile.rate_limit_floor * profile.rate_limit_multiplier ** min(streak, 32)
    return floor, WaitReason.RATE_LIMIT_BACKOFF, f"profile:{profile.name}"


def _asked(now_wall: float, hint: Hint | None, delay: float) -> tuple[float, str]:
    """``retry_at`` as the provider asked it (before any clamp) and a note of the clamp."""
    if hint is None or hint.asked is None:
        return now_wall + delay, ""
    return now_wall + hint.asked + (delay - hint.delay), (
        f"; {hint.source} asked {hint.asked:.0f}s, clamped to {hint.delay:.0f}s"
    )


def _wait_cap(policy: Policy) -> float | None:
    """The longest single provider wait: the policy's cap, or the profile's (the SDK's)."""
    caps = [c for c in (policy.max_server_wait, policy.profile.longest_wait) if c is not None]
    return min(caps) if caps else None


def decide(
    policy: Policy,
    state: OperationState,
    classified: Classified,
    now: float,
    now_wall: float,
    sample: float,
    took: float = 0.0,
) -> Decision:
    """Decide what follows an attempt.

    Args:
        policy: the policy in force.
        state: the operation's state before the attempt just made is recorded (so
            ``state.attempts + 1`` attempts have been made).
        classified: that attempt's classification.
        now: monotonic now.
        now_wall: wall-clock now (epoch seconds), to report ``retry_at``.
        sample: a uniform sample in [0, 1) for jitter, drawn once by the caller.
        took: how long that attempt took (read by :func:`attempt_needs` when nothing cuts
            the operation's attempts).

    Returns:
        :class:`Retry` or :class:`Stop`; never raises for any classification.
    """
    kind = classified.kind
    terminal = _TERMINAL.get(kind)
    if terminal is not None:
        return Stop(terminal, None, classified.detail)

    may_retry = policy.may_retry(
        state.method, has_idempotency_key=state.has_idempotency_key, sent=classified.sent
    )
    attempts_left = state.attempts + 1 < policy.max_attempts
    after = _after_rate_limit if kind is Kind.RATE_LIMITED else _after_failure
    return after(policy, state, classified, now, now_wall, sample, took,
                 may_retry=may_retry, attempts_left=attempts_left)


def _after_rate_limit(policy: Policy, state: OperationState, classified: Classified, now: float,
                      now_wall: float, sample: float, took: float, *, may_retry: bool,
                      attempts_left: bool) -> Decision:
    """:func:`decide` after a rate-limited attempt: wait for the provider's instant (or back
    off when it named none), unless fail_fast, a write, the attempts, the wait cap or the
    deadline stop it; every stop names the instant the provider asked for."""
    cap = _wait_cap(policy)
    profile = policy.profile
    delay, reason, source = rate_limit_wait(profile, classified, state.rate_limit_streak)
    hint = classified.hint
    limit_at, clamped = _asked(now_wall, hint, delay)
    if delay <= 0:  # the provider named now or a past time: no burst, back off
        delay = max(policy.backoff.delay(state.backoffs, sample), profile.zero_hint_wait)
        reason, source = WaitReason.BACKOFF, "policy"
        if profile.zero_hint_wait and delay == profile.zero_hint_wait:
            reason, source = WaitReason.RATE_LIMIT_BACKOFF, f"profile:{profile.name}"
    if policy.rate_limit is RateLimitMode.FAIL_FAST:
        return Stop(Reason.RATE_LIMITED, limit_at,
                    f"rate limited; fail_fast does not wait{clamped}")
    if not may_retry:
        return Stop(Reason.RATE_LIMITED, limit_at,
                    f"rate limited; a write is not replayed{clamped}")
    if not attempts_left:
        return Stop(Reason.RATE_LIMITED, limit_at, f"rate limited; no attempts left{clamped}")
    if cap is not None and delay > cap:
        return Stop(
            Reason.RATE_LIMITED, limit_at,
            f"rate limited; {delay:.3f}s is over the {cap:g}s wait cap{clamped}",
        )
    if not _fits(policy, state, now, delay, took):
        return Stop(
            Reason.RATE_LIMITED, limit_at,
            f"rate limited; {_waiting(policy, state, now, delay, took)} would end past "
            f"the deadline{clamped}",
        )
    return Retry(delay, reason, source, limit_at, f"rate limited; waiting {delay:.3f}s")


def _after_failure(policy: Policy, state: OperationState, classified: Classified, now: float,
                   now_wall: float, sample: float, took: float, *, may_retry: bool,
                   attempts_left: bool) -> Decision:
    """:func:`decide` after a transient failure (502/503/504, network errors, timeouts): back
    off, or wait the time the provider named for this failure when it is longer, unless a
    write, the attempts, the deadline or the wait cap stop it."""
    if not may_retry:
        return Stop(Reason.NOT_RETRIED, None, f"{classified.detail}; a write is not replayed")
    if not attempts_left:
        return Stop(Reason.EXHAUSTED, None, f"{classified.detail}; no attempts left")
    if classified.failure is FailureKind.TIMEOUT and state.deadline_at is not None and (
        now >= state.deadline_at - policy.min_attempt_time
    ):
        return Stop(Reason.DEADLINE, None, "the attempt ran into the deadline")
    cap = _wait_cap(policy)
    delay = policy.backoff.delay(state.backoffs, sample)
    reason, source = WaitReason.BACKOFF, "policy"
    retry_at = None
    clamped = ""
    # Only a time the provider named for this failure: never a quota reset with quota left.
    hint = classified.hint if policy.profile.transient_hints else None
    if hint is not None:
        retry_at, clamped = _asked(now_wall, hint, hint.delay)
        if hint.delay >= delay:  # a zero or past time falls back to the backoff
            delay, reason, source = hint.delay, WaitReason.RETRY_AFTER, hint.source
        if cap is not None and hint.delay > cap:
            return Stop(Reason.DEADLINE, retry_at,
                        f"the provider's wait is over the wait cap{clamped}")
    if not _fits(policy, state, now, delay, took):
        return Stop(Reason.DEADLINE, retry_at,
                    f"{_waiting(policy, state, now, delay, took)} would end past the "
                    f"deadline{clamped}")
    return Retry(delay, reason, source, retry_at, f"{classified.detail}; retrying")


def draws_on_retry_budget(kind: Kind) -> bool:
    """Whether a retry after an attempt of this kind asks the shared retry budget.

    Failures do (transient statuses, timeouts, network errors): the budget caps them as a
    share of traffic so an outage cannot become a retry storm. A rate limit does not: its
    retry waits for the provider's own instant behind the shared gate, and refusing it would
    turn a throttled but healthy provider's invitation into a failed operation.
    """
    return kind is not Kind.RATE_LIMITED



def plan_attempt(policy: Policy, state: OperationState, now: float) -> float | Stop | None:
    """Before an attempt: its timeout (clipped to what is left), None for no limit, or a Stop."""
    return plan_next(policy, state.attempts, state.remaining(now), state.retry_at,
                     attempt_needs(policy, state))


def plan_next(policy: Policy, attempts: int, remaining: float | None,
              retry_at: float | None, needs: float = 0.0) -> float | Stop | None:
    """:func:`plan_attempt` of a state with ``attempts`` made, ``remaining`` seconds left
    (None: no deadline), ``retry_at`` named and ``needs`` seconds needed by an attempt nothing
    cuts (:func:`attempt_needs`; the first attempt's plan reads no state)."""
    if attempts >= policy.max_attempts:
        return Stop(Reason.EXHAUSTED, retry_at, "no attempts left")
    if remaining is not None and remaining < max(policy.min_attempt_time, 1e-9):
        return Stop(Reason.DEADLINE, retry_at, "no time left for another attempt")
    if remaining is not None and remaining < needs:
        return Stop(Reason.DEADLINE, retry_at,
                    f"{remaining:.3f}s left; nothing cuts an attempt and the longest so far "
                    f"took {needs:.3f}s")
    cap = policy.attempt_timeout
    if remaining is None:
        return cap
    return remaining if cap is None else min(cap, remaining)


def plan_acquire(state: OperationState, waited: int) -> Stop | None:
    """Before asking the coordinator for leave to send: a Stop once it made us wait too often.

    ``waited`` counts the coordinator waits already taken before the coming attempt; after
    :data:`MAX_COORDINATOR_WAITS` of them the operation ends with ``deadline`` instead of
    asking again (each wait paid out of the deadline already; this bounds the round trips).
    """
    if waited < MAX_COORDINATOR_WAITS:
        return None
    return Stop(Reason.DEADLINE, state.retry_at, "the coordinator kept asking to wait")


def plan_wait(
    policy: Policy,
    state: OperationState,
    now: float,
    wait: float,
    reason: WaitReason,
    retry_at: float | None,
    now_wall: float | None = None,
) -> Retry | Stop | None:
    """A coordinator asks for a wait before the next attempt (gate, pacing, concurrency).

    Returns None when there is nothing to wait for. A gate wait (the provider is throttling)
    stops a ``fail_fast`` operation at once; any wait that would end past the deadline stops
    the operation now with ``rate_limited`` and ``retry_at``. A ``rate_limited`` stop names
    when to come back: the slot the coordinator offered (wall-clock ``now_wall`` plus the
    wait, when ``now_wall`` is given), never before the provider's ``retry_at`` (the gate's
    opening). Coming back at the gate's opening when the slot offered is later is only told
    to wait again, and leaves the offered slot unused.
    """
    if wait <= 0:
        return None
    limit_at = retry_at
    if now_wall is not None:
        offered = now_wall + wait
        limit_at = offered if retry_at is None else max(retry_at, offered)
    gated = reason is WaitReason.GATE
    fail_fast = policy.rate_limit is RateLimitMode.FAIL_FAST
    if not declines(wait, gated, wait_room(policy, state, now), fail_fast):
        return Retry(wait, reason, "coordinator", retry_at, f"{reason.value} wait")
    if gated and fail_fast:
        return Stop(Reason.RATE_LIMITED, limit_at, "the provider is throttling; fail_fast")
    ends = Reason.DEADLINE if reason is WaitReason.CONCURRENCY else Reason.RATE_LIMITED
    return Stop(
        ends, limit_at if ends is Reason.RATE_LIMITED else retry_at,
        f"{reason.value} wait of {wait:.3f}s would end past the deadline",
    )


def retry_refused(decision: Retry) -> Stop:
    """The end of an operation whose retry the shared retry budget refused (``SpendRetry``)."""
    return Stop(Reason.RETRY_BUDGET, decision.retry_at, "the shared retry budget refused a retry")
