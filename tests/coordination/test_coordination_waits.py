"""Waits never longer than the provider asked: the slots a short rate limit leads to.

One 429 with a hint of ``h`` seconds closes the gate for ``h``. With the quota unknown, no
wait a ``fail_fast`` caller is answered (nor the ``retry_at`` it would stop with) is longer
than ``h`` plus one ``GateConfig.herd_window`` (the *window* below: the quota is unknown,
so no learned window applies); waiting callers queue ``spread`` apart behind the gate
however many they are. A caller that would not wait for its slot (``fail_fast`` behind a
closed gate, or a slot past its ``max_wait``) reserves nothing: every other caller is told
exactly what it would have been told had the refused one never asked.
"""

from __future__ import annotations

import heapq

from hypothesis import example, given, settings
from hypothesis import strategies as st

from retrybudget import FakeClock, WaitReason
from retrybudget.coordination import (
    CoordinationConfig,
    GateConfig,
    MemoryCoordinator,
    RedisCoordinator,
)
from retrybudget.core.actions import Permit
from tests.support.coordination import throttled, unique_prefix
from tests.support.redis import RedisServer
from tests.support.strategies import assert_reached, examples, reached, tried

pytest_plugins = ("tests.support.coordination",)  # the redis_server fixture

KEY = "api.example.com"
PROP = "waits_bounded"
REDIS_PROP = "waits_bounded_redis"

arrivals = st.lists(
    st.tuples(
        st.one_of(st.just(0.0), st.floats(min_value=0.0, max_value=0.05),
                  st.floats(min_value=0.0, max_value=1.0)),  # time passing before it asks
        st.booleans(),  # fail_fast
        st.one_of(st.none(), st.floats(min_value=0.0, max_value=3.0)),  # its max_wait
    ),
    min_size=1, max_size=80,
)


def refuses(permit: Permit, fail_fast: bool, max_wait: float | None) -> bool:
    """Whether the caller stops rather than take ``permit``'s wait (what the flow decides)."""
    if permit.wait <= 0:
        return False
    return (fail_fast and permit.reason is WaitReason.GATE) or (
        max_wait is not None and permit.wait > max_wait)


@settings(max_examples=examples(300, cap=2000))
# a fail_fast caller refused at the gate while a waiter's slot at the gate's opening was
# already due (within EPSILON): it claimed that slot and gave it back only in the fix
@example(steps=[(0.03988338539600966, False, None), (0.029296875, False, None),
                (0.029718317303766402, False, None), (0.009765625, False, None),
                (0.008238522112563875, False, None), (0.014231467749452512, True, None)],
         at=0, hint_ms=132, spread=0.01, herd_window=0.1)
@given(arrivals, st.integers(min_value=0, max_value=10),
       st.integers(min_value=1, max_value=3000),  # the 429's hint, in milliseconds
       st.sampled_from([0.0, 0.01, 0.05, 0.2]), st.sampled_from([0.0, 0.1, 1.0, 2.5]))
def test_no_wait_exceeds_the_hint_plus_one_window_and_a_refusal_reserves_nothing(
        steps: list[tuple[float, bool, float | None]], at: int, hint_ms: int, spread: float,
        herd_window: float) -> None:
    """Any arrivals, each a caller that fails fast or not, with some ``max_wait`` or none;
    one 429 asking ``h`` before the ``at``-th; callers told to wait come back at their slot.
    Every wait a ``fail_fast`` caller is answered is at most ``h + herd_window``, its
    ``retry_at`` no later either. A second coordinator that never hears the refused callers
    answers everyone else the same."""
    tried(PROP)
    config = CoordinationConfig(gate=GateConfig(spread=spread, herd_window=herd_window),
                                pacing=None)
    clock, twin_clock = FakeClock(), FakeClock()
    c = MemoryCoordinator(config, clock=clock)
    twin = MemoryCoordinator(config, clock=twin_clock)  # hears every caller but the refused
    h = hint_ms / 1000
    bound = h + herd_window + 1e-9
    back: list[tuple[float, int, bool, float | None]] = []  # held: (slot, n, fail_fast, ends)
    throttled_yet = False
    callers = 0

    def ask(fail_fast: bool, max_wait: float | None) -> None:
        nonlocal callers
        callers += 1
        permit = c.acquire(KEY, 1, max_wait=max_wait, fail_fast=fail_fast)
        if throttled_yet and fail_fast:
            assert permit.wait <= bound, (permit, h, herd_window)
            if permit.retry_at is not None:
                assert permit.retry_at <= clock.wall() + bound
            if permit.wait > 0:
                reached(PROP, "waits bounded")
        if refuses(permit, fail_fast, max_wait):
            reached(PROP, "refused")
            return
        assert twin.acquire(KEY, 1, max_wait=max_wait, fail_fast=fail_fast) == permit
        assert twin.schedule(KEY) == c.schedule(KEY)
        if permit.wait > 0:
            now = clock.monotonic()
            ends = None if max_wait is None else now + max_wait  # its deadline, less room
            heapq.heappush(back, (now + permit.wait, callers, fail_fast, ends))

    def advance(seconds: float) -> None:
        end = clock.monotonic() + seconds
        while back and back[0][0] <= end:  # each held caller comes back at its slot
            slot, _, fail_fast, ends = heapq.heappop(back)
            step = max(slot - clock.monotonic(), 0.0)
            clock.advance(step)
            twin_clock.advance(step)
            ask(fail_fast, None if ends is None else max(ends - clock.monotonic(), 0.0))
        step = max(end - clock.monotonic(), 0.0)
        clock.advance(step)
        twin_clock.advance(step)

    for i, (dt, fail_fast, max_wait) in enumerate(steps):
        if i == at:
            c.learn(KEY, throttled(hint_ms), None)
            twin.learn(KEY, throttled(hint_ms), None)
            throttled_yet = True
        advance(dt)
        ask(fail_fast, max_wait)
    advance(h + herd_window + 1.0)  # everyone held comes back


callers = st.lists(
    st.tuples(st.booleans(), st.one_of(st.none(), st.floats(min_value=0.0, max_value=3.0))),
    min_size=1, max_size=40,
)


@settings(max_examples=examples(40, cap=100))
@given(callers, st.integers(min_value=300, max_value=3000),
       st.sampled_from([0.0, 0.01, 0.05, 0.2]), st.sampled_from([0.0, 0.1, 1.0]))
def test_on_redis_no_wait_exceeds_the_hint_plus_one_window_and_a_refusal_writes_nothing(
        redis_server: RedisServer, steps: list[tuple[bool, float | None]], hint_ms: int,
        spread: float, herd_window: float) -> None:
    """The same rule in ``acquire.lua``, on a real redis-server: callers asking one after
    another behind one 429 (the gate at least 0.3 s, so it is still closed as they ask):
    a ``fail_fast`` one is never told to wait longer than ``h + herd_window`` (the server's
    clock only moves on, so a wait can only come out shorter), and a refused one leaves the
    key's state and reserved slots in Redis exactly as they were."""
    tried(REDIS_PROP)
    config = CoordinationConfig(gate=GateConfig(spread=spread, herd_window=herd_window),
                                pacing=None)
    c = RedisCoordinator(redis_server.url, prefix=unique_prefix(), config=config)
    raw = redis_server.client()
    state, slots = f"{c.prefix}{{{KEY}}}:state", f"{c.prefix}{{{KEY}}}:slots"
    try:
        c.learn(KEY, throttled(hint_ms), None)
        bound = hint_ms / 1000 + herd_window + 1e-6
        for fail_fast, max_wait in steps:
            before = raw.hgetall(state), raw.zrange(slots, 0, -1, withscores=True)
            permit = c.acquire(KEY, 1, max_wait=max_wait, fail_fast=fail_fast)
            if fail_fast:
                assert permit.wait <= bound, (permit, hint_ms, herd_window)
                reached(REDIS_PROP, "waits bounded")
            if refuses(permit, fail_fast, max_wait):
                assert (raw.hgetall(state), raw.zrange(slots, 0, -1, withscores=True)) == before
                reached(REDIS_PROP, "refused")
        assert c.fallbacks == 0
    finally:
        c.close()
        raw.close()


def test_the_wait_properties_reached_their_checks() -> None:
    assert_reached(PROP, ("waits bounded", "refused"))
    assert_reached(REDIS_PROP, ("waits bounded", "refused"))
