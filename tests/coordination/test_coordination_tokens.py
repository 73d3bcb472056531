"""Token pacing: every token quota a provider publishes, paced with each request's cost.

The behaviour tests run once per backend (memory on a fake clock, Redis on a real server);
the property drives a coordinator against a model provider that charges each request's
estimate when it arrives and corrects it to the usage when it answers, as the sandbox (and
Anthropic's output quota) do.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from retrybudget import FakeClock
from retrybudget.coordination import (
    CoordinationConfig,
    Coordinator,
    MemoryCoordinator,
    TokenCall,
    current_call,
    llm_request_cost,
    token_cost,
)
from retrybudget.core.profiles import ANTHROPIC, OPENAI
from retrybudget.core.tokens import TokenEstimate, TokenUsage
from tests.support.coordination import Backend, seen
from tests.support.strategies import assert_reached, examples, reached, tried

pytest_plugins = ("tests.support.coordination",)

KEY = "api.openai.test"


def openai_headers(limits: dict[str, int], used: dict[str, int], reset_in: float) -> dict[str, str]:
    headers = {}
    for kind in ("requests", "tokens"):
        headers[f"x-ratelimit-limit-{kind}"] = str(limits[kind])
        headers[f"x-ratelimit-remaining-{kind}"] = str(max(limits[kind] - used[kind], 0))
        headers[f"x-ratelimit-reset-{kind}"] = f"{math.ceil(reset_in * 1000)}ms"
    return headers


def answered(c: Coordinator, call: TokenCall, lease: str | None, status: int,
             headers: dict[str, str], wall: float) -> None:
    """An attempt's answer recorded and learned, as an integration does."""
    call.record(status, headers, wall)
    c.learn(KEY, seen(status, headers, profile=OPENAI, wall=wall), lease)


def test_a_charge_that_does_not_fit_waits_for_the_reset(backend: Backend) -> None:
    c = backend.one()
    limits = {"requests": 100, "tokens": 3000}
    with token_cost(TokenEstimate(100, 900)) as call:  # 1,000 tokens a request
        first = c.acquire(KEY, 1)
        assert first.wait == 0
        assert first.lease is not None
        answered(c, call, first.lease, 200, openai_headers(limits, {"requests": 1, "tokens": 1000}, 2.0),
                 backend.clock.wall())
        went = [c.acquire(KEY, 1) for _ in range(2)]
        assert [p.wait for p in went] == [0, 0]
        # the window's 3,000 tokens are charged, 2,000 of them in flight: their answers may
        # leave room (an estimate that ran high), so it asks again one spread later
        assert 0 < c.acquire(KEY, 1).wait <= 0.05
        for n, permit in enumerate(went, start=2):
            answered(c, call, permit.lease, 200,
                     openai_headers(limits, {"requests": n, "tokens": 1000 * n}, 2.0),
                     backend.clock.wall())
        held = c.acquire(KEY, 1)  # nothing in flight: until the window's reset
        assert held.wait > 1.5
        assert held.wait <= 2.0 + 1e-6
    plain = c.acquire(KEY, 1)  # a request that costs no tokens is not held by them
    assert plain.wait == 0


def test_an_answer_lowers_the_count_to_the_providers(backend: Backend) -> None:
    c = backend.one()
    limits = {"requests": 100, "tokens": 3000}
    with token_cost(TokenEstimate(100, 1400)) as call:  # 1,500 estimated
        first = c.acquire(KEY, 1)
        assert c.acquire(KEY, 1).wait > 0  # the key's first window: its probe goes alone
        # the provider counted 600 for the first (its output was short)
        answered(c, call, first.lease, 200,
                 openai_headers(limits, {"requests": 1, "tokens": 600}, 2.0), backend.clock.wall())
        second = c.acquire(KEY, 1)
        assert second.wait == 0
        # 600 + 1,500 in flight counted: another 1,500 does not fit 3,000
        assert c.acquire(KEY, 1).wait > 0
        answered(c, call, second.lease, 200,
                 openai_headers(limits, {"requests": 2, "tokens": 1200}, 2.0), backend.clock.wall())
        assert c.acquire(KEY, 1).wait == 0  # 1,200 + 1,500 fit


def test_a_tokens_429_gates_the_token_dimension_only(backend: Backend) -> None:
    c = backend.one()
    limits = {"requests": 100, "tokens": 3000}
    with token_cost(TokenEstimate(100, 900)) as call:
        permit = c.acquire(KEY, 1)
        headers = openai_headers(limits, {"requests": 1, "tokens": 2500}, 1.5)
        answered(c, call, permit.lease, 429, {**headers, "retry-after-ms": "1500"},
                 backend.clock.wall())
        held = c.acquire(KEY, 1)
        assert 1.0 < held.wait <= 1.5 + 1e-6
    assert c.acquire(KEY, 1).wait == 0  # the requests' gate stays open
    backend.sleep(held.wait + 0.01)
    with token_cost(TokenEstimate(100, 900)):
        assert c.acquire(KEY, 1).wait == 0


def test_anthropic_input_and_output_quotas_are_paced_apart(backend: Backend) -> None:
    c = backend.one()
    wall = backend.clock.wall()
    reset = datetime.fromtimestamp(math.floor(wall) + 3, timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")
    headers = {}
    for kind, limit, left in (("requests", 50, 49), ("input-tokens", 10_000, 9_000),
                              ("output-tokens", 2_000, 1_500), ("tokens", 100_000, 98_500)):
        headers[f"anthropic-ratelimit-{kind}-limit"] = str(limit)
        headers[f"anthropic-ratelimit-{kind}-remaining"] = str(left)
        headers[f"anthropic-ratelimit-{kind}-reset"] = reset
    with token_cost(TokenEstimate(1000, 500)) as call:
        permit = c.acquire(KEY, 1)
        call.record(200, headers, wall)
        c.learn(KEY, seen(200, headers, profile=ANTHROPIC, wall=wall), permit.lease)
        assert [c.acquire(KEY, 1).wait for _ in range(3)] == [0, 0, 0]  # output: 500 x 4
        assert c.acquire(KEY, 1).wait > 0  # the output quota is spent, the input one is not
    with token_cost(TokenEstimate(1000, 0)):
        assert c.acquire(KEY, 1).wait == 0  # input only: 1,000 + 4,000 of 10,000


def test_the_cost_is_current_only_inside_its_block() -> None:
    assert current_call() is None
    with token_cost(120) as call:
        assert current_call() is call
        assert call.charge == (120, 0, 0)
    assert current_call() is None


def test_llm_request_cost_reads_llm_bodies_only() -> None:
    body = b'{"model": "m", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}'
    assert llm_request_cost("POST", "https://api.openai.com/v1/chat/completions", body) == (
        TokenEstimate(7, 50))
    assert llm_request_cost("POST", "https://api.anthropic.com/v1/messages?beta=1", body) is not None
    assert llm_request_cost("GET", "https://api.openai.com/v1/chat/completions", body) is None
    assert llm_request_cost("POST", "https://api.openai.com/v1/embeddings", body) is None


def test_tokens_off_in_the_config_turns_the_cost_function_off() -> None:
    assert CoordinationConfig(tokens=None).tokens is None


# The property: a window never admits more than its limit -----------------------------------

PROPERTY = "tokens"
WINDOW = 2.0


class ModelProvider:
    """Fixed windows of ``WINDOW`` seconds on the wall clock: each request's estimate charged
    when it arrives (refused if it does not fit), corrected to its usage when it answers.

    The property holds once the limits are learned: before the first answer, nothing says
    them (the key's first window lets its probes go blind)."""

    def __init__(self, limits: tuple[int, int, int]) -> None:
        self.limits = limits
        self.index = -1
        self.used = [0, 0, 0]
        self.refused = 0

    def window(self, wall: float) -> int:
        index = math.floor(wall / WINDOW)
        if index != self.index:
            self.index, self.used = index, [0, 0, 0]
        return index

    def admit(self, wall: float, charge: tuple[int, int, int]) -> int | None:
        index = self.window(wall)
        if any(u + c > limit for u, c, limit in zip(self.used, charge, self.limits, strict=True)):
            self.refused += 1
            return None
        self.used = [u + c for u, c in zip(self.used, charge, strict=True)]
        return index

    def answer(self, wall: float, index: int, charge: tuple[int, int, int],
               usage: tuple[int, int, int]) -> dict[str, str]:
        if self.window(wall) == index:
            self.used = [max(u + s - c, 0) for u, s, c in zip(self.used, usage, charge,
                                                                strict=True)]
        reset = datetime.fromtimestamp((self.index + 1) * WINDOW, timezone.utc)
        headers = {}
        for kind, limit, used in zip(("tokens", "input-tokens", "output-tokens"),
                                     self.limits, self.used, strict=True):
            headers[f"anthropic-ratelimit-{kind}-limit"] = str(limit)
            headers[f"anthropic-ratelimit-{kind}-remaining"] = str(max(limit - used, 0))
            headers[f"anthropic-ratelimit-{kind}-reset"] = reset.isoformat()
        return headers


step = st.tuples(
    st.integers(1, 400), st.integers(1, 400),      # the estimate: input, output
    st.integers(0, 500), st.integers(0, 500),      # the usage: input, output
    # seconds before the next step, binary fractions: the sums land exactly on a window's end
    # (a reset is passed within the coordinator's EPSILON, as a slot is)
    st.sampled_from([0.0, 0.0, 0.0078125, 0.375, 1.125]),
    st.integers(0, 3),                             # answers that come back before it
)


@settings(max_examples=examples(300, cap=2000), deadline=None)
@given(limits=st.tuples(st.integers(500, 3000), st.integers(300, 2000), st.integers(300, 2000)),
       steps=st.lists(step, min_size=1, max_size=60))
def test_a_window_never_admits_more_tokens_than_its_limit(
        limits: tuple[int, int, int],
        steps: list[tuple[int, int, int, int, float, int]]) -> None:
    tried(PROPERTY)
    clock = FakeClock(wall=1_800_000_000.0)
    c = MemoryCoordinator(clock=clock)
    provider = ModelProvider(limits)
    flight: list[tuple[TokenCall, str | None, int, tuple[int, int, int], tuple[int, int, int]]] = []
    admitted = 0
    learned = False  # the limits are known once an answer named them
    for est_in, est_out, use_in, use_out, pause, answers in steps:
        estimate, usage = TokenEstimate(est_in, est_out), TokenUsage(use_in, use_out)
        with token_cost(estimate) as call:
            permit = c.acquire(KEY, 1)
        if permit.wait == 0:
            index = provider.admit(clock.wall(), call.charge)
            if index is None:  # refused: only blind, or larger than a whole window (it goes alone)
                too_large = any(c > limit for c, limit in zip(call.charge, limits, strict=True))
                assert not learned or too_large, (provider.used, call.charge, limits)
                continue
            admitted += learned
            flight.append((call, permit.lease, index, call.charge,
                           (usage.total, usage.input_tokens, usage.output_tokens)))
        for _ in range(min(answers, len(flight))):
            done, lease, index, charge, spent = flight.pop(0)
            headers = provider.answer(clock.wall(), index, charge, spent)
            with token_cost(0) as scope:
                scope.charge, scope.readings = done.charge, {}
                scope.record(200, headers, clock.wall())
                c.learn(KEY, seen(200, headers, profile=ANTHROPIC, wall=clock.wall()), lease)
            learned = True
        clock.advance(pause)
    if admitted > 1:
        reached(PROPERTY, "several requests admitted once the limits were learned, none refused")


def test_the_property_reached_its_checks() -> None:
    assert_reached(PROPERTY, ("several requests admitted once the limits were learned, none refused",))


# Several processes on one Redis, against the sandbox's LLM route ---------------------------


def llm_worker(base_url: str, redis_url: str, prefix: str, run_id: str,
               bodies: list[dict[str, object]], tasks: int, results: object) -> None:
    """One process: ``tasks`` asyncio tasks sending ``bodies`` through an
    :class:`AsyncRetryTransport` over a shared :class:`RedisCoordinator`."""
    import asyncio

    import httpx

    from retrybudget import Policy, Retrier
    from retrybudget.coordination import RedisCoordinator
    from retrybudget.integrations.httpx import AsyncRetryTransport
    from retrybudget.sandbox import RUN_HEADER

    async def main() -> list[int]:
        coordinator = RedisCoordinator(redis_url, prefix=prefix)
        policy = Policy(profile="openai", deadline=60.0, max_attempts=6, retry_writes_with_key=True)
        transport = AsyncRetryTransport(retrier=Retrier(policy=policy, coordinator=coordinator),
                                        generate_idempotency_keys=True)
        queue = list(bodies)
        statuses: list[int] = []
        async with httpx.AsyncClient(transport=transport, timeout=30.0) as client:
            async def worker() -> None:
                while queue:
                    body = queue.pop()
                    answer = await client.post(f"{base_url}/v1/chat/completions", json=body,
                                               headers={RUN_HEADER: run_id})
                    statuses.append(answer.status_code)

            await asyncio.gather(*(worker() for _ in range(tasks)))
        await coordinator.aclose()
        return statuses

    results.put(asyncio.run(main()))  # type: ignore[attr-defined]


def test_processes_sharing_redis_keep_every_window_within_its_token_limit(
        redis_server: object) -> None:
    import multiprocessing
    import random

    import httpx

    from retrybudget.sandbox import LlmLimits, SandboxConfig, serve_in_thread
    from tests.support.coordination import unique_prefix

    processes, tasks, tpm = 3, 8, 12_000
    draw = random.Random(3)
    bodies = []
    for _ in range(48):  # 100 to 1,500 tokens each, about 39,000 in all: four windows or so
        cost = draw.randint(100, 1500)
        bodies.append({"model": "gpt-4o-mini", "max_tokens": cost - cost // 4,
                       "messages": [{"role": "user", "content": "abcd " * (cost // 4 - 6)}]})
    config = SandboxConfig(llm=LlmLimits(rpm=100, tpm=tpm, window_s=1))
    ctx = multiprocessing.get_context("spawn")
    with serve_in_thread(config) as sandbox:
        results = ctx.Queue()
        prefix = unique_prefix()
        procs = [ctx.Process(target=llm_worker, args=(
            sandbox.base_url.rstrip("/"), redis_server.url, prefix, "tokens-fleet",  # type: ignore[attr-defined]
            bodies[i::processes], tasks, results)) for i in range(processes)]
        for p in procs:
            p.start()
        try:
            statuses = [s for _ in procs for s in results.get(timeout=120)]
        finally:
            for p in procs:
                p.join(30)
        report = httpx.get(f"{sandbox.base_url.rstrip('/')}/_llm/tokens-fleet", timeout=10).json()
    assert all(p.exitcode == 0 for p in procs)
    assert statuses == [200] * len(bodies)
    assert report["rejected"] <= 1  # at most the first window's, sent before any answer
    assert all(window["tokens"] <= tpm for window in report["windows"])
    assert len([w for w in report["windows"] if w["tokens"] > 0]) >= 3  # the limit did bind
