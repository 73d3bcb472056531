"""Regression tests for the classification defects found with real provider header shapes.

Each test pins exact values on the fake clock: the wait taken, its reason and source, and the
``retry_at`` reported.
"""

from __future__ import annotations

import email.utils
import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrybudget import (
    PROVIDERS,
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
    parse_rate_limit_headers,
)
from retrybudget.core.classify import classify
from retrybudget.core.decide import Retry, Stop, decide
from retrybudget.core.headers import CLAMP_EVIDENCE, MAX_CLOCK_SKEW, MAX_HINT_SECONDS, SKEW_EVIDENCE
from retrybudget.core.state import OperationState
from retrybudget.testing import ScriptedProvider, json_payload

NOW = 1_800_000_000.0
NO_JITTER = Backoff(base=0.5, cap=4.0, multiplier=2.0, jitter=Jitter.NONE)
OK = {"status": 200, "body": {"available": True}}


def run(script, clock, **changes):
    policy = Policy(backoff=NO_JITTER, validator=json_payload).replace(**changes)
    provider = ScriptedProvider(script, clock)
    retrier = Retrier(policy=policy, clock=clock, random=random.Random(0))
    return retrier.call(provider), provider


def decide_once(profile, status, headers, *, now_wall=NOW, sample=0.5, **changes):
    policy = Policy(profile=get_profile(profile), deadline=None).replace(**changes)
    classified = classify(policy.profile, ResponseSeen.of(status, headers), now_wall)
    state = OperationState.start(policy, "op", 0.0)
    return classified, decide(policy, state, classified, 0.0, now_wall, sample)


def httpdate(at: float) -> str:
    return email.utils.formatdate(at, usegmt=True)


# 1. A 5xx with ordinary quota headers waits the backoff, never the window reset -----------

@pytest.mark.parametrize("status", [502, 503, 504])
def test_a_github_5xx_with_quota_left_waits_the_backoff_not_the_reset(clock, status) -> None:
    quota = {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "4999",
             "x-ratelimit-reset": "{epoch+3000}", "x-ratelimit-resource": "core"}
    outcome, provider = run([{"status": status, "headers": quota}, OK], clock,
                            profile="github", deadline=60)
    assert (outcome.reason, provider.count) == (Reason.OK, 2)
    assert [(w.seconds, w.reason, w.source) for w in outcome.waits] == [
        (0.5, WaitReason.BACKOFF, "policy")]
    assert outcome.retry_at is None


def test_a_5xx_with_the_quota_spent_waits_for_the_reset(clock) -> None:
    quota = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "{epoch+20}"}
    outcome, _ = run([{"status": 503, "headers": quota}, OK], clock, profile="github",
                     deadline=60)
    assert [(w.seconds, w.reason) for w in outcome.waits] == [(20.0, WaitReason.RETRY_AFTER)]


@given(
    remaining=st.integers(min_value=1, max_value=10**6),
    reset_in=st.integers(min_value=1, max_value=7 * 24 * 3600),
    sample=st.floats(min_value=0.0, max_value=0.999),
    profile=st.sampled_from([p for p in PROVIDERS if p.transient & {502, 503, 504}]),
    status=st.sampled_from([502, 503, 504]),
    family=st.sampled_from(["x-ratelimit", "x-rate-limit", "ratelimit"]),
)
def test_with_quota_left_a_transient_failure_waits_the_policy_backoff(
    remaining, reset_in, sample, profile, status, family
) -> None:
    """For any response with quota headers and quota left, the wait after a transient failure
    is the policy's backoff, never the window reset."""
    headers = {f"{family}-limit": str(remaining + 10), f"{family}-remaining": str(remaining),
               f"{family}-reset": str(int(NOW) + reset_in)}
    policy = Policy(profile=profile, deadline=None, backoff=Backoff(base=1.0, cap=60.0))
    classified = classify(profile, ResponseSeen.of(status, headers), NOW)
    assert classified.kind is Kind.TRANSIENT
    decision = decide(policy, OperationState.start(policy, "op", 0.0), classified, 0.0, NOW,
                      sample)
    assert isinstance(decision, Retry)
    assert decision.after == policy.backoff.delay(0, sample)
    assert (decision.reason, decision.source, decision.retry_at) == (
        WaitReason.BACKOFF, "policy", None)


# 2. Retry-After: 0 or a past date falls back to the backoff, with jitter ---------------

@pytest.mark.parametrize("value", ["0", httpdate(NOW - 30)])
@pytest.mark.parametrize("status", [429, 503])
def test_a_zero_or_past_retry_after_waits_the_jittered_backoff(value, status) -> None:
    jittered = Backoff(base=2.0, cap=10.0, jitter=Jitter.FULL)
    _, decision = decide_once("generic", status, {"Retry-After": value}, sample=0.25,
                              backoff=jittered)
    assert isinstance(decision, Retry)
    assert (decision.after, decision.reason, decision.source) == (0.5, WaitReason.BACKOFF,
                                                                  "policy")


def test_a_zero_retry_after_is_not_an_immediate_burst(clock) -> None:
    script = [{"status": 429, "headers": {"Retry-After": "0"}}] * 2 + [OK]
    outcome, _ = run(script, clock, deadline=60)
    assert outcome.reason is Reason.OK
    assert [(w.seconds, w.reason) for w in outcome.waits] == [
        (0.5, WaitReason.BACKOFF), (1.0, WaitReason.BACKOFF)]


def test_github_keeps_its_minute_for_a_secondary_limit_with_retry_after_zero() -> None:
    _, decision = decide_once("github", 403, {"Retry-After": "0"},
                              backoff=NO_JITTER)
    assert isinstance(decision, Retry)
    assert (decision.after, decision.reason) == (60.0, WaitReason.RATE_LIMIT_BACKOFF)


# 3. Generic: a 403 with remaining 0 is a rate limit; with quota left a rejection ---------

def test_generic_403_with_the_quota_spent_is_a_rate_limit(clock) -> None:
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "{epoch+5}"}
    outcome, provider = run([{"status": 403, "headers": headers}, OK], clock, deadline=60)
    assert (outcome.reason, provider.count) == (Reason.OK, 2)
    assert [(w.seconds, w.reason) for w in outcome.waits] == [
        (5.0, WaitReason.RATE_LIMIT_RESET)]


def test_generic_403_with_quota_left_stays_a_rejection(clock) -> None:
    headers = {"x-ratelimit-remaining": "17", "x-ratelimit-reset": "{epoch+5}"}
    outcome, provider = run([{"status": 403, "headers": headers}, OK], clock)
    assert (outcome.reason, provider.count) == (Reason.REJECTED, 1)


# 4. A reset read the way its provider documents it --------------------------------------

def test_the_guide_fixture_reset_125_at_now_100_is_25_seconds_for_github() -> None:
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "125"}
    info = parse_rate_limit_headers(headers, 100.0, get_profile("github").header_rules)
    assert info.reset is not None
    assert info.reset.delay == 25.0
    _, decision = decide_once("github", 403, headers, now_wall=100.0)
    assert isinstance(decision, Retry)
    # GitHub's reset plus the one second Octokit adds "so we retry after the reset time"
    assert (decision.after, decision.reason, decision.retry_at) == (
        26.0, WaitReason.RATE_LIMIT_RESET, 126.0)


def test_generic_keeps_the_magnitude_heuristic() -> None:
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "125"}
    info = parse_rate_limit_headers(headers, 100.0)
    assert info.reset is not None
    assert info.reset.delay == 125.0
    epoch = parse_rate_limit_headers({"x-ratelimit-reset": str(int(NOW) + 9)}, NOW)
    assert epoch.reset is not None
    assert epoch.reset.delay == 9.0


@pytest.mark.parametrize(
    ("profile", "headers", "delay"),
    [
        ("x", {"x-rate-limit-remaining": "0", "x-rate-limit-reset": "160"}, 60.0),
        ("discord", {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "100.5"}, 0.5),
        ("openai", {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s"},
         360.0),
        ("anthropic", {"anthropic-ratelimit-requests-remaining": "0",
                       "anthropic-ratelimit-requests-reset": "1970-01-01T00:02:10Z"}, 30.0),
        ("gitlab", {"ratelimit-remaining": "0", "ratelimit-reset": "130"}, 30.0),
    ],
)
def test_each_provider_reset_is_read_in_its_documented_unit(profile, headers, delay) -> None:
    info = parse_rate_limit_headers(headers, 100.0, get_profile(profile).header_rules)
    assert info.reset is not None
    assert info.reset.delay == delay


# 5. Absolute times measured against the provider's clock --------------------------------

def test_an_http_date_retry_after_is_measured_against_the_providers_date() -> None:
    provider_now = NOW + 30.0  # our clock is 30 s behind the provider's
    headers = {"Date": httpdate(provider_now), "Retry-After": httpdate(provider_now + 10)}
    classified, decision = decide_once("generic", 429, headers)
    assert isinstance(decision, Retry)
    assert (decision.after, decision.reason) == (10.0, WaitReason.RETRY_AFTER)
    assert (SKEW_EVIDENCE, "+30s") in classified.rate.evidence


def test_an_epoch_reset_is_measured_against_the_providers_date() -> None:
    provider_now = NOW - 45.0  # our clock is 45 s ahead
    headers = {"Date": httpdate(provider_now), "x-ratelimit-remaining": "0",
               "x-ratelimit-reset": str(int(provider_now) + 20)}
    classified, decision = decide_once("github", 403, headers)
    assert isinstance(decision, Retry)
    assert decision.after == 21.0  # 20 s on the provider's clock, plus GitHub's second
    assert (SKEW_EVIDENCE, "-45s") in classified.rate.evidence


@pytest.mark.parametrize("fast", [True, False], ids=["fast reader", "general reader"])
@pytest.mark.parametrize("fraction", [0.0, 0.25, 0.999])
def test_a_date_under_its_resolution_behind_is_no_skew(fast, fraction) -> None:
    # A provider whose clock is exact sends the whole second (RFC 9110 IMF-fixdate): up to a
    # second behind ours. The epoch reset is read against our clock, to the fraction.
    now = NOW + 10 + fraction
    pairs = {"date": httpdate(NOW + 10), "x-ratelimit-remaining": "0",
             "x-ratelimit-reset": str(int(NOW) + 20)}
    headers = tuple(pairs.items()) if fast else pairs
    info = parse_rate_limit_headers(headers, now, get_profile("github").header_rules)
    assert info.reset is not None
    assert info.reset.delay == (NOW + 20) - now
    assert all(name != SKEW_EVIDENCE for name, _ in info.evidence)


@pytest.mark.parametrize("fast", [True, False], ids=["fast reader", "general reader"])
@pytest.mark.parametrize(("date", "now", "skew", "evidence"), [
    (NOW + 9, NOW + 10.0, -1.0, "-1s"),  # a whole second behind: the provider's clock
    (NOW + 8, NOW + 10.25, -2.25, "-2s"),
    (NOW + 12, NOW + 10.5, 1.5, "+2s"),  # ahead by more than the resolution
    (NOW + 11, NOW + 10.5, 0.0, None),  # half a second ahead: within the resolution
])
def test_a_date_a_second_or_more_off_is_the_providers_clock(fast, date, now, skew,
                                                            evidence) -> None:
    pairs = {"date": httpdate(date), "x-ratelimit-remaining": "0",
             "x-ratelimit-reset": str(int(NOW) + 40)}
    headers = tuple(pairs.items()) if fast else pairs
    info = parse_rate_limit_headers(headers, now, get_profile("github").header_rules)
    assert info.reset is not None
    assert info.reset.delay == (NOW + 40) - (now + skew)
    assert [v for n, v in info.evidence if n == SKEW_EVIDENCE] == ([] if evidence is None
                                                                   else [evidence])


def test_an_exact_providers_reset_is_waited_to_the_fraction(clock: FakeClock) -> None:
    # GitHub's primary limit from a provider whose clock is ours, 0.6 s into a second: the
    # reset plus GitHub's second (Octokit), never an extra fraction for the Date's rounding.
    clock.advance(0.6)
    wall = clock.wall()
    script = [{"status": 403, "headers": {"Date": httpdate(math.floor(wall)),
                                          "x-ratelimit-remaining": "0",
                                          "x-ratelimit-reset": str(math.floor(wall) + 5)}}, OK]
    outcome, provider = run(script, clock, profile=get_profile("github"), deadline=60)
    assert (outcome.reason, provider.count) == (Reason.OK, 2)
    assert [(w.seconds, w.reason) for w in outcome.waits] == [
        (math.floor(wall) + 5 - wall + 1.0, WaitReason.RATE_LIMIT_RESET)]


def test_the_skew_correction_is_bounded_and_noted() -> None:
    headers = {"Date": httpdate(NOW + 2 * 86400), "Retry-After": httpdate(NOW + 2 * 86400 + 5)}
    info = parse_rate_limit_headers(headers, NOW)
    assert info.retry_after is not None
    assert info.retry_after.delay == 2 * 86400 + 5 - MAX_CLOCK_SKEW
    assert any("clamped" in note.reason for note in info.notes if note.header == "date")


def test_a_relative_delay_ignores_the_date_and_no_date_means_the_local_clock() -> None:
    skewed = parse_rate_limit_headers({"Date": httpdate(NOW + 300), "Retry-After": "7"}, NOW)
    assert skewed.retry_after is not None
    assert skewed.retry_after.delay == 7.0
    local = parse_rate_limit_headers({"Retry-After": httpdate(NOW + 12)}, NOW)
    assert local.retry_after is not None
    assert local.retry_after.delay == 12.0
    assert all(name != SKEW_EVIDENCE for name, _ in local.evidence)


def test_the_skew_reaches_the_audit_evidence(clock: FakeClock) -> None:
    script = [{"status": 429, "headers": {"Date": httpdate(clock.wall() + 30),
                                          "Retry-After": httpdate(clock.wall() + 32)}}, OK]
    outcome, _ = run(script, clock, deadline=60)
    assert outcome.reason is Reason.OK
    assert [w.seconds for w in outcome.waits] == [2.0]
    assert (SKEW_EVIDENCE, "+30s") in outcome.history[0].evidence


# 6. A clamped wait still reports what the provider asked ----------------------------------

def test_a_clamped_retry_after_reports_the_asked_time_and_the_clamp(clock: FakeClock) -> None:
    thirty_days = 30 * 86400
    outcome, provider = run([{"status": 429, "headers": {"Retry-After": str(thirty_days)}}, OK],
                            clock, deadline=900)
    assert (outcome.reason, provider.count) == (Reason.RATE_LIMITED, 1)
    assert outcome.retry_at == clock.wall() + thirty_days
    assert "clamped" in outcome.detail
    (record,) = outcome.history
    assert (CLAMP_EVIDENCE, f"retry-after asked {thirty_days}s, read as "
                            f"{int(MAX_HINT_SECONDS)}s") in record.evidence


def test_a_clamped_transient_hint_reports_the_asked_time() -> None:
    _, decision = decide_once("generic", 503, {"Retry-After": str(30 * 86400)},
                              deadline=900.0)
    assert isinstance(decision, Stop)
    assert decision.retry_at == NOW + 30 * 86400
    assert "clamped" in decision.detail


@given(st.integers(min_value=0, max_value=2**32))
def test_the_fast_date_reading_matches_email_utils(at) -> None:
    from retrybudget.core.headers._parsers import _http_date

    value = httpdate(at)
    assert _http_date(value) == float(at)
    assert _http_date(value.replace("GMT", "+0000")) == float(at)  # the email.utils path
