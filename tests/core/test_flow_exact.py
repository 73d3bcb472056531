"""The flow's rarely taken paths, driven action by action on the fake clock.

:func:`~retrybudget.core.flow.operation_flow` yields actions and receives replies; these tests
play the driver and the coordinator themselves, so every action the flow asks for (and every
field of it) is checked exactly: the stop after a coordinator wait, the limit on coordinator
waits, the lease given back, the probe flag, the attempt numbers and the defaults of
``coordinated`` and ``report``. Each test here kills mutants of ``core/flow.py`` that the
driver-level tests let through (``docs/mutation.md``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from retrybudget import Backoff, FakeClock, Jitter, Policy, Reason, WaitReason
from retrybudget.core.actions import (
    Acquire,
    Admission,
    Admit,
    Attempt,
    AttemptResult,
    Finish,
    Learn,
    Permit,
    RequestInfo,
    Sleep,
    SpendRetry,
)
from retrybudget.core.classify import FailureKind, FailureSeen, ResponseSeen
from retrybudget.core.decide import MAX_COORDINATOR_WAITS
from retrybudget.core.flow import operation_flow
from retrybudget.core.outcome import Outcome

NO_JITTER = Backoff(base=0.5, cap=4.0, multiplier=2.0, jitter=Jitter.NONE)
POLICY = Policy(backoff=NO_JITTER)
OK = AttemptResult(ResponseSeen.of(200), value="body")
UNAVAILABLE = AttemptResult(ResponseSeen.of(503), value="busy")
REFUSED = AttemptResult(FailureSeen(FailureKind.CONNECT, "ConnectionRefusedError"),
                        error=ConnectionRefusedError("refused"))

Reply = Callable[[object, FakeClock], object]
ADMITTED = Admission()


def drive(reply: Reply, *, policy: Policy = POLICY, request: RequestInfo | None = None,
          clock: FakeClock | None = None, limit: int = 500,
          **options: bool) -> tuple[list[object], Outcome[object], FakeClock]:
    """Run one operation's flow: ``reply(action, clock)`` answers each action (a Sleep's
    seconds are slept on the fake clock first). Returns the actions, the outcome and the
    clock. At most ``limit`` actions: a flow that never ends fails the test."""
    clock = FakeClock() if clock is None else clock
    flow = operation_flow(policy, request or RequestInfo(key="k", method="GET"), clock,
                          operation_id="op", sample=lambda: 0.0, **options)
    actions: list[object] = []
    answer: object = None
    for _ in range(limit):
        try:
            action = flow.send(answer)
        except StopIteration as stop:
            return actions, stop.value, clock
        actions.append(action)
        if isinstance(action, Sleep):
            clock.sleep(action.wait.seconds)
        answer = reply(action, clock)
    raise AssertionError(f"the flow asked for more than {limit} actions")


def coordinator(*, admission: Admission = ADMITTED, permits: list[Permit] | None = None,
                results: list[AttemptResult] | None = None, spend: bool = True,
                attempt_takes: float = 0.0, acquire_takes: float = 0.0) -> Reply:
    """A scripted coordinator and provider: the permits in order (then "go"), the attempt
    results in order (then the last again)."""
    permits = list(permits or [])
    results = list(results or [OK])

    def reply(action: object, clock: FakeClock) -> object:
        if isinstance(action, Admit):
            return admission
        if isinstance(action, Acquire):
            clock.sleep(acquire_takes)
            return permits.pop(0) if permits else Permit(lease="L")
        if isinstance(action, Attempt):
            clock.sleep(attempt_takes)
            return results.pop(0) if len(results) > 1 else results[0]
        if isinstance(action, SpendRetry):
            return spend
        return None

    return reply


def kinds(actions: list[object]) -> list[str]:
    return [type(a).__name__ for a in actions]


def assert_detail(outcome: Outcome[object]) -> None:
    """Every stop explains itself (the words are free text for people, so not pinned)."""
    assert isinstance(outcome.detail, str)
    assert outcome.detail


# A stop after a coordinator wait: the lease goes back, the stop is the flow's ----------------

def test_a_coordinator_wait_that_eats_the_attempt_time_stops_with_deadline_and_gives_the_lease_back(
) -> None:
    # the gate's wait fits exactly (it leaves min_attempt_time) but asking again took 0.5 s
    policy = POLICY.replace(deadline=10.0, min_attempt_time=1.0)
    gate = Permit(wait=9.0, reason=WaitReason.GATE, retry_at=1_800_000_009.0, lease=None)
    reply = coordinator(permits=[gate, Permit(lease="L7")])
    asked: list[Acquire] = []

    def slow_second_acquire(action: object, clock: FakeClock) -> object:
        if isinstance(action, Acquire):
            asked.append(action)
            if len(asked) == 2:
                clock.sleep(0.5)
        return reply(action, clock)

    actions, outcome, _clock = drive(slow_second_acquire, policy=policy)
    assert kinds(actions) == ["Admit", "Acquire", "Sleep", "Acquire", "Learn", "Finish"]
    learn, finish = actions[4], actions[5]
    assert isinstance(learn, Learn)
    assert isinstance(finish, Finish)
    assert (learn.key, learn.throttle, learn.lease, learn.final) == ("k", None, "L7", True)
    assert (outcome.reason, outcome.attempts, outcome.elapsed) == (Reason.DEADLINE, 0, 9.5)
    assert outcome.retry_at == 1_800_000_009.0  # the instant the gate named, kept
    assert_detail(outcome)
    assert [(w.seconds, w.reason, w.source, w.attempt) for w in outcome.waits] == [
        (9.0, WaitReason.GATE, "coordinator", 0)]
    assert (finish.key, finish.outcome) == ("k", outcome)
    assert finish.probe is False


def test_a_coordinator_that_keeps_asking_to_wait_is_left_after_exactly_64_waits() -> None:
    gate = Permit(wait=0.5, reason=WaitReason.GATE, retry_at=1_800_000_040.0, lease="L")
    reply = coordinator(permits=[gate] * (MAX_COORDINATOR_WAITS + 5))
    actions, outcome, _clock = drive(reply, policy=POLICY.replace(deadline=None), clock=FakeClock())
    assert MAX_COORDINATOR_WAITS == 64
    assert kinds(actions) == ["Admit"] + ["Acquire", "Sleep"] * 64 + ["Finish"]
    assert [a.attempt for a in actions if isinstance(a, Acquire)] == [1] * 64
    assert (outcome.reason, outcome.attempts) == (Reason.DEADLINE, 0)
    assert_detail(outcome)
    assert outcome.retry_at == 1_800_000_040.0  # the gate's instant, remembered
    assert outcome.elapsed == 32.0
    assert {(w.seconds, w.reason, w.source, w.attempt) for w in outcome.waits} == {
        (0.5, WaitReason.GATE, "coordinator", 0)}
    finish = actions[-1]
    assert isinstance(finish, Finish)
    assert (finish.key, finish.probe) == ("k", False)


def test_the_last_of_the_64_waits_may_still_be_followed_by_the_attempt() -> None:
    pacing = Permit(wait=0.25, reason=WaitReason.PACING)
    reply = coordinator(permits=[pacing] * (MAX_COORDINATOR_WAITS - 1) + [Permit(lease="L")])
    actions, outcome, _ = drive(reply, policy=POLICY.replace(deadline=None))
    assert kinds(actions)[-4:] == ["Acquire", "Attempt", "Learn", "Finish"]
    assert kinds(actions).count("Sleep") == 63
    assert (outcome.reason, outcome.attempts) == (Reason.OK, 1)


@pytest.mark.parametrize("probe", [True, False])
def test_every_stop_after_admission_reports_whether_it_was_a_probe(probe: bool) -> None:
    admitted = Admission(probe=probe)
    endless = coordinator(admission=admitted,
                          permits=[Permit(wait=0.5, reason=WaitReason.PACING)] * 70)
    gate = coordinator(admission=admitted, permits=[
        Permit(wait=30.0, reason=WaitReason.GATE, retry_at=1_800_000_030.0)])
    slow = coordinator(admission=admitted, acquire_takes=1.5)  # no time left to attempt
    cases = ((endless, POLICY.replace(deadline=None), Reason.DEADLINE),
             (gate, POLICY.replace(rate_limit="fail_fast"), Reason.RATE_LIMITED),
             (slow, POLICY.replace(deadline=2.0, min_attempt_time=1.0), Reason.DEADLINE),
             (coordinator(admission=admitted), POLICY, Reason.OK))
    for reply, policy, reason in cases:
        actions, outcome, _ = drive(reply, policy=policy)
        finish = actions[-1]
        assert outcome.reason is reason
        assert_detail(outcome)
        assert isinstance(finish, Finish)
        assert finish.probe is probe, reason


def test_a_refused_admission_reports_no_probe_and_its_own_words() -> None:
    shut = Admission(allowed=False, probe=True, retry_at=1_800_000_009.0)
    actions, outcome, _ = drive(coordinator(admission=shut))
    assert kinds(actions) == ["Admit", "Finish"]
    assert (outcome.reason, outcome.retry_at, outcome.attempts) == (
        Reason.CIRCUIT_OPEN, 1_800_000_009.0, 0)
    assert_detail(outcome)
    assert isinstance(actions[-1], Finish)
    assert actions[-1].probe is False


# What a stop at the coordinator names -------------------------------------------------------

def test_a_gate_stop_without_an_instant_names_now_plus_the_gates_wait() -> None:
    gate = Permit(wait=30.0, reason=WaitReason.GATE)
    _actions, outcome, clock = drive(coordinator(permits=[gate]),
                                    policy=POLICY.replace(rate_limit="fail_fast"))
    assert (outcome.reason, outcome.attempts) == (Reason.RATE_LIMITED, 0)
    assert outcome.retry_at == clock.wall() + 30.0


def test_a_gate_stop_with_an_instant_names_the_instant() -> None:
    gate = Permit(wait=30.0, reason=WaitReason.GATE, retry_at=1_800_000_045.0)
    _, outcome, _ = drive(coordinator(permits=[gate]), policy=POLICY.replace(deadline=10.0))
    assert (outcome.reason, outcome.retry_at) == (Reason.RATE_LIMITED, 1_800_000_045.0)


def test_a_concurrency_wait_past_the_deadline_names_no_instant() -> None:
    busy = Permit(wait=30.0, reason=WaitReason.CONCURRENCY)
    actions, outcome, _ = drive(coordinator(permits=[busy]), policy=POLICY.replace(deadline=10.0))
    assert (outcome.reason, outcome.retry_at, outcome.attempts) == (Reason.DEADLINE, None, 0)
    assert kinds(actions) == ["Admit", "Acquire", "Finish"]


# Attempt numbers, Learn's final flag, the retry budget ---------------------------------------

def test_attempts_are_numbered_and_learn_says_which_report_is_the_last() -> None:
    reply = coordinator(results=[UNAVAILABLE, REFUSED, OK])
    actions, outcome, _ = drive(reply)
    assert kinds(actions) == ["Admit",
                              "Acquire", "Attempt", "Learn", "SpendRetry", "Sleep",
                              "Acquire", "Attempt", "Learn", "SpendRetry", "Sleep",
                              "Acquire", "Attempt", "Learn", "Finish"]
    # each attempt's timeout is what is left of the policy's 10 s deadline
    assert [(a.number, a.timeout) for a in actions if isinstance(a, Attempt)] == [
        (1, 10.0), (2, 9.5), (3, 8.5)]
    assert [a.attempt for a in actions if isinstance(a, Acquire)] == [1, 2, 3]
    assert [(a.lease, a.final) for a in actions if isinstance(a, Learn)] == [
        ("L", False), ("L", False), ("L", True)]
    assert [(w.seconds, w.attempt) for w in outcome.waits] == [(0.5, 1), (1.0, 2)]
    assert (outcome.reason, outcome.attempts, outcome.value, outcome.last) == (
        Reason.OK, 3, "body", "body")


def test_without_a_listener_no_report_is_final_and_nothing_is_finished() -> None:
    actions, outcome, _ = drive(coordinator(results=[UNAVAILABLE, OK]), report=False)
    assert "Finish" not in kinds(actions)
    assert [a.final for a in actions if isinstance(a, Learn)] == [False, False]
    assert outcome.reason is Reason.OK
    # the plan_attempt stop's Learn is not final either
    slow = coordinator(acquire_takes=1.5)
    actions, outcome, _ = drive(slow, policy=POLICY.replace(deadline=2.0, min_attempt_time=1.0),
                                report=False)
    assert kinds(actions) == ["Admit", "Acquire", "Learn"]
    assert isinstance(actions[-1], Learn)
    assert actions[-1].final is False
    assert outcome.reason is Reason.DEADLINE


def test_the_flow_is_coordinated_and_reported_unless_told_otherwise() -> None:
    actions, outcome, _ = drive(coordinator())
    assert kinds(actions) == ["Admit", "Acquire", "Attempt", "Learn", "Finish"]
    assert isinstance(actions[-1], Finish)
    assert actions[-1].outcome == outcome


def test_an_uncoordinated_flow_asks_no_coordinator_anything() -> None:
    actions, outcome, _ = drive(coordinator(results=[UNAVAILABLE, OK]), coordinated=False)
    assert kinds(actions) == ["Attempt", "Sleep", "Attempt", "Finish"]
    assert (outcome.reason, outcome.attempts) == (Reason.OK, 2)
    # nor when no time is left for an attempt: the stop needs no lease given back
    slow = coordinator(attempt_takes=1.5, results=[UNAVAILABLE])
    actions, outcome, _ = drive(slow, policy=POLICY.replace(deadline=2.5, min_attempt_time=1.0),
                                coordinated=False)
    assert kinds(actions) == ["Attempt", "Finish"]
    assert outcome.reason is Reason.DEADLINE


def test_a_refused_retry_ends_the_operation_after_its_record_is_kept() -> None:
    actions, outcome, _ = drive(coordinator(results=[UNAVAILABLE, OK], spend=False))
    assert kinds(actions) == ["Admit", "Acquire", "Attempt", "Learn", "SpendRetry", "Finish"]
    assert (outcome.reason, outcome.attempts, outcome.value, outcome.last) == (
        Reason.RETRY_BUDGET, 1, None, "busy")
    assert [(r.number, r.status, r.decision, r.detail) for r in outcome.history] == [
        (1, 503, "stop", "the shared retry budget refused a retry")]


def test_a_rate_limits_throttle_is_learned_as_the_profile_reads_it() -> None:
    throttled = AttemptResult(ResponseSeen.of(429, {"Retry-After": "7"}))
    actions, outcome, _ = drive(coordinator(results=[throttled, OK]))
    learned = [a.throttle for a in actions if isinstance(a, Learn)]
    assert learned[0] is not None
    assert learned[1] is not None
    assert (learned[0].throttled, learned[0].hint) == (True, 7.0)
    assert (learned[1].throttled, learned[1].hint) == (False, None)
    assert [w.seconds for w in outcome.waits] == [7.0]


def test_a_plain_call_whose_failure_names_a_post_is_not_sent_again() -> None:
    sent_post = AttemptResult(ResponseSeen(503, method="POST"), value="busy")
    actions, outcome, _ = drive(coordinator(results=[sent_post, OK]),
                                request=RequestInfo(key="k", method=None))
    assert (outcome.reason, outcome.attempts, outcome.method) == (Reason.NOT_RETRIED, 1, "POST")
    assert "SpendRetry" not in kinds(actions)


def test_an_auto_profile_classifies_with_the_request_hosts_profile() -> None:
    exhausted = AttemptResult(ResponseSeen.of(
        403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(1_800_000_000 + 20)}))
    request = RequestInfo(key="api.github.com", method="GET",
                          url="https://api.github.com/repos/o/r")
    _, outcome, _ = drive(coordinator(results=[exhausted, OK]),
                          policy=POLICY.replace(profile="auto", deadline=60.0), request=request)
    assert outcome.policy is not None
    assert outcome.policy.profile.name == "github"
    # GitHub's 403 with no quota left is a rate limit: wait for the reset plus GitHub's 1 s
    assert (outcome.reason, outcome.attempts) == (Reason.OK, 2)
    assert [(w.seconds, w.reason) for w in outcome.waits] == [(21.0, WaitReason.RATE_LIMIT_RESET)]
