"""The Redis coordinator's work on the success path, counted by Redis itself.

A coordinated operation that succeeds at once costs one round trip in steady state (its
admission and first acquire, with the previous operation's settlement), and at most 12 Redis
commands, scripts included (INFO commandstats). What tightens the shared state (a throttle, a
quota running low, a failure) still goes at once, and what was held back goes on close.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrybudget import SYSTEM_CLOCK, Policy, Retrier, background
from retrybudget.coordination import ConcurrencyConfig, CoordinationConfig, RedisCoordinator
from retrybudget.coordination._logic import Health, Schedule, pacing_interval
from retrybudget.coordination._settle import aged, deferrable
from retrybudget.core.outcome import Reason
from retrybudget.core.profiles import GITHUB
from retrybudget.core.throttle import Throttle
from retrybudget.testing import ScriptedProvider
from tests.support.coordination import command_calls, unique_prefix
from tests.support.redis import RedisServer
from tests.support.strategies import assert_reached, examples, reached, tried

pytest_plugins = ("tests.support.coordination",)  # the redis_server fixture

KEY = "api.github.com"
COMMANDS_PER_REQUEST = 12


def github(remaining: int, status: int = 200) -> dict[str, object]:
    """A GitHub answer with its quota headers (the window resets in 30 minutes)."""
    reset = str(int(time.time()) + 1800)
    return {"status": status, "headers": {
        "x-ratelimit-limit": "5000", "x-ratelimit-remaining": str(remaining),
        "x-ratelimit-reset": reset, "x-ratelimit-used": str(5000 - remaining),
        "x-ratelimit-resource": "core"}}


def retrier(c: RedisCoordinator) -> Retrier:
    return Retrier(policy=background(profile=GITHUB), coordinator=c, key=KEY)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_sequential_successes_cost_one_round_trip_and_at_most_12_commands_each(
    redis_server: RedisServer, asynchronous: bool,
) -> None:
    c = RedisCoordinator(redis_server.url, prefix=unique_prefix(), socket_timeout=2.0)
    provider = ScriptedProvider([github(4900)])
    r = retrier(c)
    for _ in range(3):  # warm up: connect, load the scripts, the key's first answer
        assert r.call(provider).reason is Reason.OK
    (sent0, ran0), ops = command_calls(redis_server), 40
    if asynchronous:
        async def run() -> None:
            async def fetch() -> object:
                return provider()
            for _ in range(ops):
                assert (await r.acall(fetch)).reason is Reason.OK
        asyncio.run(run())
    else:
        for _ in range(ops):
            assert r.call(provider).reason is Reason.OK
    sent1, ran1 = command_calls(redis_server)
    # + the async client's script loads (its first call of each script)
    assert sent1 - sent0 <= ops + 4
    assert ran1 - ran0 <= COMMANDS_PER_REQUEST * ops
    assert c.fallbacks == 0
    c.close()


def test_a_throttle_closes_the_gate_at_once(redis_server: RedisServer) -> None:
    """A success's settlement waits for the next admission; a 403 with the quota spent goes
    with the operation: another worker is held at once."""
    prefix = unique_prefix()
    a = RedisCoordinator(redis_server.url, prefix=prefix, socket_timeout=2.0)
    b = RedisCoordinator(redis_server.url, prefix=prefix, socket_timeout=2.0)
    r = Retrier(policy=Policy(deadline=0.5, max_attempts=1, profile=GITHUB), coordinator=a,
                key=KEY)
    for _ in range(2):
        assert r.call(ScriptedProvider([github(4900)])).reason is Reason.OK
    assert b.acquire(KEY, 1).wait == 0
    assert r.call(ScriptedProvider([github(0, status=403)])).reason is not Reason.OK
    assert b.acquire(KEY, 1).wait > 60  # the gate closed until the reset, before a's next call
    a.close()
    b.close()


def test_a_low_quota_is_shared_at_once(redis_server: RedisServer) -> None:
    prefix = unique_prefix()
    c = RedisCoordinator(redis_server.url, prefix=prefix, socket_timeout=2.0)
    r = retrier(c)
    for _ in range(2):
        assert r.call(ScriptedProvider([github(4900)])).reason is Reason.OK
    assert r.call(ScriptedProvider([github(100)])).reason is Reason.OK  # 2 % left: paced
    raw = redis_server.client()
    assert raw.hget(f"{prefix}{{{KEY}}}:state", "remaining") == b"100"
    raw.close()
    c.close()


class Worker:
    """A coordinator on its own prefix whose key has had its first answer (a key's first
    settlement goes at once), with a plain client to read what Redis holds."""

    def __init__(self, server: RedisServer) -> None:
        self.prefix = unique_prefix()
        self.c = RedisCoordinator(server.url, prefix=self.prefix, socket_timeout=2.0)
        self.r = retrier(self.c)
        self.raw = server.client()
        assert self.r.call(ScriptedProvider([github(4900)])).reason is Reason.OK
        assert self.in_flight() == 0

    def in_flight(self) -> int:
        return int(self.raw.zcard(f"{self.prefix}{{{KEY}}}:leases"))

    def remaining(self) -> bytes | None:
        value = self.raw.hget(f"{self.prefix}{{{KEY}}}:state", "remaining")
        assert value is None or isinstance(value, bytes)
        return value

    def close(self) -> None:
        self.c.close()
        self.raw.close()


def test_a_held_back_settlement_goes_with_the_next_call_under_its_key_or_on_close(
    redis_server: RedisServer,
) -> None:
    w = Worker(redis_server)
    for remaining in (4899, 4898):
        assert w.r.call(ScriptedProvider([github(remaining)])).reason is Reason.OK
        assert w.in_flight() == 1  # held back: its request counts as in flight
        assert w.remaining() == str(remaining + 1).encode()
    w.c.close()
    assert w.in_flight() == 0
    assert w.remaining() == b"4898"
    assert w.r.call(ScriptedProvider([github(4897)])).reason is Reason.OK
    permit = w.c.acquire(KEY, 1)  # an acquire on its own brings what was held back too
    assert w.remaining() == b"4897"
    assert permit.lease is not None
    assert w.raw.zrange(f"{w.prefix}{{{KEY}}}:leases", 0, -1) == [permit.lease.encode()]
    w.close()


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_settlement_held_back_goes_on_its_own_once_its_worker_is_idle(
    redis_server: RedisServer, asynchronous: bool,
) -> None:
    w = Worker(redis_server)
    provider = ScriptedProvider([github(4899)])
    bound = 10.0  # seconds polled at most: twenty times SETTLE_IDLE, for a loaded machine
    if asynchronous:
        async def run() -> None:
            async def fetch() -> object:
                return provider()
            assert (await w.r.acall(fetch)).reason is Reason.OK
            assert w.in_flight() == 1  # held back
            start = SYSTEM_CLOCK.monotonic()
            while w.in_flight() and SYSTEM_CLOCK.monotonic() - start < bound:
                await SYSTEM_CLOCK.async_sleep(0.02)  # the loop runs its timer meanwhile
            assert w.in_flight() == 0  # sent by the timer, before aclose would send it
            await w.c.aclose()
        asyncio.run(run())
    else:
        assert w.r.call(provider).reason is Reason.OK
        assert w.in_flight() == 1  # held back
        start = SYSTEM_CLOCK.monotonic()
        while w.in_flight() and SYSTEM_CLOCK.monotonic() - start < bound:
            SYSTEM_CLOCK.sleep(0.02)
    assert w.in_flight() == 0
    assert w.remaining() == b"4899"
    w.close()


def test_under_a_concurrency_cap_nothing_is_held_back(redis_server: RedisServer) -> None:
    prefix = unique_prefix()
    config = CoordinationConfig(concurrency=ConcurrencyConfig(limit=1))
    c = RedisCoordinator(redis_server.url, prefix=prefix, config=config, socket_timeout=2.0)
    r = retrier(c)
    raw = redis_server.client()
    for _ in range(3):
        assert r.call(ScriptedProvider([github(4900)])).reason is Reason.OK
        assert raw.zcard(f"{prefix}{{{KEY}}}:leases") == 0  # its slot given back at once
    raw.close()
    c.close()


PROP = "held back"
throttles = st.builds(  # mostly healthy answers, a quarter or so of them low
    Throttle, throttled=st.sampled_from([False, False, False, True]),
    remaining=st.none() | st.integers(0, 50) | st.integers(0, 1000), limit=st.none() | st.integers(1, 5000),
    reset=st.none() | st.floats(0.0, 7200.0))
VERDICTS = [Health.SUCCESS, Health.SUCCESS, Health.SUCCESS, Health.FAILURE, Health.NEUTRAL]
CAPS = [None, None, None, ConcurrencyConfig(limit=3)]


@settings(max_examples=examples(600, cap=2000))  # one small decision: saturated well before
@given(throttles, st.sampled_from(VERDICTS), st.sampled_from([False, False, True]),
       st.sampled_from(CAPS))
def test_only_a_healthy_success_far_from_the_quota_is_held_back(
    throttle: Throttle, verdict: Health, probe: bool, cap: ConcurrencyConfig | None,
) -> None:
    tried(PROP)
    config = CoordinationConfig(concurrency=cap)
    held = deferrable(config, throttle, verdict, probe)
    low = throttle.remaining is not None and throttle.reset is not None and pacing_interval(
        Schedule(remaining=throttle.remaining, limit=throttle.limit, reset_at=throttle.reset),
        0.0, config.pacing) > 0
    assert held == (verdict is Health.SUCCESS and not probe and cap is None
                    and not throttle.throttled and not low)
    reached(PROP, "held back" if held else "sent at once")
    if low:
        reached(PROP, "a low quota sent at once")
    assert not deferrable(config, None, verdict, probe)


@settings(max_examples=examples(300, cap=2000))  # one small function
@given(throttles, st.floats(0.0, 7200.0))
def test_a_held_back_observation_ages(throttle: Throttle, age: float) -> None:
    tried(PROP)
    older = aged(throttle, age)
    if throttle.reset is None:
        assert older == throttle
    elif throttle.reset <= age and age > 0:
        assert older.reset is None  # its window has gone
        assert older.remaining is None
        reached(PROP, "a window gone")
    else:
        assert older.reset == pytest.approx(throttle.reset - age)
        assert older.remaining == throttle.remaining
        reached(PROP, "a reset closer")
    assert older.throttled == throttle.throttled


def test_the_held_back_properties_reached_their_checks() -> None:
    assert_reached(PROP, ("held back", "sent at once", "a low quota sent at once",
                          "a window gone", "a reset closer"))


def test_the_work_benchmark_reports_the_success_path_counts() -> None:
    """``benchmarks/redis_work.py`` runs on its own redis-server and prints the counts the
    docs quote (the same bounds as above; its times are not checked)."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "redis_work.py"), "--requests", "100"],
        capture_output=True, text=True, timeout=120, cwd=root, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict(line.split(":", 1) for line in done.stdout.splitlines() if ":" in line)
    assert float(lines["round trips per request"]) <= 1.05
    assert float(lines["redis commands per request"].split()[0]) <= COMMANDS_PER_REQUEST
