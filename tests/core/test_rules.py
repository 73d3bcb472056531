"""One test (at least) for every rule of the contract (docs/design.md) in the pure core."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from retrybudget import (
    Backoff,
    FakeClock,
    Jitter,
    Kind,
    Policy,
    Reason,
    ResponseSeen,
    Retrier,
    WaitReason,
    get_profile,
)
from retrybudget.coordination import Coordinator
from retrybudget.core.actions import Admission, Attempt, AttemptResult, Permit
from retrybudget.core.classify import FailureKind, FailureSeen, classify
from retrybudget.core.decide import Retry, Stop, attempt_needs, decide, plan_attempt
from retrybudget.core.outcome import AttemptRecord
from retrybudget.core.state import OperationState
from retrybudget.testing import ScriptedProvider, ScriptedResponse, json_payload

NO_JITTER = Backoff(base=0.5, cap=4.0, multiplier=2.0, jitter=Jitter.NONE)


def run(script, clock, *, method="GET", **policy_changes):
    policy = Policy(backoff=NO_JITTER, validator=json_payload).replace(**policy_changes)
    provider = ScriptedProvider(script, clock)
    key = policy_changes.pop("_key", False)
    retrier = Retrier(policy=policy, clock=clock, random=random.Random(0), method=method,
                      idempotency_key=key)
    return retrier.call(provider, method), provider


OK = {"status": 200, "body": {"available": True}}


# Rule 1: one operation, one budget -------------------------------------------------------

def test_waits_and_attempts_share_one_deadline(clock) -> None:
    script = [{"status": 503, "delay_s": 1.0}] * 10
    outcome, provider = run(script, clock, max_attempts=10, deadline=3.0)
    assert outcome.reason is Reason.DEADLINE
    # attempt (1 s), backoff 0.5 s, attempt (1 s): a 1 s backoff and another attempt would
    # end past the 3 s deadline, so the operation stops at 2.5 s
    assert outcome.elapsed == 2.5
    assert clock.sleeps == [1.0, 0.5, 1.0]  # the provider's two 1 s answers and one backoff
    assert [w.seconds for w in outcome.waits] == [0.5]
    assert provider.count == 2


def test_retries_never_reset_the_deadline(clock) -> None:
    script = [{"status": 503}] * 3 + [OK]
    outcome, _ = run(script, clock, max_attempts=5, deadline=2.0)
    # 0.5 + 1.0 fit; the 2 s backoff would end past the 2 s deadline
    assert outcome.reason is Reason.DEADLINE
    assert [w.seconds for w in outcome.waits] == [0.5, 1.0]


# Rule 2: never sleep past the deadline ---------------------------------------------------

def test_a_provider_wait_past_the_deadline_stops_now_without_sleeping(clock) -> None:
    script = [{"status": 429, "headers": {"Retry-After": "10"}}, OK]
    outcome, _ = run(script, clock, deadline=5.0)
    assert outcome.reason is Reason.RATE_LIMITED
    assert clock.sleeps == []
    assert outcome.retry_at == pytest.approx(clock.wall() + 10)


def test_each_attempt_timeout_is_clipped_to_what_is_left(clock) -> None:
    script = [{"status": 503, "delay_s": 1.5}, {"status": 503, "delay_s": 5}, OK]
    outcome, _ = run(script, clock, deadline=2.5, attempt_timeout=10.0)
    timeouts = [r.timeout for r in outcome.history]
    assert timeouts[0] == pytest.approx(2.5)
    assert timeouts[1] == pytest.approx(2.5 - 1.5 - 0.5)
    assert outcome.reason is Reason.DEADLINE


# Rule 3: only safe operations are retried -------------------------------------------------

def test_a_failed_post_is_not_replayed(clock) -> None:
    outcome, provider = run([{"status": 503}, OK], clock, method="POST")
    assert (outcome.reason, provider.count) == (Reason.NOT_RETRIED, 1)


def test_a_post_with_a_key_is_retried_only_when_opted_in(clock) -> None:
    policy = Policy(backoff=NO_JITTER, validator=json_payload)
    for opt_in, expected in ((False, Reason.NOT_RETRIED), (True, Reason.OK)):
        provider = ScriptedProvider([{"status": 503}, OK], clock)
        retrier = Retrier(policy=policy.replace(retry_writes_with_key=opt_in), clock=clock,
                          method="POST", idempotency_key=True)
        assert retrier.call(provider, "POST").reason is expected


def test_put_is_retried_only_when_declared_idempotent(clock) -> None:
    outcome, _ = run([{"status": 503}, OK], clock, method="PUT")
    assert outcome.reason is Reason.NOT_RETRIED
    outcome, _ = run([{"status": 503}, OK], clock, method="PUT",
                     idempotent_methods={"GET", "PUT"})
    assert outcome.reason is Reason.OK


def test_a_connect_failure_is_safe_to_retry_for_any_method(clock) -> None:
    calls = []

    def post() -> object:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionRefusedError("refused")
        return ScriptedProvider([OK], clock)()

    retrier = Retrier(policy=Policy(backoff=NO_JITTER), clock=clock, method="POST")
    outcome = retrier.call(post)
    assert outcome.reason is Reason.OK
    assert outcome.attempts == 2


def test_a_write_that_timed_out_is_not_replayed(clock) -> None:
    def post() -> object:
        raise TimeoutError("slow")

    outcome = Retrier(policy=Policy(), clock=clock, method="POST").call(post)
    assert (outcome.reason, outcome.attempts) == (Reason.NOT_RETRIED, 1)


# Rule 4: classify by provider documentation -----------------------------------------------

@pytest.mark.parametrize(
    ("profile", "status", "headers", "message", "kind"),
    [
        ("github", 403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1800000060"}, "",
         Kind.RATE_LIMITED),
        ("github", 403, {"x-ratelimit-remaining": "4999"}, "Resource not accessible", Kind.REJECTED),
        ("github", 403, {}, "You have exceeded a secondary rate limit", Kind.RATE_LIMITED),
        ("github", 403, {"retry-after": "30"}, "", Kind.RATE_LIMITED),
        ("github", 429, {}, "", Kind.RATE_LIMITED),
        # remaining 0 on a 403 is a rate limit in generic too; quota left stays a rejection
        ("generic", 403, {"x-ratelimit-remaining": "0"}, "", Kind.RATE_LIMITED),
        ("generic", 403, {"x-ratelimit-remaining": "12"}, "", Kind.REJECTED),
        ("generic", 500, {}, "", Kind.UNEXPECTED),
        ("generic", 418, {}, "", Kind.UNEXPECTED),
        ("generic", 502, {}, "", Kind.TRANSIENT),
        ("generic", 404, {}, "", Kind.NOT_FOUND),
        ("openai", 429, {}, '{"error": {"type": "insufficient_quota"}}', Kind.REJECTED),
        ("openai", 500, {}, "", Kind.TRANSIENT),
        ("anthropic", 529, {}, "", Kind.TRANSIENT),
    ],
)
def test_classification_follows_the_profile(profile, status, headers, message, kind) -> None:
    seen = ResponseSeen.of(status, headers, message=message)
    assert classify(get_profile(profile), seen, 1_800_000_000.0).kind is kind


def test_github_primary_limit_waits_for_the_reset_plus_a_second(clock) -> None:
    reset = int(clock.wall()) + 30
    script = [{"status": 403, "headers": {"x-ratelimit-remaining": "0",
                                          "x-ratelimit-reset": str(reset)}}, OK]
    outcome, _ = run(script, clock, profile="github", deadline=60)
    assert outcome.reason is Reason.OK
    (wait,) = outcome.waits
    assert (wait.reason, wait.source) == (WaitReason.RATE_LIMIT_RESET, "x-ratelimit-reset")
    assert wait.seconds == 31.0  # the fake wall clock starts on a whole second: exact


def test_github_secondary_limit_without_hint_waits_a_minute_then_doubles(clock) -> None:
    body = {"message": "You have exceeded a secondary rate limit"}
    script = [{"status": 403, "body": body}, {"status": 403, "body": body}, OK]
    outcome, _ = run(script, clock, profile="github", deadline=600, max_attempts=3)
    assert [w.seconds for w in outcome.waits] == [60.0, 120.0]
    assert outcome.reason is Reason.OK


def test_derived_profile_without_touching_internals() -> None:
    from retrybudget.core.profiles import GENERIC

    internal = GENERIC.derive("internal", transient=GENERIC.transient | {500})
    seen = ResponseSeen.of(500)
    assert classify(internal, seen, 0).kind is Kind.TRANSIENT
    assert classify(GENERIC, seen, 0).kind is Kind.UNEXPECTED
    with pytest.raises(ValueError, match="not an HTTP status"):
        GENERIC.derive("bad", transient={999})


# Rule 5: rate limits honoured within budget -----------------------------------------------

def test_wait_mode_waits_what_the_provider_asked(clock) -> None:
    outcome, _ = run([{"status": 429, "headers": {"Retry-After": "2"}}, OK], clock)
    assert outcome.reason is Reason.OK
    assert [(w.seconds, w.reason) for w in outcome.waits] == [(2.0, WaitReason.RETRY_AFTER)]


def test_fail_fast_ends_at_once_whatever_retry_after_says(clock) -> None:
    outcome, provider = run([{"status": 429, "headers": {"Retry-After": "0"}}, OK], clock,
                            rate_limit="fail_fast")
    assert (outcome.reason, provider.count, clock.sleeps) == (Reason.RATE_LIMITED, 1, [])
    assert outcome.retry_at == pytest.approx(clock.wall())


def test_retry_after_ms_wins_and_is_not_shortened(clock) -> None:
    script = [{"status": 429, "headers": {"retry-after-ms": "1500", "Retry-After": "1"}}, OK]
    outcome, _ = run(script, clock)
    assert outcome.waits[0].seconds == pytest.approx(1.5)


def test_max_server_wait_caps_a_single_provider_wait(clock) -> None:
    outcome, _ = run([{"status": 429, "headers": {"Retry-After": "30"}}, OK], clock,
                     deadline=600, max_server_wait=10)
    assert outcome.reason is Reason.RATE_LIMITED
    assert clock.sleeps == []


def test_repeated_rate_limits_without_hint_back_off_exponentially(clock) -> None:
    script = [{"status": 429}] * 3 + [OK]
    outcome, _ = run(script, clock, max_attempts=4, deadline=60)
    assert [w.seconds for w in outcome.waits] == [1.0, 2.0, 4.0]


# Rule 6: non-retryable failures stop at once ----------------------------------------------

@pytest.mark.parametrize(
    ("step", "reason"),
    [
        ({"status": 400}, Reason.REJECTED),
        ({"status": 401}, Reason.REJECTED),
        ({"status": 403}, Reason.REJECTED),
        ({"status": 404}, Reason.NOT_FOUND),
        ({"status": 500}, Reason.UNEXPECTED),
        ({"status": 302}, Reason.UNEXPECTED),
        ({"status": 200, "body_text": "not json"}, Reason.INVALID_PAYLOAD),
    ],
)
def test_non_retryable_failures_stop_after_one_attempt(clock, step, reason) -> None:
    outcome, provider = run([step, OK], clock)
    assert (outcome.reason, provider.count, outcome.waits) == (reason, 1, ())


def test_an_unknown_exception_is_unexpected_and_not_retried(clock) -> None:
    def broken() -> None:
        raise KeyError("bug")

    outcome = Retrier(clock=clock).call(broken)
    assert (outcome.reason, outcome.attempts) == (Reason.UNEXPECTED, 1)
    assert isinstance(outcome.error, KeyError)


# Rule 7: no fabricated completion ---------------------------------------------------------

def test_a_failed_outcome_carries_no_value(clock) -> None:
    outcome, _ = run([{"status": 503}] * 3 + [OK], clock)
    assert outcome.reason is Reason.EXHAUSTED
    assert outcome.value is None
    assert outcome.last is not None  # the last response is there to inspect, not as a value
    with pytest.raises(Exception, match="exhausted"):
        outcome.unwrap()


# Rule 8: counters are per operation -------------------------------------------------------

def test_counters_are_per_operation(clock) -> None:
    outcome, _ = run([{"status": 503}, {"status": 503}, OK], clock)
    stats = outcome.stats()
    assert (stats["logical_operations"], stats["attempts"], stats["retries"]) == (1, 3, 2)
    assert [w["reason"] for w in stats["waits"]] == ["backoff", "backoff"]


def test_a_breaker_rejection_is_one_operation_with_zero_attempts(clock) -> None:
    class Open(Coordinator):
        def admit(self, key: str) -> Admission:
            return Admission(allowed=False, retry_at=clock.wall() + 30)

    provider = ScriptedProvider([OK], clock)
    outcome = Retrier(clock=clock, coordinator=Open()).call(provider)
    assert (outcome.reason, outcome.attempts, provider.count) == (Reason.CIRCUIT_OPEN, 0, 0)
    assert outcome.logical_operations == 1


# Rule 10: workers coordinated (the core's side: gate waits and retry budget) ---------------

class Gate(Coordinator):
    def __init__(self, wait: float) -> None:
        self.wait = wait
        self.asked = 0
        self.retries = 0

    def acquire(self, key: str, attempt: int) -> Permit:
        self.asked += 1
        if self.asked == 1:
            return Permit(wait=self.wait, retry_at=1_800_000_000.0 + self.wait)
        return Permit()

    def spend_retry(self, key: str) -> bool:
        self.retries += 1
        return False


def test_a_gate_wait_inside_the_budget_is_taken(clock) -> None:
    provider = ScriptedProvider([OK], clock)
    outcome = Retrier(clock=clock, coordinator=Gate(2.0), policy=Policy(deadline=5)).call(provider)
    assert outcome.reason is Reason.OK
    assert [(w.seconds, w.reason) for w in outcome.waits] == [(2.0, WaitReason.GATE)]


def test_a_gate_wait_past_the_deadline_stops_with_zero_attempts(clock) -> None:
    provider = ScriptedProvider([OK], clock)
    outcome = Retrier(clock=clock, coordinator=Gate(10.0), policy=Policy(deadline=5)).call(provider)
    assert (outcome.reason, outcome.attempts, provider.count) == (Reason.RATE_LIMITED, 0, 0)
    assert outcome.retry_at == 1_800_000_010.0


def test_fail_fast_does_not_wait_at_the_gate(clock) -> None:
    provider = ScriptedProvider([OK], clock)
    retrier = Retrier(clock=clock, coordinator=Gate(0.5),
                      policy=Policy(deadline=5, rate_limit="fail_fast"))
    assert retrier.call(provider).reason is Reason.RATE_LIMITED
    assert provider.count == 0


def test_a_refused_retry_ends_with_retry_budget(clock) -> None:
    gate = Gate(0.0)
    provider = ScriptedProvider([{"status": 503}, OK], clock)
    outcome = Retrier(clock=clock, coordinator=gate).call(provider)
    assert (outcome.reason, outcome.attempts, gate.retries) == (Reason.RETRY_BUDGET, 1, 1)


@pytest.mark.parametrize("throttle", [
    {"status": 429, "headers": {"retry-after": "1"}},
    {"status": 429},
])
def test_a_retry_after_a_rate_limit_does_not_ask_the_retry_budget(clock, throttle) -> None:
    """The gate paces rate-limit retries; only retries of failures draw on the budget."""
    gate = Gate(0.0)  # refuses every retry it is asked for
    provider = ScriptedProvider([throttle, OK], clock)
    outcome = Retrier(clock=clock, coordinator=gate, policy=Policy(deadline=300)).call(provider)
    assert (outcome.reason, outcome.attempts, provider.count) == (Reason.OK, 2, 2)
    assert gate.retries == 0
    assert outcome.waits[-1].reason in (WaitReason.RETRY_AFTER, WaitReason.RATE_LIMIT_BACKOFF)


# Rule 12: bad input is data ---------------------------------------------------------------

def test_a_malformed_retry_after_is_bounded(clock) -> None:
    outcome, _ = run([{"status": 429, "headers": {"Retry-After": "soon"}}, OK], clock)
    assert outcome.reason is Reason.OK
    # the bound: the profile's floor (generic: 1 s), exactly, never an unbounded wait
    assert [(w.seconds, w.reason) for w in outcome.waits] == [(1.0, WaitReason.RATE_LIMIT_BACKOFF)]
    assert clock.sleeps == [1.0]
    # and huge or negative values are bounded too: clamped to the longest hint, or ignored
    outcome, _ = run([{"status": 429, "headers": {"Retry-After": "9" * 40}}, OK], clock)
    assert outcome.reason is Reason.RATE_LIMITED  # a week's wait does not fit: stop now
    assert outcome.retry_at is not None
    # retry_at says what the provider asked; the clamp of the wait is named
    assert outcome.retry_at - clock.wall() == float("9" * 40)
    assert "clamped to 604800s" in outcome.detail
    outcome, _ = run([{"status": 429, "headers": {"Retry-After": "-5"}}, OK], clock)
    assert [w.seconds for w in outcome.waits] == [1.0]


def test_conflicting_evidence_is_flagged(clock) -> None:
    reset = int(clock.wall()) + 120
    script = [{"status": 429, "headers": {"Retry-After": "10", "x-ratelimit-remaining": "0",
                                          "x-ratelimit-reset": str(reset)}}, OK]
    outcome, _ = run(script, clock, deadline=60)
    assert outcome.reason is Reason.OK
    assert outcome.waits[0].seconds == 10.0  # Retry-After takes precedence
    assert any("retry-after" in c and "x-ratelimit-reset" in c for c in outcome.conflicts)


# Rule 13: an attempt nothing cuts is only started when it fits -----------------------------

def hanging(clock: FakeClock, seconds: float, status: int = 503) -> Callable[[], ScriptedResponse]:
    """A plain function that ignores its timeout: every call takes ``seconds``, then answers."""

    def call() -> ScriptedResponse:
        clock.sleep(seconds)
        return ScriptedResponse(status, {}, "")

    return call


def test_a_plain_call_starts_no_attempt_as_long_as_its_last_past_the_deadline(clock) -> None:
    retrier = Retrier(policy=Policy(deadline=3.2, backoff=NO_JITTER), clock=clock)
    outcome = retrier.call(hanging(clock, 2.5))
    # 0.7 s left after the 2.5 s attempt: the 0.5 s backoff fits, not another 2.5 s after it
    assert (outcome.reason, outcome.attempts, outcome.elapsed) == (Reason.DEADLINE, 1, 2.5)
    assert clock.sleeps == [2.5]  # the backoff is not slept either
    assert "as long as the longest so far (2.500s; nothing cuts it)" in outcome.detail


def test_a_plain_call_starts_the_attempts_that_fit(clock) -> None:
    retrier = Retrier(policy=Policy(deadline=6.0, backoff=NO_JITTER), clock=clock)
    outcome = retrier.call(hanging(clock, 2.5))
    # 2.5 + 0.5 + 2.5 = 5.5 fits; a 1 s backoff and 2.5 s more would end at 9 s
    assert (outcome.reason, outcome.attempts, outcome.elapsed) == (Reason.DEADLINE, 2, 5.5)
    assert clock.sleeps == [2.5, 0.5, 2.5]


def test_an_attempt_that_is_cut_is_still_started_with_less_time(clock) -> None:
    # run()'s perform takes each attempt's timeout: it is cut at it, so it may start short
    def perform(attempt: Attempt) -> AttemptResult:
        if attempt.timeout is not None and attempt.timeout < 2.5:
            clock.sleep(attempt.timeout)
            return AttemptResult(FailureSeen(FailureKind.TIMEOUT, "TimeoutError"))
        clock.sleep(2.5)
        return AttemptResult(ResponseSeen.of(503, {}))

    outcome = Retrier(policy=Policy(deadline=3.5, backoff=NO_JITTER), clock=clock).run(perform)
    assert (outcome.reason, outcome.attempts, outcome.elapsed) == (Reason.DEADLINE, 2, 3.5)
    assert [r.timeout for r in outcome.history] == [3.5, 0.5]


def test_a_plain_call_that_takes_its_timeout_is_cut_by_it(clock) -> None:
    # ScriptedProvider reads attempt_timeout() and ends by it, as a client given it does
    script = [{"status": 503, "delay_s": 2.5}] * 3
    outcome, provider = run(script, clock, deadline=3.2)
    assert (outcome.reason, provider.count) == (Reason.DEADLINE, 2)
    assert [r.timeout for r in outcome.history] == pytest.approx([3.2, 0.2])
    assert outcome.elapsed == pytest.approx(3.2)  # the second attempt ended by its timeout


def test_the_longest_unbounded_attempt_decides_and_a_coordinator_wait_counts() -> None:
    policy = Policy(deadline=10.0, max_attempts=5)
    state = OperationState.start(policy, "op", 0.0)
    seen = classify(policy.profile, ResponseSeen.of(503, {}), 0.0)
    for started, elapsed, bounded in ((0.0, 6.0, True), (6.5, 4.0, False), (11.0, 1.0, False)):
        record = AttemptRecord(len(state.history) + 1, started, elapsed, 503, None,
                               Kind.TRANSIENT, "retry", "")
        state = state.with_attempt(record, seen, bounded)
    # the longest that nothing could cut, not the last one, nor a longer one its timeout ended
    assert attempt_needs(policy, state) == 4.0
    assert attempt_needs(policy, state, took=5.0) == 5.0  # the attempt just made counts
    state = OperationState(**{**{f: getattr(state, f) for f in state.__slots__},
                              "deadline_at": 20.0, "attempts": 3})
    # 4.5 s left after a coordinator's wait: a 4 s attempt fits, not with 3.9 s left
    assert plan_attempt(policy, state, 15.5) == pytest.approx(4.5)
    stop = plan_attempt(policy, state, 16.1)
    assert isinstance(stop, Stop)
    assert stop.reason is Reason.DEADLINE
    assert "the longest so far took 4.000s" in stop.detail
    bounded = OperationState.start(policy, "op", 10.0)
    assert attempt_needs(policy, bounded) == policy.min_attempt_time


# decide() directly -------------------------------------------------------------------------

def test_decide_never_returns_a_wait_past_the_deadline() -> None:
    policy = Policy(deadline=1.0)
    state = OperationState.start(policy, "op", 0.0, method="GET")
    state = OperationState(**{**{f: getattr(state, f) for f in state.__slots__}, "attempts": 1})
    seen = classify(policy.profile, ResponseSeen.of(429, {"Retry-After": "2"}), 0.0)
    decision = decide(policy, state, seen, 0.0, 0.0, 0.5)
    assert isinstance(decision, Stop)
    assert decision.reason is Reason.RATE_LIMITED
    assert decision.retry_at == 2.0
    seen = classify(policy.profile, ResponseSeen.of(429, {"Retry-After": "0.5"}), 0.0)
    assert isinstance(decide(policy, state, seen, 0.0, 0.0, 0.5), Retry)
