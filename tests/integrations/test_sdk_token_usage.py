"""The usage an LLM answer's body states corrects its token charge once the caller has read
the body: through the official openai and anthropic SDKs over the httpx2 (and httpx)
transports, sync and async, whole answers and streams, against the sandbox's LLM provider
over loopback (no token quota announced: :mod:`tests.support.token_usage`), on the memory
coordinator and a real redis-server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from retrybudget import Policy, Retrier
from retrybudget.coordination import Coordinator, MemoryCoordinator, RedisCoordinator
from retrybudget.integrations import httpx as rb_httpx
from retrybudget.integrations import httpx2 as rb_httpx2
from retrybudget.sandbox import RUN_HEADER
from tests.support.coordination import command_calls, token_counts
from tests.support.redis import RedisServer
from tests.support.token_usage import KEY, MAX_TOKENS, PROMPT, coordinator, new_run, spent

pytest_plugins = ("tests.support.token_usage",)

DIALECTS = ("openai", "anthropic")
MODES = ("sync", "async")


def client(dialect: str, mode: str, base: str, c: Coordinator, run: str) -> Any:
    """The official SDK's client, its own retries off, over an httpx2 client whose transport
    retries under ``c`` (every request under one key)."""
    retrier = Retrier(policy=Policy(profile=dialect), coordinator=c)
    headers = {RUN_HEADER: run}
    if mode == "sync":
        http: Any = httpx2.Client(transport=rb_httpx2.RetryTransport(
            retrier=retrier, key=lambda request: KEY), headers=headers)
    else:
        http = httpx2.AsyncClient(transport=rb_httpx2.AsyncRetryTransport(
            retrier=retrier, key=lambda request: KEY), headers=headers)
    if dialect == "openai":
        kind: Any = openai.OpenAI if mode == "sync" else openai.AsyncOpenAI
        return kind(api_key="sk-test", base_url=f"{base}/v1", max_retries=0, http_client=http)
    kind = anthropic.Anthropic if mode == "sync" else anthropic.AsyncAnthropic
    return kind(api_key="sk-test", base_url=base, max_retries=0, http_client=http)


def create(sdk: Any, dialect: str, **options: Any) -> Any:
    """A chat completion or a message (a coroutine from an async client)."""
    if dialect == "openai":
        if options.get("stream"):
            options.setdefault("stream_options", {"include_usage": True})
        return sdk.chat.completions.create(model="gpt-4o-mini", max_tokens=MAX_TOKENS,
                                           messages=PROMPT, **options)
    return sdk.messages.create(model="claude-haiku-4-5", max_tokens=MAX_TOKENS,
                               messages=PROMPT, **options)


def run_sync(sdk: Any, dialect: str, stream: bool, unread: Callable[[], None]) -> None:
    """One request; for a stream, ``unread`` is called once its answer came, body unread."""
    answer = create(sdk, dialect, stream=stream)
    if stream:
        unread()
        for _ in answer:
            pass


async def run_async(sdk: Any, dialect: str, stream: bool, unread: Callable[[], None]) -> None:
    answer = await create(sdk, dialect, stream=stream)
    if stream:
        unread()
        async for _ in answer:
            pass


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_count_is_the_providers_once_the_body_is_read(
        provider: str, store: str | None, dialect: str, mode: str, stream: bool) -> None:
    c = coordinator(store)
    run = new_run()
    sdk = client(dialect, mode, provider, c, run)
    while_unread: list[list[int]] = []

    def unread() -> None:
        while_unread.append(token_counts(c, KEY, store))

    if mode == "sync":
        run_sync(sdk, dialect, stream, unread)
        if isinstance(c, RedisCoordinator):
            c.close()  # sends the correction held for the key's next acquire
    else:
        async def main() -> None:
            await run_async(sdk, dialect, stream, unread)
            if isinstance(c, RedisCoordinator):
                await c.aclose()

        asyncio.run(main())
    provider_count = spent(provider, run)
    assert provider_count[2] == MAX_TOKENS // 20  # the output was a twentieth of its estimate
    assert token_counts(c, KEY, store) == provider_count
    if stream:  # the stream went to the caller unread: the charge stood until it was read
        assert while_unread[0][0] >= MAX_TOKENS > provider_count[0]


def test_on_redis_the_correction_rides_the_keys_next_acquire(provider: str,
                                                             redis_server: RedisServer) -> None:
    c = coordinator(redis_server.url)
    run = new_run()
    sdk = client("openai", "sync", provider, c, run)
    before = command_calls(redis_server)[0]
    create(sdk, "openai")
    first = token_counts(c, KEY, redis_server.url)  # its correction is held: the estimate
    create(sdk, "openai")  # its acquire carries the first's correction
    trips = command_calls(redis_server)[0] - before
    second = token_counts(c, KEY, redis_server.url)
    c.settle()  # no acquire comes: the second's is sent on its own (a timer would, idle)
    assert trips == 4  # two round trips a request, as without the correction
    assert command_calls(redis_server)[0] - before == 5
    counted = spent(provider, run)
    usage = [counted[0] // 2, counted[1] // 2, counted[2] // 2]
    assert first[0] >= MAX_TOKENS
    assert second == [usage[0] + first[0], usage[1] + first[1], usage[2] + first[2]]
    assert token_counts(c, KEY, redis_server.url) == counted
    c.close()


def test_a_body_closed_before_its_usage_came_leaves_the_charge(provider: str) -> None:
    c = MemoryCoordinator()
    sdk = client("anthropic", "sync", provider, c, new_run())
    stream = create(sdk, "anthropic", stream=True)
    charged = token_counts(c, KEY)
    stream.close()  # nothing read: no usage, nothing corrected
    assert token_counts(c, KEY) == charged
    sdk = client("openai", "sync", provider, c, new_run())
    for _ in create(sdk, "openai", stream=True, stream_options={"include_usage": False}):
        pass  # read whole, but no chunk carries the usage
    assert token_counts(c, KEY)[0] == 2 * charged[0] > 2 * MAX_TOKENS - 1


def test_only_an_answer_to_a_request_that_charged_tokens_is_watched(provider: str) -> None:
    transport = rb_httpx2.RetryTransport(retrier=Retrier(policy=Policy(profile="openai"),
                                                         coordinator=MemoryCoordinator()))
    body = {"model": "m", "max_tokens": 50, "messages": PROMPT}
    costly = transport.handle_request(httpx2.Request("POST", f"{provider}/v1/chat/completions",
                                                     json=body))
    free = transport.handle_request(httpx2.Request("GET", f"{provider}/_llm/none"))
    try:
        assert type(costly.stream).__module__ == "retrybudget.integrations._httpx2_usage"
        assert type(free.stream).__module__.startswith("httpx2")  # handed over as it came
    finally:
        costly.close()
        free.close()


def test_an_httpx_client_with_the_httpx_transport_is_corrected_too(provider: str) -> None:
    c = MemoryCoordinator()
    run = new_run()
    transport = rb_httpx.RetryTransport(retrier=Retrier(policy=Policy(profile="openai"),
                                                        coordinator=c), key=lambda r: KEY)
    sdk = openai.OpenAI(api_key="sk-test", base_url=f"{provider}/v1", max_retries=0,
                        http_client=httpx.Client(transport=transport, headers={RUN_HEADER: run}))
    for _ in create(sdk, "openai", stream=True):
        pass
    assert token_counts(c, KEY) == spent(provider, run)
