"""``profile="auto"`` for SDK traffic: the official hosts, Azure OpenAI, and on a host it does
not know (a proxy, a gateway, here a loopback provider) the request headers the official SDK
sends: ``anthropic-version``, ``Stripe-Version``, ``X-GitHub-Api-Version``, OpenAI's
``x-stainless-*`` on an OpenAI-shaped path."""

from __future__ import annotations

import githubkit
import httpx
import pytest
import requests
import stripe
from hypothesis import given, settings
from hypothesis import strategies as st

import retrybudget as rb
from retrybudget.integrations import httpx as rb_httpx
from retrybudget.integrations import outcome_of
from retrybudget.integrations.requests import RetryAdapter
from tests.support import sdk_provider as sp
from tests.support.sdk import MODES, over_httpx2, run
from tests.support.strategies import examples

AUTO = rb.get_profile("auto")
FAST = rb.Policy(profile="auto", deadline=3.0, backoff=rb.Backoff(base=0.01, cap=0.02))


@pytest.mark.parametrize(("url", "name"), [
    ("https://api.openai.com/v1/chat/completions", "openai"),
    ("https://my-resource.openai.azure.com/openai/deployments/gpt/chat/completions", "openai"),
    ("https://api.anthropic.com/v1/messages", "anthropic"),
    ("https://api.stripe.com/v1/customers", "stripe"),
    ("https://api.github.com/repos/a/b", "github"),
    ("https://management.azure.com/subscriptions", "azure"),  # Azure, not Azure OpenAI
])
def test_the_official_hosts(url: str, name: str) -> None:
    assert AUTO.resolve(url).name == name
    assert AUTO.resolve(url, {"anthropic-version": "2023-06-01"}).name == name  # host first


NAMES = st.sampled_from(["accept", "content-type", "user-agent", "x-request-id", "authorization",
                         "x-api-key", "idempotency-key", "x-stainless-lang", "x-stainless-os"])
PATHS = st.sampled_from(["/v1/messages", "/v1/chat/completions", "/v1/models/x", "/v1/customers",
                         "/repos/a/b", "/api/things", "/"])


def cased(name: str, upper: bool) -> str:
    return name.title() if upper else name


@settings(max_examples=examples(80))
@given(names=st.lists(NAMES, max_size=6), path=PATHS, upper=st.booleans(),
       sdk=st.sampled_from([("anthropic-version", "anthropic"), ("stripe-version", "stripe"),
                            ("x-github-api-version", "github")]))
def test_an_sdks_own_header_names_the_profile_on_any_path(
        names: list[str], path: str, upper: bool, sdk: tuple[str, str]) -> None:
    url = f"http://127.0.0.1:8080{path}"
    headers = {cased(n, upper): "v" for n in names}
    stainless = any(n.startswith("x-stainless-") for n in names)
    openai_path = path in ("/v1/chat/completions", "/v1/models/x")
    # without an SDK's own header: openai for x-stainless-* on an OpenAI path, else generic
    assert AUTO.resolve(url, headers).name == (
        "openai" if stainless and openai_path else "generic")
    header, name = sdk
    assert AUTO.resolve(url, {**headers, cased(header, upper): "2024-01-01"}).name == name


def test_an_explicit_host_and_the_fallback_still_decide() -> None:
    mine = rb.auto({"gw.internal": "stripe"}, fallback="github")
    assert mine.resolve("http://gw.internal/v1/messages", {"anthropic-version": "1"}).name == "stripe"
    assert mine.resolve("http://other/v1/messages", {"anthropic-version": "1"}).name == "anthropic"
    assert mine.resolve("http://other/v1/messages", {"accept": "*/*"}).name == "github"


# End to end: each SDK over a loopback host, its profile picked by what it sends ------------


@pytest.mark.parametrize("mode", MODES)
def test_anthropic_on_an_unknown_host_is_classified_as_anthropic(mode: str) -> None:
    import anthropic

    # generic retries no 529; anthropic's profile does
    with sp.serve(sp.anthropic_overloaded(), sp.anthropic_model()) as p:
        model = run(mode, lambda: over_httpx2(mode, anthropic.Anthropic, anthropic.AsyncAnthropic,
                                              FAST, False, api_key="k", base_url=p.url),
                    lambda client: client.models.with_raw_response.retrieve("m"))
    assert len(p.requests) == 2
    response = model.http_response
    outcome = outcome_of(response)
    assert outcome is not None
    assert outcome.policy is not None
    assert outcome.policy.profile.name == "anthropic"


@pytest.mark.parametrize("mode", MODES)
def test_openai_on_an_unknown_host_is_classified_as_openai(mode: str) -> None:
    import openai

    # openai's profile reads retry-after-ms and x-should-retry: false stops a 503
    limited = sp.openai_error(503, "overloaded", "server_error", None,
                              (("x-should-retry", "false"),))
    with sp.serve(limited, sp.openai_model()) as p, pytest.raises(openai.InternalServerError) as caught:
        run(mode, lambda: over_httpx2(mode, openai.OpenAI, openai.AsyncOpenAI, FAST, False,
                                      api_key="k", base_url=p.url + "/v1"),
            lambda client: client.models.retrieve("m"))
    assert len(p.requests) == 1
    outcome = rb.outcome_of(caught.value)
    assert outcome is not None
    assert outcome.policy is not None
    assert outcome.policy.profile.name == "openai"


def test_stripe_on_an_unknown_host_is_classified_as_stripe() -> None:
    # Stripe's profile retries a 409; generic rejects it
    session = requests.Session()
    session.mount("http://", RetryAdapter(policy=FAST))
    conflict = sp.stripe_error(409, "invalid_request_error", "conflict", "lock_timeout")
    with sp.serve(conflict, sp.stripe_customer()) as p:
        client = stripe.StripeClient("sk_test_k", base_addresses={"api": p.url},
                                     http_client=stripe.RequestsClient(session=session),
                                     max_network_retries=0)
        customer = client.v1.customers.retrieve("cus_1")
    assert customer.id == "cus_1"
    assert len(p.requests) == 2


def test_githubkit_on_an_unknown_host_is_classified_as_github() -> None:
    # GitHub's profile reads a 403 with remaining 0 as its primary limit (generic: rejected)
    transport = rb_httpx.RetryTransport(policy=FAST.replace(max_server_wait=5.0))
    with sp.serve(sp.github_rate_limited(reset_in=0), sp.github_repo()) as p:
        # http_cache=False: githubkit's cache (hishel) rebuilds each response without its
        # extensions, the outcome among them
        gh = githubkit.GitHub("ghp_k", base_url=p.url, auto_retry=False, http_cache=False,
                              transport=transport)
        with pytest.raises(githubkit.exception.RequestFailed) as caught:
            gh.rest.repos.get("octo", "hello")
    outcome = rb.outcome_of(caught.value)
    assert outcome is not None
    assert outcome.policy is not None
    assert outcome.policy.profile.name == "github"
    assert outcome.reason is rb.Reason.RATE_LIMITED  # GitHub's 60 s floor is past the deadline
    assert isinstance(caught.value.response.raw_response, httpx.Response)
