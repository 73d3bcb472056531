"""Property tests: generated scripts, headers, policies and clocks never break the contract."""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from retrybudget import PROFILES, FakeClock, Kind, Reason, Retrier, WaitReason
from retrybudget.core.classify import classify
from retrybudget.core.decide import decide
from retrybudget.core.headers import MAX_VALUE_CHARS, parse_rate_limit_headers
from retrybudget.testing import ScriptedResponse, expand_placeholders, json_payload
from tests.support.strategies import (
    WALL0,
    assert_reached,
    examples,
    header_pairs,
    methods,
    policies,
    reached,
    scripts,
    throttle_steps,
    throttled_scripts,
    tried,
    wait_policies,
)


class GeneratedProvider:
    """Answers generated steps on a fake clock; logs what was really sent."""

    def __init__(self, script: list[dict[str, Any]], clock: FakeClock) -> None:
        self.script = script
        self.clock = clock
        self.calls = 0
        self.sent = 0
        self.served: list[int | None] = []

    def __call__(self) -> ScriptedResponse:
        from retrybudget import attempt_timeout

        step = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        if step.get("refused"):
            self.served.append(None)
            raise ConnectionRefusedError("refused")
        self.sent += 1
        delay = step.get("delay_s", 0.0)
        timeout = attempt_timeout()
        if timeout is not None and delay > timeout:
            self.clock.sleep(timeout)
            self.served.append(None)
            raise TimeoutError("slow")
        self.clock.sleep(delay)
        if step.get("reset"):
            self.served.append(None)
            raise ConnectionResetError("reset")
        self.served.append(step["status"])
        headers = {k: expand_placeholders(v, self.clock.wall()) for k, v in step["headers"].items()}
        return ScriptedResponse(step["status"], headers, step["body_text"])


class Recorder:
    def __init__(self) -> None:
        self.outcomes: list[Any] = []
        self.waits: list[Any] = []

    def before_wait(self, event: Any) -> None:
        self.waits.append(event.wait)

    def on_outcome(self, outcome: Any, request: Any) -> None:
        self.outcomes.append(outcome)


CONTRACT = "test_no_generated_script_breaks_the_contract"
CLASSIFY = "test_classify_is_total"
DECIDE = "test_decide_never_breaks_a_rule"
ASKED = "test_decide_never_waits_less_than_the_provider_asked"
UNCUT = "test_a_plain_call_never_starts_an_attempt_that_would_end_past_the_deadline"


@settings(max_examples=examples(300))  # CI: 10,000, the largest input space (scripts)
@given(
    # half the time: rate limits to wait for, in wait mode, with room in the deadline
    policy_and_script=st.one_of(st.tuples(policies(), scripts),
                                st.tuples(wait_policies(), throttled_scripts)),
    method=methods,
    has_key=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    start=st.floats(0, 1e6, allow_nan=False),
)
def test_no_generated_script_breaks_the_contract(policy_and_script, method, has_key, seed,
                                                 start) -> None:
    policy, script = policy_and_script
    tried(CONTRACT)
    clock = FakeClock(monotonic=start, wall=WALL0)
    provider = GeneratedProvider(script, clock)
    recorder = Recorder()
    policy = policy.replace(validator=json_payload)
    retrier = Retrier(policy=policy, clock=clock, random=random.Random(seed), hooks=(recorder,),
                      method=method, idempotency_key=has_key)
    outcome = retrier.call(provider)

    # exactly one outcome, reported once
    assert isinstance(outcome.reason, Reason)
    assert recorder.outcomes == [outcome]
    assert outcome.logical_operations == 1
    # attempts are bounded and counted per operation
    assert outcome.attempts <= policy.max_attempts
    assert outcome.attempts == provider.calls == len(outcome.history)
    # the deadline holds: total time (waits and attempts) never passes it
    if policy.deadline is not None:
        assert outcome.elapsed <= policy.deadline + 1e-6
    # a wait only when another attempt followed it
    assert len(outcome.waits) <= max(0, outcome.attempts - 1) + 0
    # rate-limit waits are never shorter than the provider asked: the evidence of the attempt
    # the wait followed, read again at the instant it was received
    for wait in outcome.waits:
        record = outcome.history[wait.attempt - 1]
        if record.kind is not Kind.RATE_LIMITED:
            continue
        event(f"rate-limit wait: {wait.reason.value}")
        if wait.reason is WaitReason.RATE_LIMIT_BACKOFF:
            assert wait.seconds >= policy.profile.rate_limit_floor
            reached(CONTRACT, "rate-limit wait never shorter")
            continue
        if wait.reason is WaitReason.BACKOFF:
            # the provider named a time that is now or past: the policy's backoff, never a burst
            assert wait.seconds >= (policy.profile.zero_hint_wait or 0.0)
            continue
        if any(len(v) >= MAX_VALUE_CHARS for _, v in record.evidence):
            continue  # the evidence was cut: it cannot be read again
        received = WALL0 + record.started + record.elapsed
        # read with the profile's header dialect, as the flow read it (GitHub's names no
        # retry-after-ms, so a generated one is not what GitHub asked)
        rate = parse_rate_limit_headers(record.evidence, received, policy.profile.header_rules)
        if wait.reason is WaitReason.RETRY_AFTER:
            assert rate.retry_after is not None
            assert wait.seconds >= rate.retry_after.delay - 1e-6
        else:
            assert wait.reason is WaitReason.RATE_LIMIT_RESET
            assert rate.reset is not None
            assert wait.seconds >= rate.reset.delay + policy.profile.reset_slack - 1e-6
        reached(CONTRACT, "rate-limit wait never shorter")
    # writes are never re-sent unless keyed and allowed
    writes_ok = method in policy.idempotent_methods or (has_key and policy.retry_writes_with_key)
    if not writes_ok:
        assert provider.sent <= 1
        reached(CONTRACT, "a write is not re-sent")
    if policy.deadline is not None:
        reached(CONTRACT, "the deadline holds")
    # ok only for a 2xx with a valid payload, and the value is what the provider served
    if outcome.reason is Reason.OK:
        assert provider.served[-1] is not None
        assert 200 <= provider.served[-1] < 300
        assert isinstance(json.loads(outcome.value.text), dict)
    else:
        assert outcome.value is None


@settings(max_examples=examples(300, cap=2000))
@given(
    status=st.integers(-1000, 1000),
    # the providers' header families (past the parser's early exit), or anything at all
    headers=st.one_of(
        header_pairs(),
        st.dictionaries(st.text(max_size=20), st.text(max_size=40), max_size=6).map(
            lambda d: list(d.items())),
    ),
    message=st.text(max_size=100),
    # the wall clock near the generated epochs, or anywhere
    now=st.one_of(st.floats(WALL0 - 100, WALL0 + 100, allow_nan=False),
                  st.floats(-1e12, 1e12, allow_nan=False)),
    profile=st.sampled_from(["auto", *sorted(PROFILES)]),
)
def test_classify_is_total(status, headers, message, now, profile) -> None:
    from retrybudget import ResponseSeen, get_profile

    tried(CLASSIFY)
    seen = ResponseSeen.of(status, headers, message=message)
    result = classify(get_profile(profile), seen, now)
    assert isinstance(result.kind, Kind)
    if result.hint is not None:
        assert 0 <= result.hint.delay <= 7 * 24 * 3600
        reached(CLASSIFY, "a hint is bounded")
    event(f"kind: {result.kind.value}")


@settings(max_examples=examples(300, cap=3000))
@given(
    # half the time a policy that waits for rate limits with room, and a 429 to wait for
    policy=st.one_of(policies(), wait_policies()),
    status=st.one_of(st.sampled_from([200, 400, 403, 404, 429, 500, 502, 503, 504, 529]),
                     st.just(429)),
    headers=st.one_of(header_pairs(), throttle_steps().map(lambda s: list(s["headers"].items()))),
    attempts=st.integers(0, 7),
    elapsed=st.floats(0, 200, allow_nan=False),
    method=st.one_of(methods, st.just("GET")),
    has_key=st.booleans(),
    sample=st.floats(0, 1, exclude_max=True),
)
def test_decide_never_breaks_a_rule(policy, status, headers, attempts, elapsed, method, has_key,
                                    sample) -> None:
    from retrybudget import ResponseSeen
    from retrybudget.core.decide import Retry, Stop, decide
    from retrybudget.core.state import OperationState

    tried(DECIDE)
    start = OperationState.start(policy, "op", 0.0, method=method, has_idempotency_key=has_key)
    state = OperationState(
        start.operation_id, start.method, start.started, start.deadline_at,
        start.has_idempotency_key, min(attempts, policy.max_attempts - 1),
    )
    seen = classify(policy.profile, ResponseSeen.of(status, headers), WALL0)
    decision = decide(policy, state, seen, elapsed, WALL0, sample)
    if isinstance(decision, Stop):
        assert isinstance(decision.reason, Reason)
        if seen.kind is Kind.OK:
            assert decision.reason is Reason.OK
        else:
            assert decision.reason is not Reason.OK
        return
    assert isinstance(decision, Retry)
    assert seen.kind in (Kind.RATE_LIMITED, Kind.TRANSIENT)
    assert state.attempts + 1 < policy.max_attempts
    assert decision.after >= 0
    if state.deadline_at is not None:
        assert elapsed + decision.after <= state.deadline_at
    if seen.kind is Kind.RATE_LIMITED:
        assert policy.rate_limit.value == "wait"
        rate = seen.rate
        if rate.retry_after is not None:
            assert decision.after >= rate.retry_after.delay
            reached(DECIDE, "never shorter than the provider asked")
        elif rate.reset is not None and rate.remaining in (None, 0):
            assert decision.after >= rate.reset.delay
            reached(DECIDE, "never shorter than the provider asked")
    assert method in policy.idempotent_methods or (has_key and policy.retry_writes_with_key)


# one rate limit of six kinds, each naming up to 120 s: 2,000 examples reach the check
# ~1,500 times; more only repeats it
@settings(max_examples=examples(300, cap=2000))
@given(
    policy=wait_policies(),
    step=throttle_steps(),
    attempts=st.integers(0, 4),
    elapsed=st.floats(0, 100, allow_nan=False),
    sample=st.floats(0, 1, exclude_max=True),
)
def test_decide_never_waits_less_than_the_provider_asked(policy, step, attempts, elapsed,
                                                         sample) -> None:
    """Rule 5 in wait mode with room: the wait is never shorter than the provider asked."""
    from retrybudget import ResponseSeen
    from retrybudget.core.decide import Retry
    from retrybudget.core.state import OperationState

    tried(ASKED)
    start = OperationState.start(policy, "op", 0.0, method="GET")
    state = OperationState(start.operation_id, start.method, start.started, start.deadline_at,
                           False, min(attempts, policy.max_attempts - 2))
    seen = classify(policy.profile, ResponseSeen.of(step["status"], step["headers"]), WALL0)
    if seen.kind is not Kind.RATE_LIMITED:
        return
    decision = decide(policy, state, seen, elapsed, WALL0, sample)
    rate = seen.rate
    if rate.retry_after is not None:
        asked = rate.retry_after.delay
    elif rate.reset is not None and rate.remaining in (None, 0):
        asked = rate.reset.delay + policy.profile.reset_slack
    else:
        asked = policy.profile.rate_limit_floor
    if isinstance(decision, Retry):
        assert decision.after >= asked
    else:  # it did not fit: stop now, naming the instant the provider asked for
        assert decision.reason is Reason.RATE_LIMITED
        assert decision.retry_at is not None
        assert decision.retry_at >= WALL0 + asked
    reached(ASKED, "never shorter than the provider asked")


_answers = st.sampled_from(["503", "429", "timeout"])


@settings(max_examples=examples(300, cap=3000))
@given(
    policy=policies(),
    first=st.floats(0.001, 30, allow_nan=False),
    later=st.lists(st.tuples(st.floats(0, 1), _answers), min_size=1, max_size=10),
    answer=_answers,
    seed=st.integers(0, 2**32 - 1),
)
def test_a_plain_call_never_starts_an_attempt_that_would_end_past_the_deadline(
    policy, first, later, answer, seed
) -> None:
    # Rule 13: a sync plain function that ignores its timeout, each attempt no longer than the
    # first (the longest): whatever the policy, no attempt after the first ends past the
    # deadline, and the operation ends by the deadline unless its first attempt ran past it.
    tried(UNCUT)
    clock = FakeClock(wall=WALL0)
    steps = [(first, answer)] + [(first * share, kind) for share, kind in later]
    calls = iter(range(len(steps)))

    def call() -> ScriptedResponse:
        length, kind = steps[min(next(calls), len(steps) - 1)]
        clock.sleep(length)
        if kind == "timeout":
            raise TimeoutError("no answer")
        return ScriptedResponse(int(kind), {"Retry-After": "1"} if kind == "429" else {}, "")

    outcome = Retrier(policy=policy, clock=clock, random=random.Random(seed)).call(call)
    if policy.deadline is None:
        return
    for record in outcome.history[1:]:
        assert record.started + record.elapsed <= policy.deadline + 1e-6
        reached(UNCUT, "a later attempt ends by the deadline")
    assert outcome.elapsed <= max(policy.deadline, first) + 1e-6
    reached(UNCUT, "the operation ends by the deadline")


# Last in the module: each property above reached its checks (a check never run proves nothing)

def test_the_contract_property_reached_its_checks() -> None:
    assert_reached(CONTRACT, ("rate-limit wait never shorter", "a write is not re-sent",
                              "the deadline holds"))


def test_classify_property_reached_its_checks() -> None:
    assert_reached(CLASSIFY, ("a hint is bounded",))


def test_decide_property_reached_its_checks() -> None:
    assert_reached(ASKED, ("never shorter than the provider asked",))


def test_the_uncut_attempt_property_reached_its_checks() -> None:
    assert_reached(UNCUT, ("a later attempt ends by the deadline",
                           "the operation ends by the deadline"))
