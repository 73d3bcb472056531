"""The sandbox's LLM provider for the tests of the usage read from an answer's body: it
announces no token quota (only requests), so no answer's headers say what it counted and
only the body's usage can correct the estimate, which is far off (``max_tokens`` 2,000, an
answer of 100 tokens). Its window is a day long: every request of a test lands in one.

A test module that lists this module in ``pytest_plugins`` gets :func:`provider` (the base
URL, one sandbox per module) and :func:`store` (each test once on memory, once on a real
redis-server).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import httpx
import pytest

from retrybudget.coordination import Coordinator, MemoryCoordinator, RedisCoordinator
from retrybudget.sandbox import LlmLimits, SandboxConfig, serve_in_thread
from tests.support.coordination import unique_prefix
from tests.support.redis import RedisServer

pytest_plugins = ("tests.support.redis",)

F = TypeVar("F", bound=Callable[..., Any])

KEY = "llm"
"""The provider key every request is paced under."""
MAX_TOKENS = 2000
"""What each request reserves for its answer: the sandbox produces a twentieth of it."""
CONFIG = SandboxConfig(llm=LlmLimits(rpm=1000, window_s=86_400, output_share=0.05))
PROMPT = [{"role": "user", "content": "How many tokens will this answer take?"}]
PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}
"""Each dialect's route."""


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    """The sandbox's LLM provider on loopback: its base URL."""
    with serve_in_thread(CONFIG) as sandbox:
        yield sandbox.base_url.rstrip("/")


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> str | None:
    """None: the memory coordinator; else a real redis-server's URL."""
    if request.param == "memory":
        return None
    server: RedisServer = request.getfixturevalue("redis_server")
    return server.url


def coordinator(url: str | None) -> Coordinator:
    """A memory coordinator (``url`` None) or one on the redis-server at ``url``."""
    return MemoryCoordinator() if url is None else RedisCoordinator(url, prefix=unique_prefix())


def new_run() -> str:
    """A sandbox run of the test's own (the provider counts each run apart)."""
    return uuid.uuid4().hex


def spent(base: str, run: str) -> list[int]:
    """What the provider counted for ``run``: tokens, input tokens, output tokens."""
    windows = httpx.get(f"{base}/_llm/{run}", timeout=10).json()["windows"]
    return [sum(w[name] for w in windows) for name in ("tokens", "input_tokens", "output_tokens")]


def body(dialect: str, stream: bool) -> dict[str, Any]:
    """A chat completion's or a message's body (a stream's asks OpenAI for its usage)."""
    sent: dict[str, Any] = {"model": "m", "max_tokens": MAX_TOKENS, "messages": PROMPT}
    if stream:
        sent["stream"] = True
        if dialect == "openai":
            sent["stream_options"] = {"include_usage": True}
    return sent


def every_case(test: F) -> F:
    """Run ``test`` for each dialect (``dialect``), its answer whole and streamed (``stream``)."""
    dialects = pytest.mark.parametrize("dialect", ["openai", "anthropic"])
    streams = pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
    marked: F = streams(dialects(test))
    return marked
