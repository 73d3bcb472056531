"""Provider signals beyond status and delay: Slack's per-method buckets, Discord's scopes,
Shopify's GraphQL cost, GitHub's write pacing, and 2xx bodies read on the callable path.

Each rule is checked on its documented example through the callable driver (exact values
on the fake clock) and through the httpx transport against the sandbox; the write pacing
also on both coordination backends (memory, and Redis on a real server).
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import requests
from hypothesis import event, given
from hypothesis import strategies as st

import retrybudget as rb
from retrybudget import Backoff, FakeClock, Jitter, Kind, Policy, Reason, ResponseSeen, WaitReason
from retrybudget.coordination import (
    BreakerConfig,
    ConcurrencyConfig,
    CoordinationConfig,
    Coordinator,
    MemoryCoordinator,
    RedisCoordinator,
)
from retrybudget.coordination._logic import EPSILON, NEVER, write_wait
from retrybudget.core.actions import Permit
from retrybudget.core.classify import classify
from retrybudget.core.profiles import profile_from_mapping
from retrybudget.core.throttle import NO_THROTTLE, throttle_of
from retrybudget.integrations import outcome_of
from retrybudget.integrations.httpx import RetryTransport
from retrybudget.sandbox import RateLimit, SandboxConfig, SandboxServer, serve_in_thread
from retrybudget.testing import ScriptedProvider
from tests.support.coordination import Backend, unique_prefix
from tests.support.redis import RedisServer

pytest_plugins = ("tests.support.coordination",)  # the backend and redis_server fixtures

NOW = 1_800_000_000.0
NO_JITTER = Backoff(base=0.5, cap=4.0, multiplier=2.0, jitter=Jitter.NONE)
OK = {"status": 200, "body": {"ok": True}}
GRAPHQL_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "POST"})  # a GraphQL query is a read


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with serve_in_thread() as server:
        yield server


_RUNS = iter(range(10**6))


def fixture(sandbox: SandboxServer, *script: dict[str, Any], path: str = "") -> tuple[str, str]:
    """A fresh fixture's URL (with ``path`` under it) and its run id."""
    run_id = f"signals-{next(_RUNS)}"
    return sandbox.load_fixture(run_id, "f", list(script)) + path, run_id


def sent(sandbox: SandboxServer, run_id: str) -> int:
    return len(sandbox.stats(run_id)["requests"])


def seen(profile: str, status: int, headers: dict[str, str] | None = None,
         body: object = None, method: str = "GET") -> rb.Classified:
    message = json.dumps(body) if isinstance(body, (dict, list)) else (body or "")
    return classify(rb.get_profile(profile),
                    ResponseSeen.of(status, headers, message=str(message), method=method), NOW)


def call(profile: str, script: list[dict[str, Any]], clock: FakeClock, *, method: str = "GET",
         **changes: Any) -> tuple[rb.Outcome[Any], ScriptedProvider]:
    policy = Policy(profile=profile, backoff=NO_JITTER, deadline=600).replace(**changes)
    provider = ScriptedProvider(script, clock)
    retrier = rb.Retrier(policy=policy, clock=clock, random=random.Random(0), method=method)
    return retrier.call(provider, method), provider


# Slack: the Web API method is the bucket -----------------------------------------------------


def test_the_slack_bucket_is_the_web_api_method_of_the_path() -> None:
    slack = rb.get_profile("slack")
    assert slack.coordination_key("https://slack.com", "https://slack.com/api/chat.postMessage") \
        == "https://slack.com#chat.postMessage"
    assert slack.coordination_key("k", "https://slack.com/api/conversations.list?limit=5") \
        == "k#conversations.list"
    assert slack.coordination_key("k", "https://slack.com/oauth/v2/authorize") == "k"
    assert slack.coordination_key("k", None) == "k"
    assert rb.get_profile("github").coordination_key("k", "https://x/api/chat.postMessage") == "k"


def test_a_slack_profile_file_can_declare_a_path_bucket() -> None:
    made = rb.Profile("p", bucket_path=r"/v1/([a-z]+)")
    assert made.coordination_key("k", "https://h/v1/users/7") == "k#users"
    with pytest.raises(ValueError, match="group"):
        rb.Profile("p", bucket_path=r"/v1/[a-z]+")
    with pytest.raises(ValueError, match="pattern"):
        rb.Profile("p", bucket_path=r"/v1/(")


def test_a_slack_429_closes_the_gate_of_its_method_only(sandbox, clock) -> None:
    # 429 + Retry-After: 30 on chat.postMessage (https://docs.slack.dev/apis/web-api/rate-limits)
    limited = {"status": 429, "headers": {"Retry-After": "30"},
               "body": {"ok": False, "error": "ratelimited"}}
    coordinator = MemoryCoordinator(clock=clock)
    retrier = rb.Retrier(policy=Policy(profile="slack", deadline=120, max_attempts=1),
                         clock=clock, coordinator=coordinator)
    post_a, _ = fixture(sandbox, limited, path="/api/chat.postMessage")
    other, _ = fixture(sandbox, OK, path="/api/conversations.list")
    post_b, _ = fixture(sandbox, OK, path="/api/chat.postMessage")
    with httpx.Client(transport=RetryTransport(retrier=retrier)) as client:
        first = outcome_of(client.get(post_a))
        listed = outcome_of(client.get(other))
        again = outcome_of(client.get(post_b))
    assert first is not None
    assert listed is not None
    assert again is not None
    assert first.history[0].kind is Kind.RATE_LIMITED
    assert (listed.reason, listed.waits) == (Reason.OK, ())  # another method: not held
    assert again.reason is Reason.OK
    assert [(w.seconds, w.reason) for w in again.waits] == [(30.0, WaitReason.GATE)]


# Discord: global and shared scopes; fractional reset-after; 401/403 ---------------------------


def test_discord_names_the_global_limit_by_header_or_body() -> None:
    # https://discord.com/developers/docs/topics/rate-limits#exceeding-a-rate-limit
    by_header = seen("discord", 429, {"Retry-After": "65", "X-RateLimit-Global": "true",
                                      "X-RateLimit-Scope": "global"},
                     {"message": "You are being rate limited.", "retry_after": 64.57,
                      "global": True})
    assert (by_header.kind, by_header.scope) == (Kind.RATE_LIMITED, "global")
    by_body = seen("discord", 429, {}, {"message": "x", "retry_after": 1.5, "global": True})
    assert (by_body.kind, by_body.scope) == (Kind.RATE_LIMITED, "global")
    assert by_body.hint is not None
    assert by_body.hint.delay == 1.5
    user = seen("discord", 429, {"X-RateLimit-Scope": "user", "Retry-After": "2"},
                {"message": "x", "retry_after": 1.9, "global": False})
    assert user.scope == "user"
    assert throttle_of(rb.get_profile("discord"), by_header).throttled


def test_a_discord_shared_scope_429_leaves_the_keys_gate_open() -> None:
    shared = seen("discord", 429, {"X-RateLimit-Scope": "shared",
                                   "X-RateLimit-Reset-After": "1.234"},
                  {"message": "x", "retry_after": 1.234, "global": False})
    assert (shared.kind, shared.scope) == (Kind.RATE_LIMITED, "shared")
    assert throttle_of(rb.get_profile("discord"), shared) is NO_THROTTLE


def test_discord_waits_a_fractional_reset_after_exactly(clock) -> None:
    script = [{"status": 429, "headers": {"X-RateLimit-Reset-After": "1.234",
                                          "X-RateLimit-Remaining": "0"}}, OK]
    outcome, provider = call("discord", script, clock)
    assert outcome.reason is Reason.OK
    assert [(w.seconds, w.source) for w in outcome.waits] == [(1.234, "x-ratelimit-reset-after")]
    assert provider.count == 2


@pytest.mark.parametrize("status", [401, 403])
def test_discord_never_retries_401_or_403(clock, status) -> None:
    outcome, provider = call("discord", [{"status": status}, OK], clock)
    assert (outcome.reason, provider.count) == (Reason.REJECTED, 1)


def test_the_discord_bucket_is_the_route_with_its_major_parameters() -> None:
    # Routes are method + path; channel_id, guild_id and webhook_id are major parameters,
    # other ids are not: https://discord.com/developers/docs/topics/rate-limits
    discord = rb.get_profile("discord")
    base = "https://discord.com/api/v10"
    assert discord.coordination_key("k", f"{base}/channels/1/messages/7?limit=5", "post") \
        == "k#POST /api/v10/channels/1/messages/{id}"
    assert discord.coordination_key("k", f"{base}/channels/1/messages/8", "POST") \
        == "k#POST /api/v10/channels/1/messages/{id}"  # another message: the same bucket
    assert discord.coordination_key("k", f"{base}/guilds/9/members/55/roles/3", "PUT") \
        == "k#PUT /api/v10/guilds/9/members/{id}/roles/{id}"
    token = "aB3" * 22  # a webhook token never reaches a coordination key
    assert discord.coordination_key("k", f"{base}/webhooks/77/{token}", "POST") \
        == "k#POST /api/v10/webhooks/77/{id}"
    assert discord.coordination_key("k", f"{base}/users/@me", None) == "k#/api/v10/users/@me"
    assert discord.coordination_key("k", None, "GET") == "k"
    made = rb.Profile("p", route_majors=("Projects",))
    assert made.route_majors == ("projects",)
    assert made.coordination_key("k", "https://h/projects/4/items/5", "GET") \
        == "k#GET /projects/4/items/{id}"
    with pytest.raises(ValueError, match="choose one"):
        rb.Profile("p", route_majors=("projects",), bucket_path=r"/v1/([a-z]+)")
    loaded = profile_from_mapping({"name": "p", "route_majors": ["projects"]})
    assert loaded.route_majors == ("projects",)


DISCORD_SCOPES = [  # (scope headers, waits of another route, waits of the same route after)
    ({"X-RateLimit-Scope": "user"}, [], [(5.0, WaitReason.GATE)]),
    ({"X-RateLimit-Scope": "shared"}, [], []),
    # the global limit holds every route; the route waited it out with the others
    ({"X-RateLimit-Scope": "global", "X-RateLimit-Global": "true"}, [(5.0, WaitReason.GATE)], []),
]
ROUTE_PATHS = ("/api/v10/channels/1/messages/7", "/api/v10/channels/2/messages/7",
               "/api/v10/channels/1/messages/8")


def _limited(headers: dict[str, str]) -> dict[str, Any]:
    scope = headers["X-RateLimit-Scope"]
    return {"status": 429, "headers": {"Retry-After": "5", **headers},
            "body": {"message": "You are being rate limited.", "retry_after": 5.0,
                     "global": scope == "global"}}


@pytest.mark.parametrize(("headers", "other", "same"), DISCORD_SCOPES,
                         ids=["user", "shared", "global"])
def test_a_discord_429_holds_its_route_and_a_global_one_every_route(
        clock, headers, other, same) -> None:
    limited = _limited(headers)
    answers = iter([limited, OK, OK])

    def perform(attempt: rb.Attempt) -> rb.AttemptResult:
        step = next(answers)
        message = json.dumps(step.get("body", {}))
        return rb.AttemptResult(ResponseSeen.of(step["status"], step.get("headers"),
                                                message=message, method="GET"))

    retrier = rb.Retrier(policy=Policy(profile="discord", deadline=60, max_attempts=1),
                         clock=clock, coordinator=MemoryCoordinator(clock=clock))
    first, after, again = (
        retrier.run(perform, rb.RequestInfo(method="GET", key="discord",
                                            url=f"https://discord.com{path}"))
        for path in ROUTE_PATHS)
    assert (first.reason, first.history[0].kind) == (Reason.RATE_LIMITED, Kind.RATE_LIMITED)
    assert [(w.seconds, w.reason) for w in after.waits] == other
    assert [(w.seconds, w.reason) for w in again.waits] == same
    assert (after.reason, again.reason) == (Reason.OK, Reason.OK)


@pytest.mark.parametrize(("headers", "other", "same"), DISCORD_SCOPES,
                         ids=["user", "shared", "global"])
def test_through_httpx_a_discord_429_holds_its_route_and_a_global_one_every_route(
        sandbox, clock, headers, other, same) -> None:
    retrier = rb.Retrier(policy=Policy(profile="discord", deadline=60, max_attempts=1),
                         clock=clock, coordinator=MemoryCoordinator(clock=clock))
    base, run_id = fixture(sandbox, _limited(headers), OK, OK)
    with httpx.Client(transport=RetryTransport(retrier=retrier)) as client:
        first, after, again = (outcome_of(client.get(base + path)) for path in ROUTE_PATHS)
    assert first is not None
    assert after is not None
    assert again is not None
    assert first.history[0].kind is Kind.RATE_LIMITED
    assert [(w.seconds, w.reason) for w in after.waits] == other
    assert [(w.seconds, w.reason) for w in again.waits] == same
    assert sent(sandbox, run_id) == 3  # no request was spent on a held route


@pytest.mark.parametrize(("scope", "held"), [("global", True), ("user", False)])
def test_through_redis_a_discord_global_429_holds_every_route(
        redis_server: RedisServer, sandbox, scope, held) -> None:
    # Retry-After 30 s does not fit the 5 s deadline: a held route stops before any attempt.
    limited = {"status": 429, "headers": {"Retry-After": "30", "X-RateLimit-Scope": scope},
               "body": {"message": "You are being rate limited.", "retry_after": 30.0,
                        "global": scope == "global"}}
    coordinator = RedisCoordinator(redis_server.url, prefix=unique_prefix())
    try:
        retrier = rb.Retrier(policy=Policy(profile="discord", deadline=5, max_attempts=1),
                             coordinator=coordinator)
        base, run_id = fixture(sandbox, limited, OK)
        with httpx.Client(transport=RetryTransport(retrier=retrier)) as client:
            first = outcome_of(client.get(base + ROUTE_PATHS[0]))
            if held:  # no attempt, so no response: the transport raises with the outcome
                with pytest.raises(rb.RateLimited) as caught:
                    client.get(base + ROUTE_PATHS[1])
                other: rb.Outcome[Any] | None = caught.value.outcome
            else:
                other = outcome_of(client.get(base + ROUTE_PATHS[1]))
        assert first is not None
        assert other is not None
        assert first.history[0].kind is Kind.RATE_LIMITED
        if held:
            assert (other.reason, other.attempts, sent(sandbox, run_id)) == (
                Reason.RATE_LIMITED, 0, 1)
            assert other.waits == ()
        else:
            assert (other.reason, other.attempts, sent(sandbox, run_id)) == (Reason.OK, 1, 2)
    finally:
        coordinator.close()


# Shopify: GraphQL THROTTLED and extensions.cost ---------------------------------------------

# The documented throttled answer (https://shopify.dev/docs/apps/build/apis/graphql-admin/rate-limits)
THROTTLED = {
    "errors": [{"message": "Throttled", "extensions": {
        "code": "THROTTLED", "documentation": "https://shopify.dev/api/usage/rate-limits"}}],
    "extensions": {"cost": {"requestedQueryCost": 202, "actualQueryCost": None,
                            "throttleStatus": {"maximumAvailable": 2000.0,
                                               "currentlyAvailable": 2, "restoreRate": 100.0}}},
}
COSTED = {"data": {"shop": {"name": "s"}}, "extensions": {"cost": {
    "requestedQueryCost": 10, "actualQueryCost": 3,
    "throttleStatus": {"maximumAvailable": 1000.0, "currentlyAvailable": 990,
                       "restoreRate": 50.0}}}}


def test_a_throttled_query_waits_until_its_cost_is_restored() -> None:
    c = seen("shopify", 200, {}, THROTTLED, "POST")
    assert c.kind is Kind.RATE_LIMITED
    assert c.hint is not None
    assert (c.hint.delay, c.hint.source) == (2.0, "body:requestedQueryCost")  # (202 - 2) / 100
    assert (c.rate.remaining, c.rate.limit) == (2, 2000)
    assert c.rate.reset is not None
    assert c.rate.reset.delay == (2000 - 2) / 100


def test_the_cost_of_a_successful_query_paces_the_next() -> None:
    c = seen("shopify", 200, {}, COSTED, "POST")
    assert c.kind is Kind.OK
    assert (c.rate.remaining, c.rate.limit) == (990, 1000)
    throttle = throttle_of(rb.get_profile("shopify"), c)
    assert (throttle.throttled, throttle.remaining, throttle.limit, throttle.reset) == \
        (False, 990, 1000, 0.2)  # (1000 - 990) / 50 s to restore every point


def test_a_cost_body_that_is_cut_short_or_not_json_is_no_error() -> None:
    text = json.dumps(THROTTLED)
    cut = seen("shopify", 200, {}, text[: text.index('"restoreRate"')], "POST")
    assert cut.kind is Kind.RATE_LIMITED
    assert cut.hint is None
    assert cut.rate.remaining == 2
    assert seen("shopify", 200, {}, "<html>busy</html>", "POST").kind is Kind.OK
    zero = json.dumps(THROTTLED).replace('"restoreRate": 100.0', '"restoreRate": 0')
    assert seen("shopify", 200, {}, zero, "POST").hint is None


def test_the_rest_call_limit_header_is_used_of_size() -> None:
    c = seen("shopify", 200, {"X-Shopify-Shop-Api-Call-Limit": "32/40"})
    assert (c.rate.used, c.rate.limit, c.rate.remaining) == (32, 40, 8)


def test_a_throttled_query_through_the_callable_driver_waits_exactly(clock) -> None:
    script = [{"status": 200, "body": THROTTLED}, {"status": 200, "body": COSTED}]
    outcome, provider = call("shopify", script, clock, method="POST",
                             idempotent_methods=GRAPHQL_METHODS)
    assert outcome.reason is Reason.OK
    assert [(w.seconds, w.reason, w.source) for w in outcome.waits] == \
        [(2.0, WaitReason.RETRY_AFTER, "body:requestedQueryCost")]
    assert provider.count == 2


def test_a_throttled_query_through_httpx_waits_exactly(sandbox, clock) -> None:
    url, run_id = fixture(sandbox, {"status": 200, "body": THROTTLED},
                          {"status": 200, "body": COSTED}, path="/admin/api/graphql.json")
    policy = Policy(profile="shopify", deadline=60, idempotent_methods=GRAPHQL_METHODS)
    retrier = rb.Retrier(policy=policy, clock=clock)
    with httpx.Client(transport=RetryTransport(retrier=retrier)) as client:
        response = client.post(url, json={"query": "{ shop { name } }"})
    outcome = outcome_of(response)
    assert outcome is not None
    assert outcome.reason is Reason.OK
    assert [(w.seconds, w.source) for w in outcome.waits] == [(2.0, "body:requestedQueryCost")]
    assert sent(sandbox, run_id) == 2
    assert response.json() == COSTED


# The callable path reads a 2xx body when the profile asks, only when already read -----------

RATE_LIMITED = {"data": None, "errors": [{"type": "RATE_LIMITED", "message": "API rate limit"}]}


def test_a_graphql_rate_limit_in_a_200_is_seen_by_the_callable_driver(clock) -> None:
    outcome, provider = call("github", [{"status": 200, "body": RATE_LIMITED}, OK], clock,
                             method="POST")
    assert outcome.reason is Reason.RATE_LIMITED  # a POST is not replayed; no success either
    assert outcome.history[0].kind is Kind.RATE_LIMITED
    assert provider.count == 1


def test_a_get_named_by_the_retrier_has_its_200_body_left_unread(clock) -> None:
    # The response names no request: the retrier's method says it was a GET, and GitHub's
    # GraphQL signal is read in POST bodies only.
    outcome, provider = call("github", [{"status": 200, "body": RATE_LIMITED}], clock)
    assert (outcome.reason, provider.count) == (Reason.OK, 1)


def test_a_read_httpx_response_is_classified_by_its_body(sandbox, clock) -> None:
    url, run_id = fixture(sandbox, {"status": 200, "body": RATE_LIMITED})
    retrier = rb.Retrier(policy=Policy(profile="github", deadline=60), clock=clock)
    outcome = retrier.call(httpx.post, url, json={"query": "{ viewer { login } }"})
    assert (outcome.reason, outcome.method, sent(sandbox, run_id)) == \
        (Reason.RATE_LIMITED, "POST", 1)


def test_an_unread_stream_is_never_read(sandbox, clock) -> None:
    url, _ = fixture(sandbox, {"status": 200, "body": RATE_LIMITED})
    retrier = rb.Retrier(policy=Policy(profile="github", deadline=60), clock=clock)
    with httpx.Client() as client:
        def stream() -> httpx.Response:
            return client.send(client.build_request("POST", url, json={}), stream=True)

        outcome = retrier.call(stream)
        response = outcome.value
        assert outcome.reason is Reason.OK  # the body was not read, so it says nothing
        assert isinstance(response, httpx.Response)
        assert not response.is_stream_consumed
        response.close()
    with requests.post(url, json={}, stream=True, timeout=5) as unread:
        outcome = retrier.call(lambda: unread)
        assert outcome.reason is Reason.OK
        assert unread.__dict__["_content"] is False  # still unread: the caller streams it


def test_a_2xx_body_that_is_not_json_is_not_an_error(sandbox, clock) -> None:
    url, _ = fixture(sandbox, {"status": 200, "body_text": "<html>ok</html>"})
    retrier = rb.Retrier(policy=Policy(profile="github", deadline=60), clock=clock)
    assert retrier.call(httpx.post, url).reason is Reason.OK


def test_a_get_200_body_is_not_read_for_a_post_only_signal(sandbox, clock) -> None:
    url, _ = fixture(sandbox, {"status": 200, "body": RATE_LIMITED})
    retrier = rb.Retrier(policy=Policy(profile="github", deadline=60), clock=clock)
    assert retrier.call(httpx.get, url).reason is Reason.OK


# GitHub write pacing: at least 1 s between mutating requests per provider key ---------------


def test_write_wait_exact_values() -> None:
    assert write_wait(NEVER, 5.0, 1.0) == 0.0
    assert write_wait(10.0, 10.25, 1.0) == 0.75
    assert write_wait(10.0, 11.0, 1.0) == 0.0
    assert write_wait(10.0, 10.9995, 1.0) == 0.0  # within EPSILON: now
    assert write_wait(10.0, 10.0, 0.0) == 0.0  # no gap: never waits


@given(st.lists(st.integers(min_value=0, max_value=3000), min_size=2, max_size=30),
       st.sampled_from([0.5, 1.0, 3.0]))
def test_writes_that_follow_write_wait_start_a_gap_apart(asks_ms, gap) -> None:
    # Writers ask at nondecreasing instants; each that is told to wait asks again then.
    now, last, starts = 0.0, NEVER, []
    for step in asks_ms:
        now += step / 1000
        for _ in range(10):  # bounded: one wait is always enough for a lone writer
            wait = write_wait(last, now, gap)
            if wait == 0:
                break
            event("waited")
            now += wait
        starts.append(now)
        last = now
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert all(g >= gap - EPSILON for g in gaps)
    if any(g < gap + EPSILON for g in gaps):
        event("a write went exactly one gap after the previous")


def test_github_profile_gaps_only_writes() -> None:
    github = rb.get_profile("github")
    assert [github.write_gap(m) for m in ("POST", "patch", "PUT", "DELETE")] == [1.0] * 4
    assert [github.write_gap(m) for m in ("GET", "HEAD", None)] == [0.0] * 3
    assert rb.get_profile("generic").write_gap("POST") == 0.0


def test_a_write_waits_a_gap_after_the_previous_write_on_either_backend(backend: Backend) -> None:
    a, b = backend.workers(n=2)
    key = f"{backend.name}-writes"
    for k in (key, f"{key}-other"):
        a.learn(k, NO_THROTTLE, None)  # answered before: past the keys' first window (probes)
    assert a.acquire(key, 1, 1.0).wait == 0
    permit = b.acquire(key, 1, 1.0)
    assert permit.reason is WaitReason.PACING
    late = backend.lateness()
    assert 1.0 - late - 0.01 <= permit.wait <= 1.0
    assert b.acquire(key, 1).wait == 0  # a read is not spaced
    assert b.acquire(f"{key}-other", 1, 1.0).wait == 0  # another provider key is not
    backend.sleep(permit.wait)
    assert b.acquire(key, 1, 1.0).wait == 0
    assert a.acquire(key, 1, 1.0).reason is WaitReason.PACING


def test_github_writes_through_httpx_are_a_second_apart(sandbox, clock) -> None:
    retrier = rb.Retrier(policy=Policy(profile="github", deadline=60), clock=clock,
                         coordinator=MemoryCoordinator(clock=clock))
    url, run_id = fixture(sandbox, {"status": 201, "body": {}})
    with httpx.Client(transport=RetryTransport(retrier=retrier)) as client:
        outcomes = [outcome_of(client.post(url, json={})) for _ in range(3)]
        read = outcome_of(client.get(url))
    assert all(o is not None and o.reason is Reason.OK for o in outcomes)
    assert [[(w.seconds, w.reason) for w in o.waits] for o in outcomes if o is not None] == \
        [[], [(1.0, WaitReason.PACING)], [(1.0, WaitReason.PACING)]]
    assert read is not None
    assert read.waits == ()
    assert sent(sandbox, run_id) == 4


def test_github_writes_share_the_spacing_through_redis(redis_server: RedisServer) -> None:
    coordinator = RedisCoordinator(redis_server.url, prefix=unique_prefix())
    try:
        policy = Policy(profile="github", deadline=60)
        retrier = rb.Retrier(policy=policy, coordinator=coordinator, method="POST")
        provider = ScriptedProvider([{"status": 201, "body": {}}])
        first = retrier.call(provider, "POST")
        second = rb.Retrier(policy=policy, coordinator=coordinator, method="POST").call(
            provider, "POST")
        assert (first.reason, first.waits) == (Reason.OK, ())
        assert second.reason is Reason.OK
        assert [w.reason for w in second.waits] == [WaitReason.PACING]
        assert 0 < second.waits[0].seconds <= 1.0
        assert provider.count == 2
    finally:
        coordinator.close()


def test_a_coordinator_written_before_write_gaps_still_serves_reads() -> None:
    class Old(Coordinator):
        def acquire(self, key: str, attempt: int) -> Permit:  # the two-argument form
            return Permit()

    outcome = rb.Retrier(policy=Policy(profile="github"), coordinator=Old()).call(
        ScriptedProvider([OK]))
    assert outcome.reason is Reason.OK


def test_a_profile_file_declares_the_new_signals() -> None:
    from retrybudget._profile_file import profile_from_toml

    made = profile_from_toml('''
name = "acme"
base = "generic"
bucket_path = "/rpc/([a-z.]+)"
scope_headers = ["x-acme-scope"]
graphql_cost = true
write_pacing = 0.5
''')
    assert made.coordination_key("k", "https://acme.example/rpc/users.list") == "k#users.list"
    assert (made.scope_headers, made.graphql_cost, made.write_gap("PUT")) == \
        (("x-acme-scope",), True, 0.5)
    shared = classify(made, ResponseSeen.of(429, {"x-acme-scope": "shared"}), NOW)
    assert shared.scope == "shared"
    with pytest.raises(ValueError, match="true or false"):
        profile_from_toml('name = "a"\ngraphql_cost = "yes"\n')
    with pytest.raises(ValueError, match="text"):
        profile_from_toml('name = "a"\nbucket_path = 3\n')


def test_against_the_slack_styled_sandbox_each_method_has_its_own_gate() -> None:
    # Slack's tiers apply per method: the sandbox in the slack style counts each method's
    # quota apart, and a 429 on one method holds only that method's requests.
    clock = FakeClock(wall=1_800_000_030.5)  # 29.5 s to the window's reset
    config = SandboxConfig(rate_limit=RateLimit(limit=1, window_s=60, style="slack"))
    coordinator = MemoryCoordinator(clock=clock)
    once = rb.Retrier(policy=Policy(profile="slack", deadline=120, max_attempts=1), clock=clock,
                      coordinator=coordinator)
    with serve_in_thread(config, clock=clock) as sandbox, \
            httpx.Client(transport=RetryTransport(retrier=once)) as client:
        post, listing = sandbox.url("/api/chat.postMessage"), sandbox.url("/api/conversations.list")
        assert httpx.post(post).status_code == 200  # spends chat.postMessage's quota
        limited = outcome_of(client.post(post))
        listed = outcome_of(client.get(listing))
        held = outcome_of(client.post(post))
    assert limited is not None
    assert listed is not None
    assert held is not None
    assert limited.history[0].kind is Kind.RATE_LIMITED
    assert (listed.reason, listed.waits, listed.attempts) == (Reason.OK, (), 1)
    assert held.reason is Reason.OK
    assert [(w.seconds, w.reason) for w in held.waits] == [(30.0, WaitReason.GATE)]


def test_against_the_shopify_styled_sandbox_a_throttled_query_waits_for_its_cost() -> None:
    # The sandbox's GraphQL quota: 2 points a minute, refilled at 2/60 points a second; a
    # query costs 1. Spent at 30.5 s into the window, a query is THROTTLED in a 200 body and
    # waits (1 - 0) / (2/60) = 30 s, by when the window has reset.
    clock = FakeClock(wall=1_800_000_030.5)
    config = SandboxConfig(rate_limit=RateLimit(limit=2, window_s=60, style="shopify"))
    policy = Policy(profile="shopify", deadline=120, idempotent_methods=GRAPHQL_METHODS)
    retrier = rb.Retrier(policy=policy, clock=clock)
    with serve_in_thread(config, clock=clock) as sandbox, \
            httpx.Client(transport=RetryTransport(retrier=retrier)) as client:
        url = sandbox.url("/admin/api/2025-01/graphql.json")
        spent = [httpx.post(url, json={"query": "{ shop { name } }"}).json() for _ in range(2)]
        response = client.post(url, json={"query": "{ shop { name } }"})
    assert spent[1]["extensions"]["cost"]["throttleStatus"]["currentlyAvailable"] == 0
    outcome = outcome_of(response)
    assert outcome is not None
    assert outcome.reason is Reason.OK
    assert outcome.history[0].kind is Kind.RATE_LIMITED
    assert outcome.history[0].status == 200
    assert [(w.seconds, w.reason, w.source) for w in outcome.waits] == \
        [(30.0, WaitReason.RETRY_AFTER, "body:requestedQueryCost")]
    assert response.json()["data"] == {"shop": {"name": "sandbox"}}


async def test_async_github_writes_share_the_spacing_through_redis(
        redis_server: RedisServer) -> None:
    coordinator = RedisCoordinator(redis_server.url, prefix=unique_prefix())
    calls = []

    async def create() -> dict[str, bool]:
        calls.append(1)
        return {"created": True}

    try:
        retrier = rb.Retrier(policy=Policy(profile="github", deadline=60),
                             coordinator=coordinator, method="POST")
        first = await retrier.acall(create)
        second = await retrier.acall(create)
        assert (first.reason, first.waits) == (Reason.OK, ())
        assert [w.reason for w in second.waits] == [WaitReason.PACING]
        assert 0 < second.waits[0].seconds <= 1.0
        assert len(calls) == 2
        raw = redis_server.client()
        try:
            keys = [k.decode() for k in raw.keys(coordinator.prefix + "*:write")]
            assert len(keys) == 1
            assert 0 < raw.ttl(keys[0]) <= 600 + 2  # the idle TTL, like every other key
        finally:
            raw.close()
    finally:
        await coordinator.aclose()


def test_without_redis_writes_are_spaced_locally(own_redis: RedisServer) -> None:
    coordinator = RedisCoordinator(own_redis.url, prefix=unique_prefix())
    try:
        own_redis.stop()
        assert coordinator.acquire("k", 1, 1.0).wait == 0
        permit = coordinator.acquire("k", 1, 1.0)
        assert permit.reason is WaitReason.PACING
        assert 0 < permit.wait <= 1.0
        assert coordinator.fallbacks >= 2
    finally:
        coordinator.close()


def test_through_redis_a_bucketed_first_attempt_gives_back_the_admissions_lease(
        redis_server: RedisServer, sandbox) -> None:
    # Redis admits and acquires in one round trip under the provider key; a Slack method's
    # attempt asks under its bucket instead, so that lease must go back, or the next request
    # under the bare key would find the one-request concurrency cap taken.
    config = CoordinationConfig(concurrency=ConcurrencyConfig(limit=1), breaker=BreakerConfig())
    coordinator = RedisCoordinator(redis_server.url, prefix=unique_prefix(), config=config)
    clock = FakeClock()
    try:
        retrier = rb.Retrier(policy=Policy(profile="slack", deadline=30), clock=clock,
                             coordinator=coordinator)
        with httpx.Client(transport=RetryTransport(retrier=retrier)) as client:
            method = outcome_of(client.get(sandbox.url("/api/conversations.list")))
            bare = outcome_of(client.get(sandbox.url("/rentals/1/availability")))
        assert method is not None
        assert bare is not None
        assert (method.reason, method.waits) == (Reason.OK, ())
        assert (bare.reason, bare.waits) == (Reason.OK, ())
    finally:
        coordinator.close()


def _throttled(requested: int, available: int, maximum: int, rate: float) -> str:
    body = json.loads(json.dumps(THROTTLED))
    body["extensions"]["cost"]["requestedQueryCost"] = requested
    body["extensions"]["cost"]["throttleStatus"] = {
        "maximumAvailable": float(maximum), "currentlyAvailable": available, "restoreRate": rate}
    return json.dumps(body)


@given(st.integers(0, 5000), st.integers(0, 5000), st.integers(0, 5000),
       st.sampled_from([0.0, 0.5, 50.0, 100.0, 1000.0]), st.integers(0, 400))
def test_any_cost_body_whole_or_cut_reads_as_the_cost_rule(requested, available, extra, rate,
                                                           cut) -> None:
    text = _throttled(requested, available, available + extra, rate)
    whole = seen("shopify", 200, {}, text, "POST")
    assert whole.kind is Kind.RATE_LIMITED
    assert (whole.rate.remaining, whole.rate.limit) == (available, available + extra)
    if rate > 0:
        event("a restore rate: a wait is named")
        assert whole.hint is not None
        assert whole.hint.delay == max(requested - available, 0) / rate
    else:
        assert whole.hint is None
    part = seen("shopify", 200, {}, text[:cut], "POST")  # never raises, whatever is cut off
    if part.kind is Kind.OK:
        event("cut before THROTTLED: ok")
    assert part.kind in (Kind.OK, Kind.RATE_LIMITED)
