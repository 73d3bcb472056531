"""The official SDKs' errors read as what they carry: one rule, whatever carries it.

For any status and any header set a provider may send, an SDK error that carries them (the
response itself for openai, anthropic and githubkit; ``http_status``/``headers``/``http_body``
for Stripe; ``status``/``headers``/``data`` for PyGithub) is read as the very observation the
response would be read as; a connection error is the failure kind of the transport error it
was raised from; nothing else in the error changes that.
"""

from __future__ import annotations

import json

import anthropic
import github
import githubkit
import httpx
import httpx2
import openai
import pytest
import stripe
from hypothesis import given, settings
from hypothesis import strategies as st

import retrybudget as rb
from retrybudget._native import is_sdk_error, observe_error
from retrybudget.core.classify import FailureKind, FailureSeen, ResponseSeen
from tests.support.strategies import assert_reached, examples, header_pairs, reached, tried

STATUSES = st.integers(min_value=400, max_value=599)
BODIES = st.sampled_from([{"error": {"type": "rate_limit_error", "message": "slow down"}},
                          {"message": "API rate limit exceeded"}, {}])


def raw(headers: list[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    """Header pairs as they come off the wire (any text, sent as UTF-8)."""
    return [(name.encode(), value.encode()) for name, value in headers]


def expected(status: int, wire: list[tuple[bytes, bytes]], body: object, method: str | None,
             *, with_body: bool = True) -> ResponseSeen:
    """What the response itself reads as (httpx's response, read)."""
    response = httpx.Response(status, headers=wire, json=body,
                              request=httpx.Request(method or "GET", "https://api.example.com"))
    seen = observe_error(httpx.HTTPStatusError("x", request=response.request, response=response))
    assert isinstance(seen, ResponseSeen)
    return ResponseSeen(seen.status, seen.headers, seen.message if with_body else "", "", method)


@settings(max_examples=examples(60))
@given(status=STATUSES, headers=header_pairs(), body=BODIES)
def test_an_sdk_error_reads_as_the_response_it_carries(
        status: int, headers: list[tuple[str, str]], body: object) -> None:
    tried("sdk-error")
    # a mapping holds one value per name (Stripe's and PyGithub's headers are mappings)
    headers = list({name.lower(): (name, value) for name, value in headers}.values())
    response = httpx2.Response(status, headers=raw(headers), json=body,
                               request=httpx2.Request("POST", "https://api.anthropic.com/v1/x"))
    want = expected(status, raw(headers), body, "POST")
    for error in (
        anthropic.APIStatusError("x", response=response, body=body),
        openai.APIStatusError("x", response=response, body=body),
    ):
        assert observe_error(error) == want
        reached("sdk-error", "response")
    carried = httpx.Response(status, headers=raw(headers), json=body,
                             request=httpx.Request("POST", "https://api.github.com/x"))
    wrapped = githubkit.response.Response(carried, dict)
    assert observe_error(githubkit.exception.RequestFailed(wrapped)) == want
    # Stripe and PyGithub name no method; their bodies are kept as the provider sent them
    plain = {name.decode("latin-1"): value.decode("latin-1")  # as a client decodes them
             for name, value in raw(headers)}
    text = json.dumps(body)
    stripe_error = stripe.StripeError("x", http_body=text, http_status=status, json_body=body,
                                      headers=plain)
    seen = observe_error(stripe_error)
    assert isinstance(seen, ResponseSeen)
    assert (seen.status, seen.method) == (status, None)
    assert seen.headers == expected(status, raw(headers), body, None).headers
    reached("sdk-error", "status and headers")
    pygithub = github.GithubException(status, body, plain)
    assert observe_error(pygithub) == seen


def test_the_properties_reached_their_checks() -> None:
    assert_reached("sdk-error", ("response", "status and headers"))


@pytest.mark.parametrize(("cause", "kind"), [
    (httpx2.ConnectError("refused"), FailureKind.CONNECT),
    (httpx2.ReadTimeout("slow"), FailureKind.TIMEOUT),
    (httpx2.RemoteProtocolError("reset"), FailureKind.NETWORK),
])
def test_a_connection_error_is_the_transport_error_it_wraps(
        cause: Exception, kind: FailureKind) -> None:
    request = httpx2.Request("POST", "https://api.openai.com/v1/chat/completions")
    for sdk in (openai, anthropic):
        wrapper = (sdk.APITimeoutError(request=request) if kind is FailureKind.TIMEOUT
                   else sdk.APIConnectionError(request=request))
        try:
            raise wrapper from cause
        except sdk.APIConnectionError as raised:
            seen = observe_error(raised)
        assert seen == FailureSeen(kind, type(cause).__name__, method="POST")
    seen = observe_error(githubkit.exception.RequestError(cause))  # githubkit's .exc
    assert isinstance(seen, FailureSeen)
    assert seen.kind is kind


def test_a_chain_of_sdk_errors_that_loops_is_read_as_nothing() -> None:
    first = stripe.APIConnectionError("a")
    second = stripe.APIConnectionError("b")
    first.__cause__, second.__cause__ = second, first
    assert observe_error(first) is None
    assert is_sdk_error(first)


def test_anyones_error_carrying_a_response_reads_as_it() -> None:
    class Failed(Exception):
        def __init__(self, response: httpx.Response) -> None:
            super().__init__("failed")
            self.response = response

    response = httpx.Response(503, headers={"retry-after": "2"},
                              request=httpx.Request("GET", "https://api.example.com"))
    seen = observe_error(Failed(response))
    assert isinstance(seen, ResponseSeen)
    assert (seen.status, seen.headers, seen.method) == (503, (("retry-after", "2"),), "GET")
    assert not is_sdk_error(Failed(response))
    assert rb.outcome_of(Failed(response)) is None  # no operation produced it


def test_a_slack_api_error_reads_as_the_response_it_carries() -> None:
    from slack_sdk.errors import SlackApiError
    from slack_sdk.web.slack_response import SlackResponse

    response = SlackResponse(client=None, http_verb="POST", api_url="https://slack.com/api/chat.postMessage",
                             req_args={}, data={"ok": False, "error": "ratelimited"},
                             headers={"Retry-After": "30"}, status_code=429)
    seen = observe_error(SlackApiError("ratelimited", response))
    assert isinstance(seen, ResponseSeen)
    assert (seen.status, seen.headers) == (429, (("retry-after", "30"),))
    assert seen.method == "POST"  # slack_sdk sends its Web API calls as POSTs: not replayed
    assert is_sdk_error(SlackApiError("ratelimited", response))
