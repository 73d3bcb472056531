"""Token pacing: every token quota a provider publishes, paced with each request's cost.

The behaviour tests run once per backend (memory on a fake clock, Redis on a real server);
the property drives a coordinator against a model provider that charges each request's
estimate when it arrives and corrects it to the usage when it answers, as the sandbox (and
Anthropic's output quota) do.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from retrybudget import SYSTEM_CLOCK, FakeClock
from retrybudget.coordination import (
    CoordinationConfig,
    Coordinator,
    MemoryCoordinator,
    RedisCoordinator,
    TokenCall,
    current_call,
    llm_request_cost,
    token_cost,
)
from retrybudget.coordination._logic import EPSILON
from retrybudget.core.profiles import ANTHROPIC, OPENAI
from retrybudget.core.tokens import TokenEstimate, TokenUsage
from tests.support.coordination import Backend, seen, token_counts, unique_prefix
from tests.support.redis import RedisServer
from tests.support.strategies import assert_reached, examples, reached, tried

pytest_plugins = ("tests.support.coordination",)

KEY = "api.openai.test"
Charge = tuple[int, int, int]  # tokens, input tokens, output tokens


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


def test_a_charge_goes_only_when_all_of_it_fits_what_the_window_has_left(
        backend: Backend) -> None:
    c = backend.one()
    limits = {"requests": 100, "tokens": 3000}
    with token_cost(TokenEstimate(100, 900)) as call:  # 1,000 tokens a request
        first = c.acquire(KEY, 1)
        answered(c, call, first.lease, 200,
                 openai_headers(limits, {"requests": 1, "tokens": 2500}, 2.0), backend.clock.wall())
        held = c.acquire(KEY, 1)  # 500 left: the window is not full, but 1,000 do not fit
        assert 1.5 < held.wait <= 2.0 + 1e-6  # nothing in flight: until the window's reset
    with token_cost(TokenEstimate(100, 400)):  # 500: exactly what is left
        assert c.acquire(KEY, 1).wait == 0


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


def bare_answer(c: Coordinator, call: TokenCall, lease: str | None, wall: float) -> None:
    """A 2xx learned with no quota header and its body not read yet (a stream)."""
    call.record(200, {}, wall)
    c.learn(KEY, seen(200, {}, profile=OPENAI, wall=wall), lease)


def test_a_usage_read_late_corrects_a_count_no_answer_names(backend: Backend) -> None:
    c = backend.one()
    with token_cost(TokenEstimate(100, 900)) as call:
        permit = c.acquire(KEY, 1)
        bare_answer(c, call, permit.lease, backend.clock.wall())
        assert token_counts(c, KEY, backend.url) == [1000, 100, 900]  # the estimate stands
        assert call.reconcile(TokenUsage(120, 30))
        assert not call.reconcile(TokenUsage(120, 30))  # once
    with token_cost(TokenEstimate(10, 10)):
        c.acquire(KEY, 1)  # on Redis it carries the correction (no round trip of its own)
    assert token_counts(c, KEY, backend.url) == [150 + 20, 120 + 10, 30 + 10]


def first_named(c: Coordinator, call: TokenCall, backend: Backend, reset_in: float) -> None:
    """A first request answered with OpenAI's headers: 1,000 tokens of 3,000 spent."""
    first = c.acquire(KEY, 1)
    answered(c, call, first.lease, 200, openai_headers(
        {"requests": 100, "tokens": 3000}, {"requests": 1, "tokens": 1000}, reset_in),
        backend.clock.wall())


def test_a_usage_read_late_leaves_a_count_an_answer_named(backend: Backend) -> None:
    c = backend.one()
    with token_cost(TokenEstimate(100, 900)) as call:
        first_named(c, call, backend, 2.0)
        second = c.acquire(KEY, 1)
        answered(c, call, second.lease, 200, openai_headers(  # the same window: the provider's
            {"requests": 100, "tokens": 3000}, {"requests": 2, "tokens": 2000}, 2.0),
            backend.clock.wall())
        assert call.reconcile(TokenUsage(120, 30))
    with token_cost(TokenEstimate(10, 10)):
        c.acquire(KEY, 1)
    # tokens: OpenAI named them (the provider's 2,000 stands); input and output it does not
    # name: the usage corrects the second's estimate there
    assert token_counts(c, KEY, backend.url) == [2000 + 20, 200 + 20 + 10, 1800 - 870 + 10]


def test_a_usage_read_late_for_a_window_gone_corrects_nothing_in_the_next(
        backend: Backend) -> None:
    c = backend.one()
    with token_cost(TokenEstimate(100, 900)) as call:
        first_named(c, call, backend, 0.5)
        second = c.acquire(KEY, 1)  # charged in the window the first answer named
        bare_answer(c, call, second.lease, backend.clock.wall())
    backend.sleep(0.6)  # that window resets
    with token_cost(TokenEstimate(10, 10)):
        c.acquire(KEY, 1)  # the next window: its count starts from what is in flight
    assert call.reconcile(TokenUsage(120, 30))
    with token_cost(TokenEstimate(10, 10)):
        c.acquire(KEY, 1)
    assert token_counts(c, KEY, backend.url)[0] == 20 + 20  # the two in flight, uncorrected


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


# The property: a window never admits more tokens than its limit ----------------------------

PROPERTY = "tokens"
REDIS_PROPERTY = "tokens_redis"
WINDOW = 2.0
FITS = "a request admitted once the limits were learned fits what its window has left"
ABOVE = "it fits with a usage above its estimate counted in the window"
BELOW = "it fits with a usage below its estimate counted in the window"
LATER = "it fits in a window after the one the limits were learned in"
CORRECTED = "a usage read after its answer was learned corrected the charge"


class ModelProvider:
    """Fixed windows of ``WINDOW`` seconds from ``origin`` on the wall clock, each limiting
    tokens, input tokens and output tokens, as the sandbox (and Anthropic's output quota) count
    them: a request's estimate is counted when it arrives (a 429 if it does not fit what the
    window has left), and corrected to its usage when it is answered in the same window.

    A request arrives ``latency`` seconds after it went."""

    def __init__(self, limits: Charge, origin: float = 0.0, latency: float = 0.0) -> None:
        self.limits = limits
        self.origin = origin
        self.latency = latency
        self.index = -1
        self.used = [0, 0, 0]
        self.above = self.below = False  # the window counts a usage above / below its estimate

    def left(self, wall: float) -> list[int]:
        """What the window a request sent at ``wall`` arrives in has left, by dimension."""
        index = math.floor((wall + self.latency - self.origin) / WINDOW)
        if index != self.index:
            self.index, self.used, self.above, self.below = index, [0, 0, 0], False, False
        return [limit - used for limit, used in zip(self.limits, self.used, strict=True)]

    def admit(self, wall: float, charge: Charge) -> int | None:
        """The window a request charging ``charge`` is counted in, or None: refused."""
        if any(c > room for c, room in zip(charge, self.left(wall), strict=True)):
            return None
        self.used = [u + c for u, c in zip(self.used, charge, strict=True)]
        return self.index

    def answer(self, wall: float, index: int, charge: Charge, usage: TokenUsage) -> None:
        """The request counted in window ``index`` is answered at ``wall``: spent ``usage``."""
        self.left(wall)
        if self.index != index:
            return
        spent = (usage.total, usage.input_tokens, usage.output_tokens)
        self.used = [max(u + s - c, 0) for u, s, c in zip(self.used, spent, charge, strict=True)]
        self.above |= any(s > c for s, c in zip(spent, charge, strict=True))
        self.below |= any(s < c for s, c in zip(spent, charge, strict=True))

    def headers(self, wall: float) -> dict[str, str]:
        """An answer's quota headers at ``wall`` (Anthropic's, one set per token dimension)."""
        self.left(wall)
        reset = self.origin + (self.index + 1) * WINDOW
        headers = {"retry-after": str(math.ceil(reset - wall))}  # read on a 429 only
        at = datetime.fromtimestamp(reset, timezone.utc).isoformat()
        for kind, limit, used in zip(("tokens", "input-tokens", "output-tokens"),
                                     self.limits, self.used, strict=True):
            headers[f"anthropic-ratelimit-{kind}-limit"] = str(limit)
            headers[f"anthropic-ratelimit-{kind}-remaining"] = str(max(limit - used, 0))
            headers[f"anthropic-ratelimit-{kind}-reset"] = at
        return headers


def answer_attempt(c: Coordinator, charge: Charge, lease: str | None, status: int,
                   headers: dict[str, str], wall: float, usage: TokenUsage | None) -> TokenCall:
    """An attempt that charged ``charge`` answered: recorded on its token call (with the
    usage its body said, if read) and learned, as an integration does; the call, for a usage
    read later (:meth:`TokenCall.reconcile`)."""
    with token_cost(0) as call:
        call.charge = charge
        body = None if usage is None else {"usage": {"input_tokens": usage.input_tokens,
                                                     "output_tokens": usage.output_tokens}}
        call.record(status, headers, wall, body)
        c.learn(KEY, seen(status, headers, profile=ANTHROPIC, wall=wall), lease)
    return call


UNREAD, READ, LATE = 0, 1, 2  # an answer's body: never read, read before it is learned, after
Step = tuple[int, int, int, int, int, bool, float, int]


def drive(c: Coordinator, prop: str, provider: ModelProvider, steps: list[Step],
          wall: Callable[[], float], wait: Callable[[float], None]) -> None:
    """Send each step's request through ``c`` (one that is told to wait is dropped), then
    answer as many of those in flight as the step says, oldest first, then let its pause pass.

    Once an answer has named the limits, every request ``c`` lets go fits what its window has
    left (the estimates of the requests in flight, the usage of those answered, counted as the
    provider counts them), but one that charges more than a whole limit (it goes alone: the
    provider refuses it, once). Before the first answer nothing says the limits: the key's
    first window lets its probe go blind. A body read late (after its answer was learned)
    is read once the step's answers came back (before its pause, and the next step's
    requests): its usage then corrects the charge late (:meth:`TokenCall.reconcile`).

    A bare answer names no quota (its headers stripped on the way): nothing reconciles its
    window's count but its usage, so an answer is bare only when its body is read, and read
    late only when its usage is within its estimate (nothing can count what no one has said
    yet; an estimate whose output is ``max_tokens`` is never below the usage's)."""
    flight: list[tuple[Charge, str | None, int, TokenUsage, int, bool]] = []
    late: list[tuple[TokenCall, TokenUsage]] = []  # bodies read at the end of the step
    learned_in: int | None = None  # the window the limits were first named in
    for est_in, est_out, use_in, use_out, read, bare, pause, answers in steps:
        with token_cost(TokenEstimate(est_in, est_out)) as call:
            permit = c.acquire(KEY, 1)
        charge = call.charge
        if permit.wait == 0:
            now = wall()
            left = provider.left(now)
            alone = any(amount > limit for amount, limit in zip(charge, provider.limits,
                                                                 strict=True))
            if learned_in is not None and not alone:
                assert all(amount <= room for amount, room in zip(charge, left, strict=True)), (
                    provider.used, charge, provider.limits)
                reached(prop, FITS)
                if provider.above:
                    reached(prop, ABOVE)
                if provider.below:
                    reached(prop, BELOW)
                if provider.index > learned_in:
                    reached(prop, LATER)
            index = provider.admit(now, charge)
            if index is None:  # blind, or more than a whole limit: a 429 naming the quotas
                answer_attempt(c, charge, permit.lease, 429, provider.headers(now), now, None)
                learned_in = provider.index if learned_in is None else learned_in
            else:
                flight.append((charge, permit.lease, index, TokenUsage(use_in, use_out), read,
                               bare))
        for _ in range(min(answers, len(flight))):
            charge, lease, index, usage, told, stripped = flight.pop(0)
            spent = (usage.total, usage.input_tokens, usage.output_tokens)
            stripped = stripped and (told == READ or (told == LATE and all(
                s <= c for s, c in zip(spent, charge, strict=True))))
            now = wall()
            provider.answer(now, index, charge, usage)
            call = answer_attempt(c, charge, lease, 200, {} if stripped else provider.headers(now),
                                  now, usage if told == READ else None)
            if told == LATE:
                late.append((call, usage))
            if not stripped:
                learned_in = provider.index if learned_in is None else learned_in
        for call, usage in late:
            if call.reconcile(usage):
                reached(prop, CORRECTED)
        late.clear()
        wait(pause)


limit_sets = st.tuples(st.integers(500, 3000), st.integers(300, 2000), st.integers(300, 2000))


def steps_of(pauses: list[float], most: int) -> st.SearchStrategy[list[Step]]:
    """Up to ``most`` steps, each pausing one of ``pauses`` seconds after it."""
    return st.lists(st.tuples(
        st.integers(1, 400), st.integers(1, 400),  # the estimate: input, output
        st.integers(0, 500), st.integers(0, 500),  # the usage: above or below it
        st.sampled_from([UNREAD, READ, LATE]),     # the answer's body read (its usage told)
        st.booleans(),                             # a bare answer: no quota headers
        st.sampled_from(pauses),
        st.integers(0, 3),                         # answers that come back after it
    ), min_size=1, max_size=most)


# on the fake clock, binary fractions: the sums land exactly on a window's end (a reset is
# passed within the coordinator's EPSILON, as a slot is)
memory_steps = steps_of([0.0, 0.0, 0.0, 0.0078125, 0.375, 1.125], 60)
# in real time, shorter pauses: each example starts a window's end ahead of it (below)
redis_steps = steps_of([0.0, 0.0, 0.0, 0.004, 0.03, 0.15], 30)


@settings(max_examples=examples(300, cap=2000), deadline=None)
@given(limits=limit_sets, steps=memory_steps)
def test_a_window_never_admits_more_tokens_than_its_limit(limits: Charge,
                                                          steps: list[Step]) -> None:
    """For any estimates and usages (above and below them), told with the answer, told late
    or never: no window's tokens exceed the limit an answer named, on the memory coordinator
    and a fake clock."""
    tried(PROPERTY)
    clock = FakeClock(wall=1_800_000_000.0)
    drive(MemoryCoordinator(clock=clock), PROPERTY, ModelProvider(limits), steps, clock.wall,
          clock.advance)


# each example takes real time (its pauses, up to 4.5 s; most far less): 40 take about 10 s
@settings(max_examples=examples(40, cap=60), deadline=None)
@given(limits=limit_sets, steps=redis_steps, ahead=st.sampled_from([0.05, 0.2, 0.5]))
def test_on_redis_a_window_never_admits_more_tokens_than_its_limit(
        redis_server: RedisServer, limits: Charge, steps: list[Step], ahead: float) -> None:
    """The same property on a real redis-server (``lua/tokens.lua``), whose scripts read the
    server's clock: real time passes, the provider's first window ends ``ahead`` seconds after
    the example starts, and a request reaches the provider the coordinator's ``EPSILON``
    after it went (a reset the server's clock passed within ``EPSILON`` is passed)."""
    tried(REDIS_PROPERTY)
    c = RedisCoordinator(redis_server.url, prefix=unique_prefix())
    origin = round(SYSTEM_CLOCK.wall() + ahead, 3) - WINDOW
    try:
        drive(c, REDIS_PROPERTY, ModelProvider(limits, origin, EPSILON), steps,
              SYSTEM_CLOCK.wall, SYSTEM_CLOCK.sleep)
        assert c.fallbacks == 0
    finally:
        c.close()


def test_the_property_reached_its_checks() -> None:
    assert_reached(PROPERTY, (FITS, ABOVE, BELOW, LATER, CORRECTED))


def test_the_redis_property_reached_its_checks() -> None:
    assert_reached(REDIS_PROPERTY, (FITS, ABOVE, BELOW, LATER, CORRECTED))


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
