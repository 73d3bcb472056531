"""Exact-value tests for the contract rules a plausible bug could break silently.

Each test pins one promise to the exact numbers on the fake clock (never an approximation),
so the one-line mutation that breaks the promise fails it. ``tests/project/test_mutants.py`` applies
each of those mutations to a copy of the source and checks that the test named here fails.
"""

from __future__ import annotations

import random

import pytest

from retrybudget import (
    Backoff,
    FakeClock,
    Jitter,
    Policy,
    RateLimitMode,
    Reason,
    ResponseSeen,
    Retrier,
    WaitReason,
    get_profile,
)
from retrybudget.coordination import CoordinationConfig, Coordinator, GateConfig, MemoryCoordinator
from retrybudget.core.actions import Admission, Permit
from retrybudget.core.classify import FailureKind, FailureSeen, Kind, classify
from retrybudget.core.decide import (
    MAX_COORDINATOR_WAITS,
    Retry,
    Stop,
    decide,
    plan_acquire,
    plan_attempt,
    plan_wait,
    rate_limit_wait,
)
from retrybudget.core.headers import MAX_HINT_SECONDS
from retrybudget.core.state import OperationState
from retrybudget.core.throttle import throttle_of
from retrybudget.testing import ScriptedProvider, json_payload

NO_JITTER = Backoff(base=0.5, cap=4.0, multiplier=2.0, jitter=Jitter.NONE)
OK = {"status": 200, "body": {"available": True}}
WALL0 = 1_800_000_000.0  # the FakeClock's wall-clock start: a whole second


def run(script, clock, *, method="GET", coordinator=None, **policy_changes):
    policy = Policy(backoff=NO_JITTER, validator=json_payload).replace(**policy_changes)
    provider = ScriptedProvider(script, clock)
    extra = {} if coordinator is None else {"coordinator": coordinator}
    retrier = Retrier(policy=policy, clock=clock, random=random.Random(0), method=method,
                      **extra)
    return retrier.call(provider, method), provider


# Rule 4/5: GitHub's primary limit waits for the reset plus one second ---------------------------

def test_github_reset_wait_is_exactly_the_reset_plus_one_second(clock) -> None:
    reset = int(WALL0) + 30
    script = [{"status": 403, "headers": {"x-ratelimit-remaining": "0",
                                          "x-ratelimit-reset": str(reset)}}, OK]
    outcome, provider = run(script, clock, profile="github", deadline=60)
    assert outcome.reason is Reason.OK
    assert [(w.seconds, w.reason, w.source) for w in outcome.waits] == [
        (31.0, WaitReason.RATE_LIMIT_RESET, "x-ratelimit-reset")]
    assert clock.sleeps == [31.0]
    # the retry arrives one second after the reset instant, not at it
    assert provider.requests[1]["arrival"] == reset + 1.0


def test_the_reset_slack_is_the_profiles_and_only_github_adds_one() -> None:
    assert get_profile("github").reset_slack == 1.0
    assert get_profile("generic").reset_slack == 0.0
    clock = FakeClock()
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(WALL0) + 30)}
    outcome, _ = run([{"status": 429, "headers": headers}, OK], clock, deadline=60)
    assert [w.seconds for w in outcome.waits] == [30.0]


# Rule 2/5: a 503's Retry-After over max_server_wait stops now --------------------------------

def test_a_503_retry_after_over_max_server_wait_stops_now_with_retry_at(clock) -> None:
    script = [{"status": 503, "headers": {"Retry-After": "30"}}, OK]
    outcome, provider = run(script, clock, deadline=600, max_server_wait=10)
    assert (outcome.reason, outcome.attempts, provider.count) == (Reason.DEADLINE, 1, 1)
    assert clock.sleeps == []
    assert outcome.waits == ()
    assert outcome.retry_at == WALL0 + 30


def test_a_503_retry_after_within_max_server_wait_is_waited_exactly(clock) -> None:
    script = [{"status": 503, "headers": {"Retry-After": "10"}}, OK]
    outcome, _ = run(script, clock, deadline=600, max_server_wait=10)
    assert outcome.reason is Reason.OK
    assert [(w.seconds, w.reason) for w in outcome.waits] == [(10.0, WaitReason.RETRY_AFTER)]


# Rule 2/10: a concurrency wait past the deadline is a deadline, not a rate limit -------------

class _Busy(Coordinator):
    """Always asks for a concurrency wait of ``wait`` seconds on the first ask."""

    def __init__(self, wait: float, reason: WaitReason) -> None:
        self.wait = wait
        self.reason = reason
        self.asked = 0

    def acquire(self, key: str, attempt: int) -> Permit:
        self.asked += 1
        if self.asked == 1:
            return Permit(wait=self.wait, reason=self.reason)
        return Permit()


def test_a_concurrency_wait_past_the_deadline_ends_with_deadline(clock) -> None:
    busy = _Busy(10.0, WaitReason.CONCURRENCY)
    outcome, provider = run([OK], clock, deadline=5, coordinator=busy)
    assert (outcome.reason, outcome.attempts, provider.count) == (Reason.DEADLINE, 0, 0)
    assert clock.sleeps == []


class _Pacing(Coordinator):
    """Asks for a pacing wait of one second at every ask, counting the asks."""

    def __init__(self) -> None:
        self.asked = 0

    def acquire(self, key: str, attempt: int) -> Permit:
        self.asked += 1
        return Permit(wait=1.0, reason=WaitReason.PACING)


def test_a_coordinator_that_keeps_asking_to_wait_ends_the_operation_after_the_cap(clock) -> None:
    from retrybudget.core.decide import MAX_COORDINATOR_WAITS

    pacing = _Pacing()
    outcome, provider = run([OK], clock, deadline=None, coordinator=pacing)
    assert (outcome.reason, outcome.attempts, provider.count) == (Reason.DEADLINE, 0, 0)
    assert outcome.detail == "the coordinator kept asking to wait"
    assert pacing.asked == MAX_COORDINATOR_WAITS == 64  # no ask after the last wait taken
    assert clock.sleeps == [1.0] * 64


def test_a_gate_wait_past_the_deadline_names_the_coordinators_instant(clock) -> None:
    busy = _Busy(10.0, WaitReason.GATE)
    outcome, provider = run([OK], clock, deadline=5, coordinator=busy)
    assert (outcome.reason, outcome.attempts, provider.count) == (Reason.RATE_LIMITED, 0, 0)
    assert outcome.retry_at == WALL0 + 10.0
    assert clock.sleeps == []


def test_a_concurrency_wait_inside_the_deadline_is_taken(clock) -> None:
    busy = _Busy(2.0, WaitReason.CONCURRENCY)
    outcome, _ = run([OK], clock, deadline=5, coordinator=busy)
    assert outcome.reason is Reason.OK
    assert [(w.seconds, w.reason) for w in outcome.waits] == [(2.0, WaitReason.CONCURRENCY)]


def test_a_gate_wait_past_the_deadline_ends_with_rate_limited(clock) -> None:
    gate = _Busy(10.0, WaitReason.GATE)
    outcome, _ = run([OK], clock, deadline=5, coordinator=gate)
    assert (outcome.reason, outcome.attempts) == (Reason.RATE_LIMITED, 0)


# Rule 5/10: the gate's doubling continues for a 429 within one floor after the gate opened ---

GITHUB_GATE = CoordinationConfig(gate=GateConfig(spread=0.0))
THROTTLED = classify(get_profile("github"), ResponseSeen.of(429), WALL0)
THROTTLE = throttle_of(get_profile("github"), THROTTLED)  # what the flow hands the coordinator


def _gate_after(first: float, second_after_opening: float) -> float:
    """Seconds the gate stays shut after a second hint-less 429 ``second_after_opening`` s
    after the first one's gate opened (memory coordinator, fake clock)."""
    clock = FakeClock()
    c = MemoryCoordinator(GITHUB_GATE, clock=clock)
    c.learn("k", THROTTLE, None)
    assert c.acquire("k", 1).wait == first
    clock.advance(first + second_after_opening)
    c.learn("k", THROTTLE, None)
    return c.acquire("k", 1).wait


@pytest.mark.parametrize("after", [0.0, 0.5, 1.0, 30.0, 59.0, 60.0])
def test_a_429_within_one_floor_after_the_gate_opened_doubles_the_gate(after) -> None:
    assert THROTTLED.kind is Kind.RATE_LIMITED
    assert THROTTLED.hint is None
    assert _gate_after(60.0, after) == 120.0


@pytest.mark.parametrize("after", [60.5, 61.0, 600.0])
def test_a_429_after_a_quiet_floor_restarts_the_gate_at_the_floor(after) -> None:
    assert _gate_after(60.0, after) == 60.0


def test_the_gate_keeps_doubling_while_429s_keep_coming_after_each_opening() -> None:
    clock = FakeClock()
    c = MemoryCoordinator(GITHUB_GATE, clock=clock)
    gates = []
    for _ in range(4):
        c.learn("k", THROTTLE, None)
        gates.append(c.acquire("k", 1).wait)
        clock.advance(gates[-1] + 10.0)  # each 429 comes 10 s after the gate opened
    assert gates == [60.0, 120.0, 240.0, 480.0]


# Rule 12: conflicting rate-limit evidence on a 2xx is flagged, not dropped -----------------------

def test_conflicting_headers_on_a_2xx_are_flagged_in_the_outcome(clock) -> None:
    headers = {"Retry-After": "10", "x-ratelimit-remaining": "0",
               "x-ratelimit-reset": str(int(WALL0) + 120)}
    outcome, _ = run([{"status": 200, "headers": headers, "body": {"available": True}}], clock)
    assert (outcome.reason, outcome.attempts) == (Reason.OK, 1)
    (conflict,) = outcome.conflicts
    assert "retry-after" in conflict
    assert "x-ratelimit-reset" in conflict
    (record,) = outcome.history
    assert record.kind is Kind.OK


def test_a_2xx_with_agreeing_headers_has_no_conflicts(clock) -> None:
    headers = {"x-ratelimit-remaining": "10", "x-ratelimit-reset": str(int(WALL0) + 120)}
    outcome, _ = run([{"status": 200, "headers": headers, "body": {"available": True}}], clock)
    assert (outcome.reason, outcome.conflicts) == (Reason.OK, ())


# Rule 1: max_attempts is exact: no wait after the last attempt ---------------------------------

@pytest.mark.parametrize("max_attempts", [1, 2, 3, 4])
def test_a_transient_failure_takes_exactly_max_attempts_and_no_wait_after_the_last(
    clock, max_attempts
) -> None:
    outcome, provider = run([{"status": 503}], clock, max_attempts=max_attempts, deadline=None)
    assert (outcome.reason, outcome.attempts, provider.count) == (
        Reason.EXHAUSTED, max_attempts, max_attempts)
    expected = [0.5, 1.0, 2.0][: max_attempts - 1]
    assert clock.sleeps == expected
    assert [w.seconds for w in outcome.waits] == expected
    assert outcome.history[-1].decision == "stop"


@pytest.mark.parametrize("max_attempts", [1, 2, 3])
def test_a_rate_limit_on_the_last_attempt_stops_rate_limited_without_waiting(
    clock, max_attempts
) -> None:
    script = [{"status": 429, "headers": {"Retry-After": "2"}}]
    outcome, provider = run(script, clock, max_attempts=max_attempts, deadline=None)
    assert (outcome.reason, provider.count) == (Reason.RATE_LIMITED, max_attempts)
    assert clock.sleeps == [2.0] * (max_attempts - 1)
    # the last attempt's own Retry-After names the time to come back
    assert outcome.retry_at == WALL0 + 2.0 * max_attempts


# Rule 10: a gate wait names the provider's instant, as the coordinator's wait ------------------

def test_a_gate_wait_is_the_coordinators_and_remembers_the_named_instant(clock) -> None:
    class Gate(Coordinator):
        asked = 0

        def acquire(self, key: str, attempt: int) -> Permit:
            Gate.asked += 1
            if Gate.asked == 1:
                return Permit(wait=2.0, reason=WaitReason.GATE, retry_at=WALL0 + 2.0)
            return Permit()

    outcome, _ = run([OK], clock, deadline=5, coordinator=Gate())
    assert outcome.reason is Reason.OK
    assert [(w.seconds, w.reason, w.source, w.attempt) for w in outcome.waits] == [
        (2.0, WaitReason.GATE, "coordinator", 0)]
    assert outcome.retry_at == WALL0 + 2.0  # the instant the provider named, kept


def test_fail_fast_at_the_gate_stops_with_the_gates_retry_at(clock) -> None:
    class Named(Coordinator):
        def acquire(self, key: str, attempt: int) -> Permit:
            return Permit(wait=0.5, reason=WaitReason.GATE, retry_at=WALL0 + 0.5)

    outcome, provider = run([OK], clock, coordinator=Named(), deadline=5, rate_limit="fail_fast")
    assert (outcome.reason, outcome.attempts, provider.count) == (Reason.RATE_LIMITED, 0, 0)
    assert outcome.retry_at == WALL0 + 0.5
    assert clock.sleeps == []
    # a concurrency wait is no throttling: fail_fast still waits for a place in flight
    outcome, _ = run([OK], clock, coordinator=_Busy(0.5, WaitReason.CONCURRENCY), deadline=5,
                     rate_limit="fail_fast")
    assert outcome.reason is Reason.OK
    assert [w.reason for w in outcome.waits] == [WaitReason.CONCURRENCY]


def test_a_gate_wait_past_the_deadline_names_the_offered_slot_not_the_gates_opening(clock) -> None:
    """Held behind the gate with a slot a window after it opens, the operation names that
    slot: coming back when the gate opens would only be told to wait again (and leave the
    slot it was offered unused)."""

    class Slotted(Coordinator):
        def acquire(self, key: str, attempt: int) -> Permit:
            return Permit(wait=2.5, reason=WaitReason.GATE, retry_at=WALL0 + 1.5)

    outcome, provider = run([OK], clock, coordinator=Slotted(), deadline=2)
    assert (outcome.reason, outcome.attempts, provider.count) == (Reason.RATE_LIMITED, 0, 0)
    assert outcome.retry_at == WALL0 + 2.5
    # a slot before the gate's instant never moves the instant earlier
    class Early(Coordinator):
        def acquire(self, key: str, attempt: int) -> Permit:
            return Permit(wait=2.5, reason=WaitReason.GATE, retry_at=WALL0 + 4.0)

    outcome, _ = run([OK], clock, coordinator=Early(), deadline=2)
    assert outcome.retry_at == WALL0 + 4.0
    # a pacing slot names itself
    outcome, _ = run([OK], clock, coordinator=_Busy(2.5, WaitReason.PACING), deadline=2)
    assert (outcome.reason, outcome.retry_at) == (Reason.RATE_LIMITED, WALL0 + 2.5)


# Rule 1/2: the deadline's edge, with the time an attempt needs --------------------------------

def test_a_wait_that_leaves_exactly_the_attempt_time_is_taken_and_the_attempt_made(clock) -> None:
    # 2.5 s wait + 0.5 s for the attempt ends exactly at the 3 s deadline: it fits
    script = [{"status": 429, "headers": {"Retry-After": "2.5"}}, OK]
    outcome, provider = run(script, clock, deadline=3.0, min_attempt_time=0.5)
    assert (outcome.reason, outcome.attempts, provider.count) == (Reason.OK, 2, 2)
    assert clock.sleeps == [2.5]
    assert outcome.history[1].timeout == 0.5  # what was left, exactly


def test_a_wait_that_leaves_less_than_the_attempt_time_stops_now(clock) -> None:
    script = [{"status": 429, "headers": {"Retry-After": "2.6"}}, OK]
    outcome, provider = run(script, clock, deadline=3.0, min_attempt_time=0.5)
    assert (outcome.reason, provider.count, clock.sleeps) == (Reason.RATE_LIMITED, 1, [])
    assert outcome.retry_at == WALL0 + 2.6


# Rule 5: a reset without a remaining count is still the provider's time -------------------------

def test_a_reset_without_remaining_is_waited_for(clock) -> None:
    script = [{"status": 429, "headers": {"x-ratelimit-reset": str(int(WALL0) + 7)}}, OK]
    outcome, _ = run(script, clock, deadline=60)
    assert [(w.seconds, w.reason) for w in outcome.waits] == [(7.0, WaitReason.RATE_LIMIT_RESET)]


# Rule 3/8/12: what an operation is and has seen survives every attempt and wait -----------------

def test_a_write_stays_a_write_after_a_coordinator_wait(clock) -> None:
    busy = _Busy(1.0, WaitReason.CONCURRENCY)
    outcome, provider = run([{"status": 503}, OK], clock, method="POST", coordinator=busy)
    assert (outcome.reason, provider.count) == (Reason.NOT_RETRIED, 1)
    assert outcome.method == "POST"


def test_a_keyed_write_keeps_its_key_across_retries(clock) -> None:
    policy = Policy(backoff=NO_JITTER, validator=json_payload, retry_writes_with_key=True)
    provider = ScriptedProvider([{"status": 503}, {"status": 503}, OK], clock)
    retrier = Retrier(policy=policy, clock=clock, method="POST", idempotency_key=True,
                      random=random.Random(0))
    outcome = retrier.call(provider, "POST")
    assert (outcome.reason, outcome.attempts, provider.count) == (Reason.OK, 3, 3)
    assert isinstance(outcome.operation_id, str)
    assert outcome.operation_id


def test_conflicts_from_every_attempt_are_kept(clock) -> None:
    first = {"Retry-After": "1", "x-ratelimit-remaining": "0",
             "x-ratelimit-reset": str(int(WALL0) + 120)}
    second = {"x-ratelimit-remaining": "9", "x-ratelimit-limit": "5"}
    script = [{"status": 429, "headers": first}, {"status": 503, "headers": second}, OK]
    outcome, _ = run(script, clock, deadline=60)
    assert outcome.reason is Reason.OK
    assert len(outcome.conflicts) == 2
    assert any("x-ratelimit-reset" in c for c in outcome.conflicts)
    assert any("x-ratelimit-limit" in c or "limit" in c for c in outcome.conflicts)


def test_a_named_instant_is_kept_through_a_later_backoff(clock) -> None:
    script = [{"status": 429, "headers": {"Retry-After": "5"}},  # names WALL0 + 5
              {"status": 503},  # its backoff names nothing
              OK]
    outcome, _ = run(script, clock, deadline=60)
    assert outcome.reason is Reason.OK
    assert clock.sleeps == [5.0, 0.5]
    assert outcome.retry_at == WALL0 + 5.0


def test_a_write_retried_after_a_failed_connect_is_not_replayed_once_sent(clock) -> None:
    calls = []

    def post() -> object:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionRefusedError("refused")  # never sent: safe to try again
        return ScriptedProvider([{"status": 503}], clock)()  # sent: not replayed

    retrier = Retrier(policy=Policy(backoff=NO_JITTER), clock=clock, method="POST")
    outcome = retrier.call(post)
    assert (outcome.reason, outcome.attempts, len(calls)) == (Reason.NOT_RETRIED, 2, 2)
    assert clock.sleeps == [0.5]


# Rule 4/6/12: classification at its boundaries ---------------------------------------------------


@pytest.mark.parametrize(("status", "kind"), [
    (99, Kind.INVALID_PAYLOAD), (100, Kind.UNEXPECTED), (199, Kind.UNEXPECTED),
    (200, Kind.OK), (299, Kind.OK), (300, Kind.UNEXPECTED),
    (599, Kind.UNEXPECTED), (600, Kind.INVALID_PAYLOAD),
])
def test_status_boundaries(status, kind) -> None:
    seen = classify(get_profile("generic"), ResponseSeen.of(status), WALL0)
    assert seen.kind is kind
    assert seen.status == status
    # with rate-limit headers the slow path must agree on the kind
    headed = ResponseSeen.of(status, {"x-ratelimit-remaining": "10"})
    assert classify(get_profile("generic"), headed, WALL0).kind is kind


@pytest.mark.parametrize(("status", "headers", "message", "scope"), [
    (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(WALL0) + 60)}, "",
     "primary"),
    (429, {"x-ratelimit-remaining": "0"}, "", "primary"),
    (403, {}, "You have exceeded a secondary rate limit", "secondary"),
    (429, {"retry-after": "30"}, "", "secondary"),
    (403, {"retry-after": "30"}, "", "secondary"),
    (429, {}, "", ""),
])
def test_github_rate_limits_name_their_scope(status, headers, message, scope) -> None:
    seen = classify(get_profile("github"), ResponseSeen.of(status, headers, message=message), WALL0)
    assert (seen.kind, seen.scope) == (Kind.RATE_LIMITED, scope)


def test_a_primary_limit_with_a_permission_message_is_flagged() -> None:
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(WALL0) + 60)}
    seen = classify(get_profile("github"),
                    ResponseSeen.of(403, headers, message="Resource not accessible by integration"),
                    WALL0)
    assert (seen.kind, seen.scope) == (Kind.RATE_LIMITED, "primary")
    assert len(seen.conflicts) == 1
    assert "permission message" in seen.conflicts[0]


@pytest.mark.parametrize(("kind", "outcome_kind", "sent"), [
    (FailureKind.CONNECT, Kind.TRANSIENT, False),
    (FailureKind.TIMEOUT, Kind.TRANSIENT, True),
    (FailureKind.NETWORK, Kind.TRANSIENT, True),
    (FailureKind.PROTOCOL, Kind.INVALID_PAYLOAD, True),
    (FailureKind.ERROR, Kind.UNEXPECTED, True),
])
def test_failures_say_whether_the_request_may_have_been_sent(kind, outcome_kind, sent) -> None:
    seen = classify(get_profile("generic"), FailureSeen(kind, "SomeError"), WALL0)
    assert (seen.kind, seen.sent, seen.failure, seen.status) == (outcome_kind, sent, kind, None)


# Rule 8/11: what each attempt reports, and what the coordinator is told, exactly ---------------

def test_each_attempt_record_is_exact(clock) -> None:
    scripted = ScriptedProvider([{"status": 503, "delay_s": 0.5}, OK], clock)
    calls = []

    def provider() -> object:
        calls.append(1)
        if len(calls) == 1:  # 0.25 s, then a refused connection: never sent
            clock.sleep(0.25)
            raise ConnectionRefusedError("refused")
        return scripted()

    outcome = Retrier(policy=Policy(backoff=NO_JITTER, validator=json_payload, deadline=60),
                      clock=clock).call(provider)
    assert outcome.reason is Reason.OK
    rows = [(r.number, r.started, r.elapsed, r.status, r.error, r.kind, r.decision, r.sent)
            for r in outcome.history]
    assert rows == [
        (1, 0.0, 0.25, None, "ConnectionRefusedError", Kind.TRANSIENT, "retry", False),
        (2, 0.75, 0.5, 503, None, Kind.TRANSIENT, "retry", True),
        (3, 2.25, 0.0, 200, None, Kind.OK, "stop", True),
    ]
    assert [(w.seconds, w.attempt) for w in outcome.waits] == [(0.5, 1), (1.0, 2)]
    assert outcome.elapsed == 2.25
    assert outcome.history[0].detail
    assert outcome.history[1].detail


class _Recording(Coordinator):
    """Grants everything and records what the flow told it."""

    def __init__(self, lease: str | None = "L1", probe: bool = False, spend: bool = True) -> None:
        self.seen: list[tuple[object, ...]] = []
        self.lease, self.probe, self.spend = lease, probe, spend

    def admit(self, key: str) -> Admission:
        self.seen.append(("admit", key))
        return Admission(probe=self.probe)

    def acquire(self, key: str, attempt: int) -> Permit:
        self.seen.append(("acquire", key, attempt))
        return Permit(lease=self.lease)

    def learn(self, key: str, throttle, lease: str | None) -> None:
        self.seen.append(("learn", key, None if throttle is None else throttle.throttled, lease))

    def spend_retry(self, key: str) -> bool:
        self.seen.append(("spend", key))
        return self.spend

    def finish(self, key: str, outcome, probe: bool) -> None:
        self.seen.append(("finish", key, outcome.reason, probe))


def test_the_coordinator_is_told_the_key_the_attempt_and_the_lease(clock) -> None:
    c = _Recording(probe=True)
    provider = ScriptedProvider([{"status": 503}, OK], clock)
    retrier = Retrier(policy=Policy(backoff=NO_JITTER, validator=json_payload), clock=clock,
                      coordinator=c, key="api.example.com")
    outcome = retrier.call(provider)
    assert (outcome.reason, outcome.key) == (Reason.OK, "api.example.com")
    k = "api.example.com"
    assert c.seen == [
        ("admit", k), ("acquire", k, 1), ("learn", k, False, "L1"), ("spend", k),
        ("acquire", k, 2), ("learn", k, False, "L1"), ("finish", k, Reason.OK, True),
    ]


def test_a_refused_retry_names_the_instant_the_provider_named(clock) -> None:
    c = _Recording(spend=False)
    provider = ScriptedProvider([{"status": 503, "headers": {"Retry-After": "3"}}, OK], clock)
    outcome = Retrier(policy=Policy(validator=json_payload, deadline=60), clock=clock,
                      coordinator=c).call(provider)
    assert (outcome.reason, outcome.attempts) == (Reason.RETRY_BUDGET, 1)
    assert outcome.retry_at == WALL0 + 3.0
    assert outcome.detail == "the shared retry budget refused a retry"
    assert c.seen[-1] == ("finish", "default", Reason.RETRY_BUDGET, False)


def test_an_open_breaker_names_its_retry_at_and_the_operation_reports_its_context(clock) -> None:
    class Open(Coordinator):
        def admit(self, key: str) -> Admission:
            return Admission(allowed=False, retry_at=WALL0 + 30, detail="breaker open")

    outcome = Retrier(clock=clock, coordinator=Open(), key="k", method="GET",
                      job_id="job-7").call(ScriptedProvider([OK], clock))
    assert (outcome.reason, outcome.retry_at, outcome.detail) == (
        Reason.CIRCUIT_OPEN, WALL0 + 30, "breaker open")
    assert (outcome.key, outcome.method, outcome.job_id) == ("k", "GET", "job-7")
    assert outcome.policy is not None


def test_a_gate_for_a_zero_retry_after_does_not_close() -> None:
    clock = FakeClock()
    c = MemoryCoordinator(GITHUB_GATE, clock=clock)
    openai = get_profile("openai")  # reads retry-after-ms; no minimum after a zero hint
    c.learn("k", throttle_of(openai, classify(openai, ResponseSeen.of(429, {"retry-after": "0"}),
                                              WALL0)), None)
    assert c.acquire("k", 1).wait == 0
    c.learn("k", throttle_of(openai, classify(openai, ResponseSeen.of(429, {"retry-after-ms": "250"}),
                                              WALL0)), None)
    assert c.acquire("k", 1).wait == 0.25


def test_an_operations_stats_are_exact(clock) -> None:
    provider = ScriptedProvider([{"status": 429, "headers": {"Retry-After": "2"}}, OK], clock)
    retrier = Retrier(policy=Policy(name="mine", backoff=NO_JITTER, validator=json_payload,
                                    deadline=60),
                      clock=clock, key="api.example.com", method="GET", job_id="job-1")
    outcome = retrier.call(provider)
    stats = outcome.stats()
    assert stats == {
        "operation_id": outcome.operation_id, "job_id": "job-1", "policy": "mine",
        "key": "api.example.com", "method": "GET", "logical_operations": 1, "attempts": 2,
        "retries": 1, "outcome": "ok", "retry_at": WALL0 + 2.0, "elapsed": 2.0,
        "waits": [{"seconds": 2.0, "reason": "retry_after", "source": "retry-after",
                   "after_attempt": 1}],
        "detail": outcome.detail,
    }
    assert isinstance(stats["operation_id"], str)


# From the second pass: what a stop names, the cap's edge, transient hints ----------------------

def test_a_rate_limited_write_stops_with_the_providers_instant(clock) -> None:
    outcome, provider = run([{"status": 429, "headers": {"Retry-After": "10"}}, OK], clock,
                            method="POST", deadline=60)
    assert (outcome.reason, provider.count, clock.sleeps) == (Reason.RATE_LIMITED, 1, [])
    assert outcome.retry_at == WALL0 + 10.0


def test_a_rate_limit_over_the_cap_stops_with_the_providers_instant(clock) -> None:
    outcome, _ = run([{"status": 429, "headers": {"Retry-After": "30"}}, OK], clock,
                     deadline=600, max_server_wait=10)
    assert (outcome.reason, outcome.retry_at) == (Reason.RATE_LIMITED, WALL0 + 30.0)


def test_a_rate_limit_of_exactly_the_cap_is_waited(clock) -> None:
    outcome, _ = run([{"status": 429, "headers": {"Retry-After": "10"}}, OK], clock,
                     deadline=600, max_server_wait=10)
    assert (outcome.reason, clock.sleeps) == (Reason.OK, [10.0])


def test_a_timeout_that_ran_into_the_deadline_ends_with_deadline(clock) -> None:
    outcome, provider = run([{"status": 200, "delay_s": 5.0}, OK], clock, deadline=2.0)
    assert (outcome.reason, outcome.attempts, provider.count) == (Reason.DEADLINE, 1, 1)
    assert clock.sleeps == [2.0]  # the clipped attempt, then no backoff


def test_a_timeout_with_time_left_is_retried(clock) -> None:
    outcome, _ = run([{"status": 200, "delay_s": 5.0}, OK], clock, deadline=10.0,
                     attempt_timeout=1.0)
    assert (outcome.reason, outcome.attempts) == (Reason.OK, 2)
    assert clock.sleeps == [1.0, 0.5]
    assert [r.timeout for r in outcome.history] == [1.0, 1.0]  # the cap, not what was left
    assert [(w.reason, w.source) for w in outcome.waits] == [(WaitReason.BACKOFF, "policy")]


def test_a_503s_retry_after_is_waited_named_and_remembered(clock) -> None:
    outcome, _ = run([{"status": 503, "headers": {"Retry-After": "2"}}, OK], clock, deadline=60)
    assert [(w.seconds, w.reason, w.source) for w in outcome.waits] == [
        (2.0, WaitReason.RETRY_AFTER, "retry-after")]
    assert outcome.retry_at == WALL0 + 2.0


def test_a_503s_retry_after_equal_to_the_backoff_is_the_providers(clock) -> None:
    outcome, _ = run([{"status": 503, "headers": {"Retry-After": "0.5"}}, OK], clock, deadline=60)
    assert [(w.seconds, w.reason) for w in outcome.waits] == [(0.5, WaitReason.RETRY_AFTER)]


def test_a_503s_retry_after_past_the_deadline_names_it(clock) -> None:
    outcome, _ = run([{"status": 503, "headers": {"Retry-After": "30"}}, OK], clock, deadline=10)
    assert (outcome.reason, outcome.retry_at, clock.sleeps) == (Reason.DEADLINE, WALL0 + 30, [])


def test_a_profile_without_transient_hints_backs_off_by_policy(clock) -> None:
    profile = get_profile("generic").derive("no-hints", transient_hints=False)
    outcome, _ = run([{"status": 503, "headers": {"Retry-After": "30"}}, OK], clock,
                     deadline=10, profile=profile)
    assert outcome.reason is Reason.OK
    assert [(w.seconds, w.reason) for w in outcome.waits] == [(0.5, WaitReason.BACKOFF)]
    assert outcome.retry_at is None


def test_a_new_operation_has_no_idempotency_key_unless_given() -> None:
    from retrybudget.core.state import OperationState

    policy = Policy()
    assert OperationState.start(policy, "op", 0.0).has_idempotency_key is False
    assert OperationState.start(policy, "op", 0.0, has_idempotency_key=True).has_idempotency_key


def test_a_secondary_limit_is_named_by_its_message_on_a_429() -> None:
    seen = classify(get_profile("github"),
                    ResponseSeen.of(429, message="You have exceeded a secondary rate limit"), WALL0)
    assert (seen.kind, seen.scope) == (Kind.RATE_LIMITED, "secondary")


def test_a_primary_limit_with_an_ordinary_message_flags_nothing() -> None:
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(WALL0) + 60)}
    seen = classify(get_profile("github"),
                    ResponseSeen.of(403, headers, message="API rate limit exceeded"), WALL0)
    assert (seen.kind, seen.conflicts) == (Kind.RATE_LIMITED, ())


# Which failed responses the integrations read at once: the statuses the policy may retry ------

def test_the_retried_statuses_follow_the_rate_limit_mode() -> None:
    from retrybudget import RateLimitMode

    # the generic profile: 429 a rate limit, 403 one when its body or headers say so
    assert Policy().retried_statuses() == {502, 503, 504, 429, 403}
    assert Policy(rate_limit=RateLimitMode.FAIL_FAST).retried_statuses() == {502, 503, 504}


# The decision functions called directly: every value a Retry or a Stop carries ------------------

def _described(decision: Retry | Stop) -> bool:
    """A decision carries a human detail (its words are free text; its presence is not)."""
    return isinstance(decision.detail, str) and decision.detail != ""


def _decide(script_status, headers, *, method="GET", attempts=0, profile="generic", **changes):

    policy = Policy(backoff=NO_JITTER, profile=profile).replace(**changes)
    state = OperationState.start(policy, "op", 0.0, method=method)
    state = OperationState(**{**{f: getattr(state, f) for f in state.__slots__},
                              "attempts": attempts})
    seen = classify(policy.profile, ResponseSeen.of(script_status, headers), WALL0)
    return decide(policy, state, seen, 0.0, WALL0, 0.5)


def test_a_reset_that_is_now_adds_no_slack_and_backs_off() -> None:

    github = get_profile("github")
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(WALL0))}
    seen = classify(github, ResponseSeen.of(403, headers), WALL0)
    assert rate_limit_wait(github, seen, 0) == (0.0, WaitReason.RATE_LIMIT_RESET,
                                                "x-ratelimit-reset")
    # the named time is now: GitHub's zero-hint wait, not the slack
    decision = _decide(403, headers, profile="github", deadline=100)
    assert isinstance(decision, Retry)
    assert (decision.after, decision.reason, decision.source, decision.retry_at) == (
        60.0, WaitReason.RATE_LIMIT_BACKOFF, "profile:github", WALL0)


def test_a_retry_after_of_zero_on_a_429_takes_the_policys_backoff() -> None:

    decision = _decide(429, {"Retry-After": "0"})
    assert isinstance(decision, Retry)
    assert (decision.after, decision.reason, decision.source, decision.retry_at) == (
        0.5, WaitReason.BACKOFF, "policy", WALL0)


def test_a_zero_hint_wait_shorter_than_the_backoff_is_the_policys() -> None:

    profile = get_profile("generic").derive("short-zero", zero_hint_wait=0.25)
    decision = _decide(429, {"Retry-After": "0"}, profile=profile)
    assert isinstance(decision, Retry)
    assert (decision.after, decision.reason, decision.source) == (
        0.5, WaitReason.BACKOFF, "policy")


def test_a_clamped_reset_names_the_instant_the_provider_asked_plus_the_slack() -> None:

    asked = 30 * 24 * 3600
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(WALL0) + asked)}
    decision = _decide(403, headers, profile="github", deadline=None)
    assert isinstance(decision, Retry)
    assert (decision.after, decision.retry_at) == (MAX_HINT_SECONDS + 1.0, WALL0 + asked + 1.0)


def test_a_clamped_retry_after_names_the_instant_the_provider_asked() -> None:

    asked = 30 * 24 * 3600
    decision = _decide(429, {"Retry-After": str(asked)}, rate_limit=RateLimitMode.FAIL_FAST)
    assert isinstance(decision, Stop)
    assert (decision.reason, decision.retry_at) == (Reason.RATE_LIMITED, WALL0 + asked)
    assert decision.detail.endswith(f"retry-after asked {asked}s, clamped to 604800s")


@pytest.mark.parametrize(("status", "headers", "method", "attempts", "changes", "reason"), [
    (429, {"Retry-After": "5"}, "GET", 0, {"rate_limit": RateLimitMode.FAIL_FAST},
     Reason.RATE_LIMITED),
    (429, {"Retry-After": "5"}, "POST", 0, {}, Reason.RATE_LIMITED),
    (429, {"Retry-After": "5"}, "GET", 2, {}, Reason.RATE_LIMITED),
    (429, {"Retry-After": "5"}, "GET", 0, {"max_server_wait": 2}, Reason.RATE_LIMITED),
    (429, {"Retry-After": "50"}, "GET", 0, {}, Reason.RATE_LIMITED),
    (503, {}, "POST", 0, {}, Reason.NOT_RETRIED),
    (503, {}, "GET", 2, {}, Reason.EXHAUSTED),
    (503, {"Retry-After": "50"}, "GET", 0, {"max_server_wait": 2}, Reason.DEADLINE),
    (503, {"Retry-After": "50"}, "GET", 0, {}, Reason.DEADLINE),
], ids=["fail-fast", "write", "no-attempts", "over-cap", "past-deadline",
        "503-write", "503-no-attempts", "503-over-cap", "503-past-deadline"])
def test_every_stop_of_decide_carries_its_reason_instant_and_a_detail(
    status, headers, method, attempts, changes, reason
) -> None:

    decision = _decide(status, headers, method=method, attempts=attempts, **changes)
    assert isinstance(decision, Stop)
    assert decision.reason is reason
    named = float(headers["Retry-After"]) if "Retry-After" in headers else None
    expected_at = None if named is None or (status == 503 and reason is not Reason.DEADLINE) \
        else WALL0 + named
    assert decision.retry_at == expected_at
    assert _described(decision)


def test_every_retry_of_decide_carries_a_detail() -> None:

    for status, headers in ((429, {"Retry-After": "5"}), (503, {})):
        decision = _decide(status, headers)
        assert isinstance(decision, Retry)
        assert _described(decision)


def test_plan_attempt_stops_with_the_states_instant_when_nothing_is_left() -> None:

    policy = Policy(max_attempts=2, deadline=10.0)
    state = OperationState("op", "GET", 0.0, 10.0, attempts=2, retry_at=WALL0 + 7)
    stop = plan_attempt(policy, state, 0.0)
    assert isinstance(stop, Stop)
    assert (stop.reason, stop.retry_at) == (Reason.EXHAUSTED, WALL0 + 7)
    assert _described(stop)
    # one attempt left: the attempt's timeout is what is left of the deadline
    assert plan_attempt(policy, OperationState("op", "GET", 0.0, 10.0, attempts=1), 4.0) == 6.0
    late = plan_attempt(policy, OperationState("op", "GET", 0.0, 10.0, attempts=1,
                                               retry_at=WALL0 + 7), 10.0)
    assert isinstance(late, Stop)
    assert (late.reason, late.retry_at) == (Reason.DEADLINE, WALL0 + 7)
    assert _described(late)


def test_plan_acquire_stops_after_the_last_wait_with_the_states_instant() -> None:

    state = OperationState("op", "GET", 0.0, None, retry_at=WALL0 + 7)
    assert plan_acquire(state, MAX_COORDINATOR_WAITS - 1) is None
    stop = plan_acquire(state, MAX_COORDINATOR_WAITS)
    assert isinstance(stop, Stop)
    assert (stop.reason, stop.retry_at) == (Reason.DEADLINE, WALL0 + 7)


def test_plan_wait_without_a_wall_clock_names_the_providers_instant() -> None:

    state = OperationState("op", "GET", 0.0, 5.0)
    fail_fast = Policy(rate_limit=RateLimitMode.FAIL_FAST, deadline=5.0)
    stop = plan_wait(fail_fast, state, 0.0, 2.0, WaitReason.GATE, WALL0 + 2)
    assert isinstance(stop, Stop)
    assert (stop.reason, stop.retry_at) == (Reason.RATE_LIMITED, WALL0 + 2)
    assert _described(stop)
    late = plan_wait(Policy(deadline=5.0), state, 0.0, 9.0, WaitReason.PACING, WALL0 + 9)
    assert isinstance(late, Stop)
    assert (late.reason, late.retry_at) == (Reason.RATE_LIMITED, WALL0 + 9)
    assert _described(late)
    wait = plan_wait(Policy(deadline=5.0), state, 0.0, 2.0, WaitReason.PACING, None)
    assert isinstance(wait, Retry)
    assert (wait.after, wait.reason, wait.source, wait.retry_at) == (
        2.0, WaitReason.PACING, "coordinator", None)
    assert _described(wait)


def test_a_reset_under_a_second_away_gets_the_whole_slack() -> None:
    github = get_profile("github")
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(WALL0))}
    seen = classify(github, ResponseSeen.of(403, headers), WALL0 - 0.5)
    assert rate_limit_wait(github, seen, 0) == (1.5, WaitReason.RATE_LIMIT_RESET,
                                                "x-ratelimit-reset")


def test_a_clamped_503_retry_after_names_the_instant_the_provider_asked() -> None:
    asked = 30 * 24 * 3600
    decision = _decide(503, {"Retry-After": str(asked)})
    assert isinstance(decision, Stop)
    assert (decision.reason, decision.retry_at) == (Reason.DEADLINE, WALL0 + asked)


def _after_failure(kind: FailureKind, now: float, deadline: float | None) -> Retry | Stop:
    """``decide`` after a failed first attempt at ``now``, the backoff's sample 0 (no wait)."""
    policy = Policy(deadline=deadline, min_attempt_time=0.5,
                    backoff=Backoff(base=0.5, cap=4.0, jitter=Jitter.FULL))
    state = OperationState.start(policy, "op", 0.0, method="GET")
    seen = classify(policy.profile, FailureSeen(kind, "SomeError"), WALL0)
    return decide(policy, state, seen, now, WALL0, 0.0)


def test_a_timeout_at_the_last_instant_for_an_attempt_stops_with_deadline() -> None:
    # 9.5 s of a 10 s deadline gone and 0.5 s needed for an attempt: a wait of 0 would fit,
    # but an attempt that timed out there ran into the deadline
    stop = _after_failure(FailureKind.TIMEOUT, 9.5, 10.0)
    assert isinstance(stop, Stop)
    assert (stop.reason, stop.retry_at) == (Reason.DEADLINE, None)
    assert _described(stop)
    # any other failure at that instant retries at once: the wait of 0 fits exactly
    retry = _after_failure(FailureKind.CONNECT, 9.5, 10.0)
    assert isinstance(retry, Retry)
    assert (retry.after, retry.reason) == (0.0, WaitReason.BACKOFF)
    # a timeout just before that instant retries too, and one without a deadline always may
    for now, deadline in ((9.49, 10.0), (1e6, None)):
        retry = _after_failure(FailureKind.TIMEOUT, now, deadline)
        assert isinstance(retry, Retry)
        assert (retry.after, retry.reason) == (0.0, WaitReason.BACKOFF)


def test_an_error_built_by_hand_has_no_id_no_attempts_and_keeps_its_reason_when_pickled() -> None:
    import pickle

    from retrybudget.core.outcome import RetryBudgetError

    error = RetryBudgetError("failed", reason=Reason.DEADLINE)
    assert (error.reason, error.operation_id, error.attempts, error.retry_at) == (
        Reason.DEADLINE, "", 0, None)
    copy = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own bytes
    assert (type(copy), copy.reason, str(copy)) == (RetryBudgetError, Reason.DEADLINE, "failed")


def test_a_failed_outcome_is_described_by_its_detail(clock) -> None:
    from retrybudget.core.outcome import describe

    outcome, _ = run([{"status": 404}], clock)
    assert outcome.detail
    assert describe(outcome).startswith(f"not_found: {outcome.detail}")


def test_the_error_for_an_outcome_carries_its_reason_id_attempts_and_instant(clock) -> None:
    from retrybudget.core.outcome import RetryBudgetError, error_for

    outcome, _ = run([{"status": 429, "headers": {"Retry-After": "30"}}], clock, deadline=5)
    for base in (None, {Reason.RATE_LIMITED: RetryBudgetError}):  # a table of plain classes
        error = error_for(outcome, base)
        assert (error.reason, error.operation_id, error.attempts, error.retry_at) == (
            Reason.RATE_LIMITED, outcome.operation_id, 1, WALL0 + 30)
        assert error.outcome is outcome


def test_stats_round_to_the_microsecond_and_name_no_policy_when_there_is_none(clock) -> None:
    import dataclasses

    from retrybudget.core.outcome import Wait

    outcome, _ = run([OK], clock)
    changed = dataclasses.replace(outcome, policy=None, elapsed=1.2345678,
                                  waits=(Wait(0.1234567, WaitReason.BACKOFF, "policy", 1),))
    stats = changed.stats()
    assert (stats["policy"], stats["elapsed"], stats["waits"][0]["seconds"]) == (
        None, 1.234568, 0.123457)


def test_a_first_attempt_successs_stats_equality_and_pickle_are_exact(clock) -> None:
    import dataclasses
    import pickle

    from retrybudget.core.outcome import Outcome

    retrier = Retrier(policy=Policy(name="mine", deadline=60),
                      clock=clock, key="api.example.com", method="GET", job_id="job-1")
    outcome = retrier.call(lambda: 42)
    assert outcome.operation_id
    assert outcome.stats() == {
        "operation_id": outcome.operation_id, "job_id": "job-1", "policy": "mine",
        "key": "api.example.com", "method": "GET", "logical_operations": 1, "attempts": 1,
        "retries": 0, "outcome": "ok", "retry_at": None, "elapsed": 0.0, "waits": [],
        "detail": outcome.detail,
    }
    plain = dataclasses.replace(outcome)
    assert type(plain) is Outcome
    assert (outcome == plain, plain == outcome, hash(outcome) == hash(plain)) == (True,) * 3
    assert outcome != dataclasses.replace(outcome, detail="other")
    assert outcome.__eq__(object()) is NotImplemented
    assert repr(outcome) == repr(plain)
    copy = pickle.loads(pickle.dumps(outcome))  # noqa: S301 - our own bytes
    assert (type(copy), copy, copy.value) == (Outcome, outcome, 42)


def test_a_throttle_is_recorded_only_with_both_remaining_and_reset_and_names_no_hint() -> None:
    from retrybudget.core.throttle import NO_THROTTLE

    generic = get_profile("generic")
    only_remaining = classify(generic, ResponseSeen.of(200, {"x-ratelimit-remaining": "5"}), WALL0)
    assert throttle_of(generic, only_remaining) is NO_THROTTLE
    both = classify(generic, ResponseSeen.of(200, {"x-ratelimit-remaining": "5",
                                                   "x-ratelimit-reset": "30"}), WALL0)
    throttle = throttle_of(generic, both)
    assert (throttle.throttled, throttle.hint, throttle.remaining, throttle.reset) == (
        False, None, 5, 30.0)
