"""Property tests: generated scripts, headers, policies and clocks never break the contract."""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.strategies import WALL0, methods, policies, scripts

from retrybudget import FakeClock, Kind, Reason, Retrier, WaitReason
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


@settings(max_examples=int(__import__("os").environ.get("RB_PROPERTY_EXAMPLES", "300")))
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
            response = dict(record.evidence)
            if "retry-after" in response and response["retry-after"].strip().isdigit():
                assert wait.seconds >= min(float(response["retry-after"]), 7 * 24 * 3600) - 1e-9
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


@settings(max_examples=int(__import__("os").environ.get("RB_PROPERTY_EXAMPLES", "300")))
@given(
    status=st.integers(-1000, 1000),
    headers=st.dictionaries(st.text(max_size=20), st.text(max_size=40), max_size=6),
    message=st.text(max_size=100),
    now=st.floats(-1e12, 1e12, allow_nan=False),
    profile=st.sampled_from(["generic", "github", "openai", "anthropic", "slack", "discord"]),
)
def test_classify_is_total(status, headers, message, now, profile) -> None:
    from retrybudget import ResponseSeen, get_profile

    seen = ResponseSeen.of(status, headers, message=message)
    result = classify(get_profile(profile), seen, now)
    assert isinstance(result.kind, Kind)
    if result.hint is not None:
        assert 0 <= result.hint.delay <= 7 * 24 * 3600
