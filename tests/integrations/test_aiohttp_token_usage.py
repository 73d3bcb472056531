"""Token pacing through the aiohttp middleware: an LLM request's cost is charged, and the usage
its answer's body states corrects the charge once the caller has read the body to its end
(``json()``, or a stream's lines). Against the sandbox's LLM provider over loopback (no token
quota announced: :mod:`tests.support.token_usage`), OpenAI's and Anthropic's dialects, on the
memory coordinator and a real redis-server.
"""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp.streams import StreamReader

from retrybudget import Policy, Retrier
from retrybudget.coordination import Coordinator, MemoryCoordinator, RedisCoordinator
from retrybudget.integrations.aiohttp import RetryMiddleware
from retrybudget.sandbox import RUN_HEADER
from tests.support import token_usage as llm
from tests.support.coordination import token_counts

pytest_plugins = ("tests.support.token_usage",)

def middleware(c: Coordinator, dialect: str) -> RetryMiddleware:
    """The middleware, retrying under ``c`` (every request under one key)."""
    return RetryMiddleware(Retrier(policy=Policy(profile=dialect), coordinator=c),
                           key=lambda request: llm.KEY)


@llm.every_case
def test_the_count_is_the_providers_once_the_body_is_read(
        provider: str, store: str | None, dialect: str, stream: bool) -> None:
    c = llm.coordinator(store)
    run = llm.new_run()

    async def main() -> list[int]:
        async with aiohttp.ClientSession(middlewares=(middleware(c, dialect),)) as http:
            async with http.post(provider + llm.PATHS[dialect], json=llm.body(dialect, stream),
                                 headers={RUN_HEADER: run}) as answer:
                assert answer.status == 200
                unread = token_counts(c, llm.KEY, store)
                if stream:
                    lines = [line async for line in answer.content]
                    assert lines
                else:
                    assert "usage" in await answer.json()
        if isinstance(c, RedisCoordinator):
            await c.aclose()  # sends the correction held for the key's next acquire
        return unread

    unread = asyncio.run(main())
    counted = llm.spent(provider, run)
    assert counted[2] == llm.MAX_TOKENS // 20
    assert unread[0] >= llm.MAX_TOKENS > counted[0]  # handed over unread: the estimate stood
    assert token_counts(c, llm.KEY, store) == counted


def test_a_body_released_unread_leaves_the_charge(provider: str) -> None:
    c = MemoryCoordinator()

    async def main() -> list[int]:
        async with aiohttp.ClientSession(middlewares=(middleware(c, "openai"),)) as http:
            async with http.post(provider + llm.PATHS["openai"], json=llm.body("openai", True),
                                 headers={RUN_HEADER: llm.new_run()}) as answer:
                charged = token_counts(c, llm.KEY)
                answer.release()
        return charged

    charged = asyncio.run(main())
    assert charged[0] >= llm.MAX_TOKENS
    assert token_counts(c, llm.KEY) == charged


def test_a_request_that_costs_nothing_is_handed_over_as_it_came(provider: str) -> None:
    async def main() -> None:
        async with aiohttp.ClientSession(
                middlewares=(middleware(MemoryCoordinator(), "openai"),)) as http:
            async with http.get(f"{provider}/_llm/{llm.new_run()}") as answer:
                assert type(answer.content) is StreamReader

    asyncio.run(main())
