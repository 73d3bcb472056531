"""Property tests: generated scripts, headers, policies and clocks never break the contract."""

from __future__ import annotations

import json
import os
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.strategies import WALL0, methods, policies, scripts

from retrybudget import PROFILES, FakeClock, Kind, Reason, Retrier, WaitReason
from retrybudget.core.classify import classify
from retrybudget.testing import ScriptedResponse, expand_placeholders, json_payload


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


@settings(max_examples=int(os.environ.get("RB_PROPERTY_EXAMPLES", "300")))
@given(
    policy=policies(),
    script=scripts,
    method=methods,
    has_key=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
    start=st.floats(0, 1e6, allow_nan=False),
)
def test_no_generated_script_breaks_the_contract(policy, script, method, has_key, seed, start) -> None:
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
    # rate-limit waits are never shorter than the provider asked
    for record, wait in zip(outcome.history, outcome.waits, strict=False):
        if record.kind is Kind.RATE_LIMITED and wait.reason is WaitReason.RETRY_AFTER:
            asked = dict(record.evidence).get(wait.source, "").strip()
            if asked.isdigit():  # whole seconds, or whole milliseconds for retry-after-ms
                scale = 1000.0 if wait.source == "retry-after-ms" else 1.0
                assert wait.seconds >= min(float(asked) / scale, 7 * 24 * 3600) - 1e-9
    # writes are never re-sent unless keyed and allowed
    writes_ok = method in policy.idempotent_methods or (has_key and policy.retry_writes_with_key)
    if not writes_ok:
        assert provider.sent <= 1
    # ok only for a 2xx with a valid payload, and the value is what the provider served
    if outcome.reason is Reason.OK:
        assert provider.served[-1] is not None
        assert 200 <= provider.served[-1] < 300
        assert isinstance(json.loads(outcome.value.text), dict)
    else:
        assert outcome.value is None


@settings(max_examples=min(2000, int(os.environ.get("RB_PROPERTY_EXAMPLES", "300"))))
@given(
    status=st.integers(-1000, 1000),
    headers=st.dictionaries(st.text(max_size=20), st.text(max_size=40), max_size=6),
    message=st.text(max_size=100),
    now=st.floats(-1e12, 1e12, allow_nan=False),
    profile=st.sampled_from(["auto", *sorted(PROFILES)]),
)
def test_classify_is_total(status, headers, message, now, profile) -> None:
    from retrybudget import ResponseSeen, get_profile

    seen = ResponseSeen.of(status, headers, message=message)
    result = classify(get_profile(profile), seen, now)
    assert isinstance(result.kind, Kind)
    if result.hint is not None:
        assert 0 <= result.hint.delay <= 7 * 24 * 3600


@settings(max_examples=min(3000, int(os.environ.get("RB_PROPERTY_EXAMPLES", "300"))))
@given(
    policy=policies(),
    status=st.sampled_from([200, 400, 403, 404, 429, 500, 502, 503, 504, 529]),
    headers=st.dictionaries(st.sampled_from(["Retry-After", "retry-after-ms",
                                             "x-ratelimit-remaining", "x-ratelimit-reset"]),
                            st.text(max_size=12), max_size=4),
    attempts=st.integers(0, 7),
    elapsed=st.floats(0, 200, allow_nan=False),
    method=methods,
    has_key=st.booleans(),
    sample=st.floats(0, 1, exclude_max=True),
)
def test_decide_never_breaks_a_rule(policy, status, headers, attempts, elapsed, method, has_key,
                                    sample) -> None:
    from retrybudget import ResponseSeen
    from retrybudget.core.decide import OperationState, Retry, Stop, decide

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
        elif rate.reset is not None and rate.remaining in (None, 0):
            assert decision.after >= rate.reset.delay
    assert method in policy.idempotent_methods or (has_key and policy.retry_writes_with_key)
