"""Token pacing through the requests adapter: an LLM request's cost is charged, and the usage
its answer's body states corrects the charge: a body the adapter reads (no ``stream``) before
its attempt is learned, a streamed one (``stream=True``) once the caller has read it. Against
the sandbox's LLM provider over loopback (no token quota announced:
:mod:`tests.support.token_usage`), OpenAI's and Anthropic's dialects, on the memory
coordinator and a real redis-server.
"""

from __future__ import annotations

import requests

from retrybudget import Policy, Retrier
from retrybudget.coordination import Coordinator, MemoryCoordinator, RedisCoordinator
from retrybudget.integrations.requests import RetryAdapter
from retrybudget.sandbox import RUN_HEADER
from tests.support.coordination import token_counts
from tests.support.token_usage import (
    KEY,
    MAX_TOKENS,
    PATHS,
    body,
    coordinator,
    every_case,
    new_run,
    spent,
)

pytest_plugins = ("tests.support.token_usage",)

def session(c: Coordinator, dialect: str) -> requests.Session:
    """A session whose adapter retries under ``c`` (every request under one key)."""
    adapter = RetryAdapter(Retrier(policy=Policy(profile=dialect), coordinator=c),
                           key=lambda request: KEY)
    http = requests.Session()
    http.mount("http://", adapter)
    return http


def settled(c: Coordinator) -> None:
    """Send what a Redis coordinator holds for the key's next acquire."""
    if isinstance(c, RedisCoordinator):
        c.settle()


@every_case
def test_the_count_is_the_providers_once_the_body_is_read(
        provider: str, store: str | None, dialect: str, stream: bool) -> None:
    c = coordinator(store)
    run = new_run()
    with session(c, dialect) as http:
        answer = http.post(provider + PATHS[dialect], json=body(dialect, stream),
                           headers={RUN_HEADER: run}, stream=stream)
        with answer:
            unread = token_counts(c, KEY, store)
            lines = list(answer.iter_lines())
    settled(c)
    assert answer.status_code == 200
    assert lines
    counted = spent(provider, run)
    assert counted[2] == MAX_TOKENS // 20
    assert token_counts(c, KEY, store) == counted
    if stream:  # handed over unread: the estimate stood until the caller read it
        assert unread[0] >= MAX_TOKENS > counted[0]
    else:  # read by the adapter: corrected when its attempt was learned
        assert unread == counted
    if isinstance(c, RedisCoordinator):
        c.close()


def test_a_stream_closed_unread_leaves_the_charge(provider: str) -> None:
    c = MemoryCoordinator()
    with session(c, "anthropic") as http:
        answer = http.post(provider + PATHS["anthropic"], json=body("anthropic", True),
                           headers={RUN_HEADER: new_run()}, stream=True)
        charged = token_counts(c, KEY)
        answer.close()
    assert charged[0] >= MAX_TOKENS
    assert token_counts(c, KEY) == charged


def test_a_request_that_costs_nothing_is_handed_over_as_it_came(provider: str) -> None:
    with session(MemoryCoordinator(), "openai") as http:
        answer = http.get(f"{provider}/_llm/{new_run()}", stream=True)
        with answer:
            assert type(answer.raw).__module__.startswith("urllib3")
