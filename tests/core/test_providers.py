"""Every built-in provider profile on its documented cases, through the callable driver.

Each case is a response shaped as the provider documents it (the profile names the source
beside each rule); the outcome, the request count and the exact waits are checked on the
fake clock.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

import retrybudget as rb
from retrybudget import Backoff, Jitter, Kind, Policy, Reason, ResponseSeen, WaitReason
from retrybudget.core.classify import classify
from retrybudget.core.headers import Hint
from retrybudget.testing import ScriptedProvider, json_payload

NOW = 1_800_000_000.0
NO_JITTER = Backoff(base=0.5, cap=4.0, multiplier=2.0, jitter=Jitter.NONE)
OK = {"status": 200, "body": {"available": True}}


def run(profile, script, clock, *, method="GET", **changes):
    policy = Policy(profile=profile, backoff=NO_JITTER, validator=json_payload,
                    deadline=600).replace(**changes)
    provider = ScriptedProvider(script, clock)
    retrier = rb.Retrier(policy=policy, clock=clock, random=random.Random(0), method=method)
    return retrier.call(provider), provider


def kind_of(profile, status, headers=None, body=None):
    message = json.dumps(body) if isinstance(body, (dict, list)) else (body or "")
    return classify(rb.get_profile(profile), ResponseSeen.of(status, headers, message=message),
                    NOW)


def test_at_least_fourteen_providers_are_listed() -> None:
    names = [p.name for p in rb.PROVIDERS]
    assert len(names) >= 14
    for name in ("github", "stripe", "openai", "anthropic", "slack", "discord", "shopify", "x",
                 "aws", "google", "azure", "gitlab", "twilio", "cloudflare", "ietf", "generic"):
        assert name in names
    assert all(p.sources for p in rb.PROVIDERS), "every profile names its sources"


def test_a_providers_entry_is_all_it_takes_to_be_built_in() -> None:
    # each profile the data table holds is listed, public under its constant's name, found by
    # name, and picked by ``auto`` for each of its hosts
    from retrybudget.core import profiles
    from retrybudget.core.profiles import _builtins

    entries = {name: value for name, value in vars(_builtins).items()
               if isinstance(value, rb.Profile) and not name.startswith("_")}
    assert list(rb.PROFILES.values()) == list(entries.values())
    assert tuple(entries.values()) == rb.PROVIDERS
    for name, profile in entries.items():
        assert getattr(profiles, name) is profile
        assert name in profiles.__all__
        assert rb.get_profile(profile.name) is profile
    auto = rb.auto()
    for profile in rb.PROVIDERS:
        for host in profile.hosts:
            domain = "api" + host if host.startswith(".") else host  # ".x.com": any subdomain
            assert auto.resolve(f"https://{domain}/v1").name == profile.name, host


def test_every_header_a_built_in_profile_reads_is_evidence() -> None:
    # the integrations' quick paths and an HTTP library's exception read keep only the
    # evidence headers: a header a built-in profile reads must be one of them to reach it
    from retrybudget.core.headers import EVIDENCE_HEADERS, EVIDENCE_PREFIXES

    for profile in rb.PROVIDERS:
        for name in profile.header_names():
            assert name in EVIDENCE_HEADERS or name.startswith(EVIDENCE_PREFIXES), (profile.name,
                                                                                      name)


def test_a_built_in_profile_s_quota_families_are_read_whatever_the_profile() -> None:
    # the header reader gathers each entry's quota_families: a response carrying only one
    # family is read under the generic rules (before a profile is picked), on the fast path
    # (normalised pairs) and the general one (a mapping), its headers kept as evidence
    from retrybudget.core.headers import normalize_headers, parse_rate_limit_headers

    families = [(p.name, family) for p in rb.PROVIDERS for family in p.quota_families]
    assert {name for name, _ in families} >= {"openai", "anthropic", "x"}
    for name, family in families:
        headers = {family.limit: "100", family.remaining: "0", family.resets[0]: "30"}
        for given_as in (headers, normalize_headers(headers)):
            info = parse_rate_limit_headers(given_as, NOW)
            assert (info.limit, info.remaining) == (100, 0), (name, family.limit)
            assert (info.reset.source if info.reset else None) == family.resets[0]
            assert {n for n, _ in info.evidence} == set(headers), (name, family.limit)


# Retry hints, both ways --------------------------------------------------------------

@pytest.mark.parametrize(
    ("profile", "header", "status", "value", "kind"),
    [
        ("openai", "x-should-retry", 500, "false", Kind.REJECTED),
        ("openai", "x-should-retry", 400, "true", Kind.TRANSIENT),
        ("anthropic", "x-should-retry", 529, "false", Kind.REJECTED),
        ("anthropic", "x-should-retry", 409, "true", Kind.TRANSIENT),
        ("stripe", "Stripe-Should-Retry", 429, "false", Kind.REJECTED),
        ("stripe", "Stripe-Should-Retry", 503, "false", Kind.REJECTED),
        ("stripe", "Stripe-Should-Retry", 400, "true", Kind.TRANSIENT),
        ("stripe", "Stripe-Should-Retry", 503, "true", Kind.TRANSIENT),
    ],
)
def test_retry_hint_headers_are_honoured_both_ways(profile, header, status, value, kind) -> None:
    assert kind_of(profile, status, {header: value}).kind is kind


def test_a_hint_header_is_ignored_by_a_profile_that_does_not_document_it() -> None:
    assert kind_of("generic", 503, {"x-should-retry": "false"}).kind is Kind.TRANSIENT


def test_openai_500_with_should_retry_false_is_one_attempt(clock) -> None:
    outcome, provider = run("openai", [{"status": 500, "headers": {"x-should-retry": "false"}},
                                       OK], clock)
    assert (outcome.reason, provider.count) == (Reason.REJECTED, 1)


def test_stripe_400_with_should_retry_true_is_retried(clock) -> None:
    outcome, provider = run("stripe", [{"status": 400, "headers": {"Stripe-Should-Retry": "true"}},
                                       OK], clock)
    assert (outcome.reason, provider.count) == (Reason.OK, 2)
    assert [w.seconds for w in outcome.waits] == [0.5]


# Delay headers in each provider's unit ----------------------------------------------------

@pytest.mark.parametrize(
    ("profile", "headers", "wait", "source"),
    [
        ("openai", {"retry-after-ms": "1500", "retry-after": "9"}, 1.5, "retry-after-ms"),
        ("azure", {"x-ms-retry-after-ms": "2500"}, 2.5, "x-ms-retry-after-ms"),
        ("azure", {"retry-after-ms": "700", "retry-after": "9"}, 0.7, "retry-after-ms"),
        ("aws", {"x-amz-retry-after": "1200"}, 1.2, "x-amz-retry-after"),
        ("discord", {"x-ratelimit-reset-after": "1.25"}, 1.25, "x-ratelimit-reset-after"),
        ("shopify", {"Retry-After": "2.0"}, 2.0, "retry-after"),
        ("slack", {"Retry-After": "3"}, 3.0, "retry-after"),
        ("cloudflare", {"Retry-After": "4", "Ratelimit": '"default";r=0;t=30'}, 4.0,
         "retry-after"),
        ("ietf", {"Retry-After": "5", "RateLimit": '"default";r=0;t=50'}, 5.0, "retry-after"),
    ],
)
def test_each_provider_delay_header_is_read_in_its_unit(clock, profile, headers, wait,
                                                        source) -> None:
    outcome, _ = run(profile, [{"status": 429, "headers": headers}, OK], clock)
    assert outcome.reason is Reason.OK
    assert [(w.seconds, w.reason, w.source) for w in outcome.waits] == [
        (wait, WaitReason.RETRY_AFTER, source)]


def test_aws_does_not_read_the_generic_retry_after_ms(clock) -> None:
    info = kind_of("aws", 429, {"retry-after-ms": "9000"}).rate
    assert info.retry_after is None


def test_openai_waits_no_longer_than_its_sdk(clock) -> None:
    outcome, provider = run("openai", [{"status": 429, "headers": {"retry-after": "121"}}, OK],
                            clock)
    assert (outcome.reason, provider.count) == (Reason.RATE_LIMITED, 1)
    assert outcome.retry_at == pytest.approx(clock.wall() + 121)


# Body signals ---------------------------------------------------------------------------

def test_github_graphql_rate_limited_in_a_200_is_a_rate_limit() -> None:
    body = {"data": None, "errors": [{"type": "RATE_LIMITED", "message": "API rate limit"}]}
    seen = kind_of("github", 200, {"x-ratelimit-remaining": "0",
                                    "x-ratelimit-reset": str(int(NOW) + 40)}, body)
    assert (seen.kind, seen.scope) == (Kind.RATE_LIMITED, "primary")
    assert rb.get_profile("github").reads_body(200, "POST")
    assert not rb.get_profile("github").reads_body(200, "GET")


def test_github_graphql_200_without_errors_is_ok() -> None:
    assert kind_of("github", 200, {}, {"data": {"viewer": {"login": "o"}}}).kind is Kind.OK


def test_github_secondary_limit_with_retry_after_waits_it(clock) -> None:
    body = {"message": "You have exceeded a secondary rate limit"}
    outcome, _ = run("github", [{"status": 403, "headers": {"retry-after": "75"},
                                 "body": body}, OK], clock)
    assert [(w.seconds, w.reason) for w in outcome.waits] == [(75.0, WaitReason.RETRY_AFTER)]


def test_github_facts_as_data() -> None:
    github = rb.get_profile("github")
    assert github.write_pacing == 1.0
    assert github.bucket_headers == ("x-ratelimit-resource",)
    seen = kind_of("github", 403, {"x-ratelimit-remaining": "0", "x-ratelimit-resource": "search",
                                    "x-ratelimit-reset": str(int(NOW) + 5)})
    assert seen.rate.resource == "search"


def test_shopify_graphql_throttled_is_a_rate_limit() -> None:
    body = {"errors": [{"message": "Throttled", "extensions": {"code": "THROTTLED"}}],
            "extensions": {"cost": {"requestedQueryCost": 101}}}
    assert kind_of("shopify", 200, {}, body).kind is Kind.RATE_LIMITED


def test_shopify_call_limit_is_read_for_pacing() -> None:
    info = kind_of("shopify", 200, {"X-Shopify-Shop-Api-Call-Limit": "32/40"}).rate
    assert (info.used, info.limit, info.remaining) == (32, 40, 8)


def test_discord_body_retry_after_names_the_wait(clock) -> None:
    body = {"message": "You are being rate limited.", "retry_after": 0.75, "global": False}
    outcome, _ = run("discord", [{"status": 429, "body": body}, OK], clock)
    assert [(w.seconds, w.source) for w in outcome.waits] == [(0.75, "body:retry_after")]


@pytest.mark.parametrize("status", [401, 403])
def test_discord_never_retries_401_or_403(status) -> None:
    assert kind_of("discord", status, {"x-ratelimit-remaining": "0"}).kind in (
        Kind.REJECTED, Kind.RATE_LIMITED)
    assert kind_of("discord", status).kind is Kind.REJECTED


def test_discord_bucket_is_the_coordination_bucket() -> None:
    seen = kind_of("discord", 429, {"X-RateLimit-Bucket": "abcd1234", "Retry-After": "1"})
    assert seen.rate.resource == "abcd1234"


@pytest.mark.parametrize(
    ("code", "kind"),
    [("ThrottlingException", Kind.RATE_LIMITED), ("SlowDown", Kind.RATE_LIMITED),
     ("ProvisionedThroughputExceededException", Kind.RATE_LIMITED),
     ("RequestTimeout", Kind.TRANSIENT), ("ValidationException", Kind.REJECTED)],
)
def test_aws_error_codes_in_the_body(code, kind) -> None:
    body = {"__type": f"com.amazonaws#{code}", "message": "..."}
    assert kind_of("aws", 400, {}, body).kind is kind


def test_aws_xml_error_codes_are_read_too() -> None:
    body = "<Error><Code>SlowDown</Code><Message>Please reduce</Message></Error>"
    assert kind_of("aws", 503, {}, body).kind is Kind.RATE_LIMITED


@pytest.mark.parametrize("reason", ["rateLimitExceeded", "userRateLimitExceeded"])
def test_google_403_rate_limit_reasons(reason) -> None:
    body = {"error": {"code": 403, "errors": [{"domain": "usageLimits", "reason": reason}]}}
    assert kind_of("google", 403, {}, body).kind is Kind.RATE_LIMITED


def test_google_403_permission_stays_a_rejection() -> None:
    body = {"error": {"code": 403, "errors": [{"reason": "insufficientPermissions"}]}}
    assert kind_of("google", 403, {}, body).kind is Kind.REJECTED


def test_google_retry_info_names_the_wait(clock) -> None:
    body = {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"}]}}
    outcome, _ = run("google", [{"status": 429, "body": body}, OK], clock)
    assert [(w.seconds, w.source) for w in outcome.waits] == [(3.0, "body:retryDelay")]


def test_openai_insufficient_quota_is_a_rejection(clock) -> None:
    body = {"error": {"type": "insufficient_quota", "code": "insufficient_quota"}}
    outcome, provider = run("openai", [{"status": 429, "body": body}, OK], clock)
    assert (outcome.reason, provider.count) == (Reason.REJECTED, 1)


def test_anthropic_529_overloaded_is_transient(clock) -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    outcome, provider = run("anthropic", [{"status": 529, "body": body}, OK], clock)
    assert (outcome.reason, provider.count) == (Reason.OK, 2)


def test_stripe_409_and_lock_timeout_are_retried(clock) -> None:
    lock = {"error": {"code": "lock_timeout", "type": "invalid_request_error"}}
    assert kind_of("stripe", 429, {}, lock).kind is Kind.TRANSIENT
    assert kind_of("stripe", 409).kind is Kind.TRANSIENT
    assert kind_of("stripe", 429).kind is Kind.RATE_LIMITED
    outcome, provider = run("stripe", [{"status": 409}, OK], clock)
    assert (outcome.reason, provider.count) == (Reason.OK, 2)


def test_twilio_20429_is_a_rate_limit() -> None:
    body = {"code": 20429, "message": "Too Many Requests", "status": 429}
    assert kind_of("twilio", 429, {}, body).kind is Kind.RATE_LIMITED


def test_slack_ratelimited_body() -> None:
    assert kind_of("slack", 429, {}, {"ok": False, "error": "ratelimited"}).kind is \
        Kind.RATE_LIMITED


def test_a_body_that_is_not_json_is_not_an_error() -> None:
    for profile in rb.PROVIDERS:
        seen = kind_of(profile, 503, {}, "<html>\x00\xff not json {{{")
        assert seen.kind in (Kind.TRANSIENT, Kind.UNEXPECTED), profile.name


def test_bodies_are_read_only_up_to_the_profile_limit() -> None:
    limited = rb.get_profile("aws").derive("aws-small", body_limit=16)
    body = " " * 32 + "ThrottlingException"
    seen = classify(limited, ResponseSeen.of(400, message=body), NOW)
    assert seen.kind is Kind.REJECTED
    assert 503 in rb.get_profile("aws").body_statuses()


# Choosing a profile -------------------------------------------------------------------

@pytest.mark.parametrize(
    ("url", "name"),
    [("https://api.github.com/repos/o/r", "github"), ("https://api.stripe.com/v1/charges",
                                                       "stripe"),
     ("https://shop.myshopify.com/admin/api", "shopify"),
     ("https://dynamodb.us-east-1.amazonaws.com/", "aws"),
     ("https://www.googleapis.com/drive/v3/files", "google"),
     ("https://internal.example/x", "generic"), ("http://127.0.0.1:8080/x", "generic")],
)
def test_auto_picks_the_profile_by_host(url, name) -> None:
    assert rb.get_profile("auto").resolve(url).name == name


def test_an_explicit_host_mapping_wins() -> None:
    mine = rb.get_profile("generic").derive("internal", transient={500, 503})
    chosen = rb.auto({"api.github.com": "generic", ".corp.example": mine}, fallback="ietf")
    assert chosen.resolve("https://api.github.com/x").name == "generic"
    assert chosen.resolve("https://a.b.corp.example/x").name == "internal"
    assert chosen.resolve("https://elsewhere.example/x").name == "ietf"


def test_auto_without_a_url_classifies_by_generic(clock) -> None:
    body = {"message": "You have exceeded a secondary rate limit"}
    provider = ScriptedProvider([{"status": 403, "body": body}, OK], clock)
    retrier = rb.Retrier(policy=rb.background(backoff=NO_JITTER), clock=clock,
                         random=random.Random(0))
    outcome = retrier.call(provider)  # a plain callable names no host: generic rules
    assert (outcome.reason, outcome.attempts) == (Reason.REJECTED, 1)
    assert outcome.policy is not None
    assert outcome.policy.profile.name == "generic"


_FRAGMENTS = st.sampled_from([
    '"retry_after": ', '"retryDelay": "', 's"', '"type": "RATE_LIMITED"', '"code": "THROTTLED"',
    "ThrottlingException", '"code": 20429', '"reason": "rateLimitExceeded"', "insufficient_quota",
    '"code": "lock_timeout"', "1e309", "-5", "99999999999", "0.5", "{", "}", ",", "\x00", "é",
])


@given(
    profile=st.sampled_from(rb.PROVIDERS),
    status=st.integers(100, 599),
    body=st.lists(_FRAGMENTS, max_size=12).map("".join),
    headers=st.dictionaries(
        st.sampled_from(["retry-after", "retry-after-ms", "x-ms-retry-after-ms",
                         "x-amz-retry-after", "x-should-retry", "stripe-should-retry", "date",
                         "x-ratelimit-reset", "x-ratelimit-remaining", "x-ratelimit-bucket",
                         "x-rate-limit-reset", "ratelimit-reset"]),
        st.sampled_from(["0", "1", "true", "false", "-1", "nan", "1e12", "99999999999",
                         "Tue, 15 Jan 2027 08:00:00 GMT", "6m0s", "2027-01-15T08:00:00Z", ""]),
        max_size=5),
)
def test_body_signals_and_hints_are_total(profile, status, body, headers) -> None:
    seen = classify(profile, ResponseSeen.of(status, headers, message=body), NOW)
    assert isinstance(seen.kind, Kind)
    if seen.hint is not None:
        assert 0 <= seen.hint.delay <= 7 * 24 * 3600


# What a body, a cost or a hint header says, read exactly ----------------------------------------

WEEK = 7 * 24 * 3600


def body_hint(signal: rb.BodySignal, body: str, status: int = 429):
    """The retry-after a 429's body names under a profile with this one delay signal."""
    profile = rb.get_profile("generic").derive("body-delay", body_signals=(signal,))
    return classify(profile, ResponseSeen.of(status, message=body), NOW).rate.retry_after


def test_a_body_delay_is_read_in_its_unit_with_its_field_and_raw_text() -> None:
    ms = rb.BodySignal(r'"wait_ms"', "delay", delay=r'"wait_ms"\s*:\s*([0-9]+)', unit="ms")
    assert body_hint(ms, '{"wait_ms": 1500}') == Hint(1.5, "body:wait_ms", "1500")
    unnamed = rb.BodySignal(r"retry in", "delay", delay=r"retry in ([0-9]+)")
    assert body_hint(unnamed, "retry in 7 seconds") == Hint(7.0, "body:delay", "7")
    long = "0" * 250 + "5"
    assert body_hint(unnamed, f"retry in {long}") == Hint(5.0, "body:delay", long[:200])


def test_a_body_delay_of_zero_up_to_a_week_is_taken_and_nothing_past_it() -> None:
    signal = rb.BodySignal(r"retry in", "delay", delay=r"retry in ([0-9]+)")
    assert body_hint(signal, "retry in 0") == Hint(0.0, "body:delay", "0")
    assert body_hint(signal, f"retry in {WEEK}") == Hint(float(WEEK), "body:delay", str(WEEK))
    assert body_hint(signal, f"retry in {WEEK + 1}") is None


def test_a_body_delay_that_is_no_number_or_no_duration_is_not_read() -> None:
    seconds = rb.BodySignal(r'"wait"', "delay", delay=r'"wait"\s*:\s*"([^"]*)"')
    assert body_hint(seconds, '{"wait": "soon"}') is None
    duration = rb.BodySignal(r'"wait"', "delay", delay=r'"wait"\s*:\s*"([^"]*)"',
                             unit="duration")
    assert body_hint(duration, '{"wait": "soon"}') is None


def shopify_cost(status: int = 200, *, requested=None, maximum=None, available=None, rate=None,
                 throttled=True) -> rb.Classified:
    status_fields = {k: v for k, v in (("maximumAvailable", maximum),
                                       ("currentlyAvailable", available),
                                       ("restoreRate", rate)) if v is not None}
    cost: dict[str, object] = {"throttleStatus": status_fields}
    if requested is not None:
        cost["requestedQueryCost"] = requested
    body: dict[str, object] = {"extensions": {"cost": cost}}
    if throttled:
        body["errors"] = [{"message": "Throttled", "extensions": {"code": "THROTTLED"}}]
    return classify(rb.get_profile("shopify"),
                    ResponseSeen.of(status, message=json.dumps(body), method="POST"), NOW)


def test_the_cost_reset_and_retry_after_name_their_fields_and_arithmetic() -> None:
    c = shopify_cost(requested=101, maximum=1000, available=50, rate=50)
    assert (c.rate.remaining, c.rate.limit) == (50, 1000)
    assert c.rate.reset == Hint(19.0, "body:throttleStatus", "950/50")  # (1000 - 50) / 50
    assert c.rate.retry_after == Hint(1.02, "body:requestedQueryCost", "51/50")
    # a query that costs less than what is left waits nothing
    cheap = shopify_cost(requested=10, maximum=1000, available=50, rate=50)
    assert cheap.rate.retry_after == Hint(0.0, "body:requestedQueryCost", "0/50")
    # a restore rate under one point a second still restores
    slow = shopify_cost(requested=51, maximum=1000, available=50, rate=0.5)
    assert slow.rate.reset == Hint(1900.0, "body:throttleStatus", "950/0.5")
    assert slow.rate.retry_after == Hint(2.0, "body:requestedQueryCost", "1/0.5")


def test_the_cost_times_are_taken_up_to_a_week_and_nothing_past_it() -> None:
    week = shopify_cost(requested=WEEK + 50, maximum=WEEK + 50, available=50, rate=1)
    assert week.rate.reset == Hint(float(WEEK), "body:throttleStatus", f"{WEEK:g}/1")
    assert week.rate.retry_after == Hint(float(WEEK), "body:requestedQueryCost", f"{WEEK:g}/1")
    past = shopify_cost(requested=1000, maximum=1000, available=50, rate=0.001)
    assert (past.rate.reset, past.rate.retry_after) == (None, None)  # 950 000 s
    near = shopify_cost(requested=1000, maximum=1000, available=999, rate=0.002)
    assert near.rate.reset == Hint(500.0, "body:throttleStatus", "1/0.002")
    assert near.rate.retry_after == Hint(500.0, "body:requestedQueryCost", "1/0.002")


def test_a_cost_without_its_maximum_names_only_what_is_left() -> None:
    c = shopify_cost(requested=101, available=50, rate=50)
    assert (c.rate.remaining, c.rate.limit, c.rate.reset) == (50, None, None)


def test_discord_names_the_global_limit_by_its_global_header_alone() -> None:
    discord = rb.get_profile("discord")
    by_flag = classify(discord, ResponseSeen.of(429, {"Retry-After": "2",
                                                      "X-RateLimit-Global": "true"}), NOW)
    assert (by_flag.kind, by_flag.scope) == (Kind.RATE_LIMITED, "global")
    unnamed = classify(discord, ResponseSeen.of(429, {"Retry-After": "2"}), NOW)
    assert (unnamed.kind, unnamed.scope) == (Kind.RATE_LIMITED, "secondary")


def test_the_first_retry_hint_header_present_decides() -> None:
    profile = rb.get_profile("generic").derive("two-hints",
                                                retry_hint_headers=("x-first", "x-second"))

    def kind(status: int, headers: dict[str, str]) -> Kind:
        return classify(profile, ResponseSeen.of(status, headers), NOW).kind

    assert kind(503, {"x-second": "false"}) is Kind.REJECTED  # the first is absent
    assert kind(503, {"x-first": "true", "x-second": "false"}) is Kind.TRANSIENT
    assert kind(404, {"x-first": "false", "x-second": "true"}) is Kind.NOT_FOUND


def _read(profile, status, headers=None, message="", **changes):
    profile = rb.get_profile(profile) if isinstance(profile, str) else profile
    return classify(profile, ResponseSeen.of(status, headers, message=message, **changes), NOW)


COST_BODY = json.dumps({"extensions": {"cost": {"requestedQueryCost": 10, "throttleStatus": {
    "maximumAvailable": 1000.0, "currentlyAvailable": 990, "restoreRate": 50.0}}}})


@pytest.mark.parametrize(("profile", "status", "headers", "message", "changes", "kind"), [
    ("generic", 600, {}, "", {}, Kind.INVALID_PAYLOAD),
    ("openai", 429, {}, '{"error": {"code": "insufficient_quota"}}', {}, Kind.REJECTED),
    ("stripe", 429, {}, '{"error": {"code": "lock_timeout"}}', {}, Kind.TRANSIENT),
    ("generic", 404, {}, "", {}, Kind.NOT_FOUND),
    ("generic", 400, {}, "", {}, Kind.REJECTED),
    ("generic", 503, {}, "", {}, Kind.TRANSIENT),
    ("generic", 200, {"x-ratelimit-remaining": "5"}, "", {"payload_error": "not json"},
     Kind.INVALID_PAYLOAD),
    ("shopify", 200, {}, COST_BODY, {}, Kind.OK),
    (rb.get_profile("generic").with_ok([304]), 304, {}, "", {}, Kind.OK),
    ("generic", 418, {}, "", {}, Kind.UNEXPECTED),
    ("openai", 500, {}, "", {}, Kind.TRANSIENT),
    ("discord", 503, {"X-RateLimit-Scope": "user"}, "", {}, Kind.TRANSIENT),
], ids=["not-http", "quota", "body-transient", "not-found", "rejected", "transient",
        "invalid-payload", "2xx-read", "ok-status", "unexpected", "hint-headers", "scope-header"])
def test_what_is_no_rate_limit_names_no_scope_and_says_why(profile, status, headers, message,
                                                            changes, kind) -> None:
    c = _read(profile, status, headers, message, **changes)
    assert (c.kind, c.scope, c.status) == (kind, "", status)
    assert isinstance(c.detail, str)
    assert c.detail != ""


@pytest.mark.parametrize(("kind", "error"), [("error", "ValueError"), ("protocol", "bad frame"),
                                              ("timeout", "ReadTimeout")])
def test_a_failure_says_why(kind, error) -> None:
    c = classify(rb.get_profile("generic"), rb.FailureSeen(rb.FailureKind(kind), error), NOW)
    assert isinstance(c.detail, str)
    assert error in c.detail


def test_a_2xx_with_rate_limit_headers_keeps_its_status_and_detail() -> None:
    c = _read("generic", 200, {"x-ratelimit-remaining": "5"})
    assert (c.kind, c.status, c.detail, c.rate.remaining) == (Kind.OK, 200, "ok", 5)


def test_a_body_rate_limit_with_quota_left_is_secondary() -> None:
    c = _read("slack", 429, {}, '{"ok": false, "error": "ratelimited"}')
    assert (c.kind, c.scope) == (Kind.RATE_LIMITED, "secondary")


def test_a_quota_phrase_in_a_2xx_body_is_no_rejection() -> None:
    assert _read("openai", 200, {}, '{"note": "insufficient_quota"}').kind is Kind.OK


def test_a_retry_hint_applies_to_a_300_but_not_a_2xx() -> None:
    assert _read("openai", 300, {"x-should-retry": "true"}).kind is Kind.TRANSIENT
    assert _read("openai", 200, {"x-should-retry": "false"}).kind is Kind.OK


def test_auto_without_a_url_classifies_by_the_generic_table() -> None:
    # the union of every provider's statuses would call a 500 transient; generic does not
    assert classify(rb.auto(), ResponseSeen.of(500), NOW).kind is Kind.UNEXPECTED


def test_a_conflict_names_the_disagreeing_headers() -> None:
    c = _read("generic", 429, {"Retry-After": "10", "x-ratelimit-remaining": "0",
                               "x-ratelimit-reset": str(int(NOW) + 60)})
    assert [x.split(": ", 1)[0] for x in c.conflicts] == ["retry-after+x-ratelimit-reset"]


def test_a_bucket_header_is_kept_up_to_200_characters() -> None:
    bucket = "b" * 300
    c = _read("discord", 429, {"Retry-After": "1", "X-RateLimit-Bucket": bucket})
    assert c.rate.resource == bucket[:200]


def test_only_a_cost_profile_reads_a_cost_from_the_body() -> None:
    body = json.dumps({"throttleStatus": {"currentlyAvailable": 5, "maximumAvailable": 10}})
    assert _read("generic", 429, {}, body).rate.remaining is None
    assert _read("shopify", 429, {}, body).rate.remaining == 5


def test_a_remaining_count_in_the_headers_wins_over_the_cost_body() -> None:
    c = _read("shopify", 200, {"X-Shopify-Shop-Api-Call-Limit": "32/40"}, COST_BODY,
              method="POST")
    assert (c.rate.remaining, c.rate.limit) == (8, 40)
