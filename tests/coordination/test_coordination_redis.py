"""The Redis coordinator on a real redis-server: processes, faults, clocks, garbage and load."""

from __future__ import annotations

import asyncio
import logging
import math
import multiprocessing
import threading

import pytest
import redis
from prometheus_client import CollectorRegistry, generate_latest

from retrybudget import SYSTEM_CLOCK, FakeClock, Policy, Retrier, WaitReason
from retrybudget.coordination import (
    BreakerConfig,
    ConcurrencyConfig,
    CoordinationConfig,
    GateConfig,
    RedisCoordinator,
)
from retrybudget.coordination._redis_scripts import TEXT
from retrybudget.core.outcome import Reason
from retrybudget.core.profiles import GITHUB
from retrybudget.core.throttle import Throttle
from retrybudget.observe import PrometheusHook
from retrybudget.testing import ScriptedProvider
from tests.support.coordination import (
    Recorder,
    command_calls,
    ended,
    gate_worker,
    goes,
    herd_at_a_gate,
    probe_worker,
    run_threads,
    seen,
    throttled,
    unique_prefix,
)
from tests.support.redis import RedisServer

pytest_plugins = ("tests.support.coordination",)  # the redis_server and own_redis fixtures

KEY = "api.example.com"
OK = {"status": 200, "body": {"ok": True}}
LOGGER = "retrybudget.coordination"
GITHUB_EXACT = GITHUB.derive("github-exact", reset_slack=0)  # resets exactly as named


def stored(server: RedisServer, prefix: str) -> tuple[object, object]:
    """The limit and the window count Redis holds for ``KEY`` under ``prefix``."""
    raw = redis.Redis(unix_socket_path=str(server.socket), socket_timeout=2.0)
    state = raw.hgetall(f"{prefix}{{{KEY}}}:state")
    raw.close()
    return state.get(b"limit"), state.get(b"quota")


def github(clock: FakeClock, remaining: int, reset: int) -> Throttle:
    """A GitHub answer read at ``clock``'s wall: ``remaining`` of 100 until epoch ``reset``."""
    headers = {"x-ratelimit-limit": "100", "x-ratelimit-remaining": str(remaining),
               "x-ratelimit-reset": str(reset)}
    return seen(200, headers, profile=GITHUB_EXACT, wall=clock.wall())


def coordinator(server: RedisServer, **options: object) -> RedisCoordinator:
    options.setdefault("prefix", unique_prefix())
    return RedisCoordinator(server.url, **options)  # type: ignore[arg-type]


def two_workers(server: RedisServer,
                clock: FakeClock) -> tuple[str, RedisCoordinator, RedisCoordinator]:
    """Two coordinators under one prefix, the second counted among the live workers."""
    prefix = unique_prefix()
    a, b = (coordinator(server, clock=clock, prefix=prefix, retry_interval=1.0)
            for _ in range(2))
    b.acquire(KEY, 1)
    return prefix, a, b


def test_the_scripts_are_complete() -> None:
    assert set(TEXT) == {"admit", "acquire", "learn", "spend", "finish", "write", "correct", "begin", "end",
                          "cycle", "settled"}
    assert all("__" not in text for text in TEXT.values())


def test_it_needs_somewhere_to_connect() -> None:
    with pytest.raises(ValueError, match="url"):
        RedisCoordinator()
    with pytest.raises(ValueError, match="on_failure"):
        RedisCoordinator("redis://localhost", on_failure="maybe")  # type: ignore[arg-type]


# Several processes --------------------------------------------------------------------------------


def test_processes_share_one_gate_and_none_goes_before_the_reset(redis_server: RedisServer) -> None:
    ctx = multiprocessing.get_context("spawn")
    n, ops, spread = 4, 3, 0.05
    prefix = unique_prefix()
    barrier, results = ctx.Barrier(n + 1), ctx.Queue()
    procs = [ctx.Process(target=gate_worker,
                         args=(redis_server.url, prefix, KEY, ops, spread, barrier, results))
             for _ in range(n)]
    for p in procs:
        p.start()
    try:
        barrier.wait(60)  # every worker is connected
        setter = RedisCoordinator(redis_server.url, prefix=prefix)
        before = SYSTEM_CLOCK.wall()
        setter.learn(KEY, throttled(600), None)
        barrier.wait(30)  # go
        reports = [results.get(timeout=30) for _ in range(n)]
    finally:
        for p in procs:
            p.join(30)
    assert all(p.exitcode == 0 for p in procs)
    reset = before + 0.6
    times = sorted(t for report in reports for t in report[0])
    assert len(times) == n * ops
    assert all(reason == "ok" for report in reports for reason in report[1])
    assert times[0] >= reset - 1e-5  # no request before the reset (a lower bound: exact)
    named = [report[2] for report in reports]
    # every worker was held for the same instant: the gate's, as each read it after its answer
    # came back (never earlier; later by that answer's trip, generous on a loaded machine)
    assert all(at is not None and at >= reset - 1e-5 for at in named)
    assert max(named) - min(named) < 1.0
    assert sum(report[3] for report in reports) == 0  # all on Redis
    # (the herd's distinct release slots are checked exactly, on the server's plan, by
    # test_coordination_behaviour.py::test_workers_held_at_a_gate_get_distinct_slots)
    setter.close()


def test_one_probe_among_threads_of_several_processes(redis_server: RedisServer) -> None:
    ctx = multiprocessing.get_context("spawn")
    n, threads = 3, 6
    prefix = unique_prefix()
    barrier, results = ctx.Barrier(n + 1), ctx.Queue()
    procs = [ctx.Process(target=probe_worker,
                         args=(redis_server.url, prefix, KEY, threads, barrier, results))
             for _ in range(n)]
    for p in procs:
        p.start()
    try:
        barrier.wait(60)
        config = CoordinationConfig(breaker=BreakerConfig(consecutive_failures=1, cool_down=0.1))
        opener = RedisCoordinator(redis_server.url, prefix=prefix, config=config)
        opener.finish(KEY, ended(Reason.EXHAUSTED), False)
        SYSTEM_CLOCK.sleep(0.15)
        barrier.wait(30)
        reports = [results.get(timeout=30) for _ in range(n)]
    finally:
        for p in procs:
            p.join(30)
    assert sum(r[0] for r in reports) == 1  # probes
    assert sum(r[1] for r in reports) == 1  # admitted at all
    assert sum(r[2] for r in reports) == 0
    opener.close()


# Clocks -------------------------------------------------------------------------------------------


def test_clients_whose_clocks_disagree_still_wait_for_the_same_instant(
    redis_server: RedisServer,
) -> None:
    prefix = unique_prefix()
    now = SYSTEM_CLOCK.wall()
    clocks = [FakeClock(monotonic=5.0, wall=now + 7.0), FakeClock(monotonic=9e5, wall=now - 4.5),
              SYSTEM_CLOCK]
    workers = [RedisCoordinator(redis_server.url, prefix=prefix, clock=c,
                                config=CoordinationConfig(gate=GateConfig(spread=0.0)))
               for c in clocks]
    started = SYSTEM_CLOCK.monotonic()
    workers[0].learn(KEY, throttled(500), None)
    permits = [w.acquire(KEY, 1) for w in workers]
    passed = SYSTEM_CLOCK.monotonic() - started  # measured: the server read its clock inside
    waits = [p.wait for p in permits]
    # clocks 7 s and 4.5 s apart; the waits differ only by the real time between the calls
    assert all(0.5 - passed - 1e-5 <= w <= 0.5 + 1e-5 for w in waits)
    assert max(waits) - min(waits) <= passed + 1e-5
    for clock, permit in zip(clocks, permits, strict=True):
        assert permit.retry_at is not None
        if isinstance(clock, FakeClock):  # each on its own clock: exactly its wall + the wait
            assert permit.retry_at == pytest.approx(clock.wall() + permit.wait, abs=1e-6)
        else:
            ahead = permit.retry_at - clock.wall()
            assert permit.wait - (SYSTEM_CLOCK.monotonic() - started) <= ahead <= permit.wait
    for w in workers:
        w.close()


# Faults -------------------------------------------------------------------------------------------


def test_redis_killed_mid_run_loses_no_operation(own_redis: RedisServer,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    c = coordinator(own_redis, clock=clock, retry_interval=1.0)
    retrier = Retrier(clock=clock, coordinator=c, key=KEY)
    caplog.set_level(logging.INFO, logger=LOGGER)

    def run(n: int) -> list[Reason]:
        return [retrier.call(ScriptedProvider([OK], clock)).reason for _ in range(n)]

    assert run(10) == [Reason.OK] * 10
    assert (c.fallbacks, c.degraded) == (0, False)

    own_redis.stop()
    assert run(20) == [Reason.OK] * 20  # every operation completes, coordinated locally
    assert c.degraded
    assert c.fallbacks == 20 * 2  # admit + acquire, learn + finish of each, answered locally
    warnings = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert len(warnings) == 1  # logged once per transition

    own_redis.start()
    before = c.fallbacks
    run(2)
    assert c.degraded  # not retried before the interval passes on the injected clock
    assert c.fallbacks > before
    clock.advance(1.1)
    assert run(5) == [Reason.OK] * 5
    assert not c.degraded
    after = c.fallbacks
    run(5)
    assert c.fallbacks == after  # back on Redis
    infos = [r for r in caplog.records if r.name == LOGGER and r.levelno == logging.INFO]
    assert len(infos) == 1
    assert c.stats().degraded is False
    c.close()


def test_a_gate_seen_on_redis_still_holds_when_redis_dies(own_redis: RedisServer) -> None:
    prefix = unique_prefix()
    other = coordinator(own_redis, prefix=prefix)
    c = coordinator(own_redis, prefix=prefix)
    started = SYSTEM_CLOCK.monotonic()
    other.learn(KEY, throttled(5000), None)  # learned by another worker
    assert c.acquire(KEY, 1).reason is WaitReason.GATE
    own_redis.stop()
    permit = c.acquire(KEY, 1)
    passed = SYSTEM_CLOCK.monotonic() - started
    assert c.degraded
    assert permit.reason is WaitReason.GATE
    # the gate's end as Redis named it, kept locally: 5 s from the learn, less what passed
    assert 5.0 - passed - 1e-3 <= permit.wait <= 5.0 + 1e-3
    other.close()
    c.close()


def test_a_frozen_redis_times_out_into_the_fallback(own_redis: RedisServer) -> None:
    clock = FakeClock()
    c = coordinator(own_redis, clock=clock, socket_timeout=1.0)
    assert c.admit(KEY).allowed
    own_redis.pause()
    try:
        started = SYSTEM_CLOCK.monotonic()
        assert c.admit(KEY).allowed
        assert c.acquire(KEY, 1).wait == 0
        assert c.spend_retry(KEY) is True
        elapsed = SYSTEM_CLOCK.monotonic() - started
        # one 1 s timeout, then local answers without waiting on Redis (three timeouts would
        # take 3 s; the bound is generous for a loaded machine, and a real-clock one)
        assert elapsed < 2.5
        assert c.degraded
    finally:
        own_redis.resume()
    clock.advance(1.1)
    assert c.admit(KEY).allowed
    assert not c.degraded
    c.close()


def test_on_failure_fail_refuses_new_operations(own_redis: RedisServer) -> None:
    clock = FakeClock()
    c = coordinator(own_redis, clock=clock, on_failure="fail")
    own_redis.stop()
    provider = ScriptedProvider([OK], clock)
    outcome = Retrier(clock=clock, coordinator=c, key=KEY).call(provider)
    assert (outcome.reason, outcome.attempts, provider.count) == (Reason.CIRCUIT_OPEN, 0, 0)
    assert outcome.detail == "coordinator unavailable"
    assert c.stats().refused == 1
    assert c.acquire(KEY, 1).wait == 0  # an operation already admitted finishes locally
    c.close()


async def test_the_async_path_falls_back_and_comes_back(own_redis: RedisServer) -> None:
    clock = FakeClock()
    c = coordinator(own_redis, clock=clock)

    async def fetch() -> str:
        return "ok"

    retrier = Retrier(clock=clock, coordinator=c, key=KEY)
    assert (await retrier.acall(fetch)).reason is Reason.OK
    own_redis.stop()
    assert (await retrier.acall(fetch)).reason is Reason.OK
    assert c.degraded
    assert c.fallbacks > 0
    own_redis.start()
    clock.advance(1.1)
    assert (await retrier.acall(fetch)).reason is Reason.OK
    assert not c.degraded
    await c.aclose()
    c.close()


def test_a_lease_taken_locally_is_given_back_locally(own_redis: RedisServer) -> None:
    clock = FakeClock()
    config = CoordinationConfig(concurrency=ConcurrencyConfig(limit=1))
    c = coordinator(own_redis, clock=clock, config=config)
    own_redis.stop()
    local = c.acquire(KEY, 1)
    assert local.lease
    assert local.lease.startswith("m:")
    own_redis.start()
    clock.advance(1.1)
    remote = c.acquire(KEY, 1)
    assert remote.lease
    assert remote.lease.startswith("r:")
    c.learn(KEY, seen(200), local.lease)
    assert c.local.acquire(KEY, 1).lease  # the local place is free again
    c.learn(KEY, seen(200), remote.lease)
    assert c.acquire(KEY, 1).lease
    c.close()


def test_async_calls_with_only_a_sync_client_run_in_a_thread(redis_server: RedisServer) -> None:
    client = redis_server.client()
    c = RedisCoordinator(client=client, prefix=unique_prefix())
    c.learn(KEY, throttled(300), None)
    permit = asyncio.run(c.aacquire(KEY, 1))
    assert permit.reason is WaitReason.GATE
    assert c.fallbacks == 0
    client.close()


async def test_a_given_async_client_is_used(redis_server: RedisServer) -> None:
    client = redis.asyncio.Redis(unix_socket_path=str(redis_server.socket))
    c = RedisCoordinator(async_client=client, prefix=unique_prefix())
    await c.alearn(KEY, throttled(300), None)
    assert (await c.aacquire(KEY, 1)).reason is WaitReason.GATE
    with pytest.raises(ValueError, match="sync calls"):
        c.acquire(KEY, 1)
    assert (c.fallbacks, c.degraded) == (0, False)
    await client.aclose()


# Events -------------------------------------------------------------------------------------------


def test_only_the_coordinator_that_made_a_transition_reports_it(redis_server: RedisServer) -> None:
    prefix = unique_prefix()
    config = CoordinationConfig(breaker=BreakerConfig(consecutive_failures=1, cool_down=0.1))
    theirs, mine = Recorder(), Recorder()
    a = coordinator(redis_server, prefix=prefix, config=config, events=[theirs])
    b = coordinator(redis_server, prefix=prefix, config=config, events=[mine])
    a.finish(KEY, ended(Reason.EXHAUSTED), False)
    SYSTEM_CLOCK.sleep(0.15)
    assert b.admit(KEY).probe
    b.finish(KEY, ended(Reason.OK), True)
    assert theirs.seen == [(KEY, "open")]
    assert mine.seen == [(KEY, "half_open"), (KEY, "closed")]
    a.close()
    b.close()


def test_each_call_answered_locally_is_reported_as_a_fallback(own_redis: RedisServer) -> None:
    clock = FakeClock()
    events, refusals = Recorder(), Recorder()
    config = CoordinationConfig(breaker=BreakerConfig(consecutive_failures=1))
    c = coordinator(own_redis, clock=clock, config=config, events=[events])
    failing = coordinator(own_redis, clock=clock, on_failure="fail", events=[refusals])
    retrier = Retrier(clock=clock, coordinator=c, key=KEY)
    assert retrier.call(ScriptedProvider([OK], clock)).reason is Reason.OK
    assert events.seen == []
    own_redis.stop()
    assert retrier.call(ScriptedProvider([OK], clock)).reason is Reason.OK
    assert events.seen == [(KEY, "fallback")] * 2  # admit + acquire, learn + finish
    c.finish(KEY, ended(Reason.EXHAUSTED), False)  # the local breaker opens
    assert events.seen[2:] == [(KEY, "fallback"), (KEY, "open")]
    assert not failing.admit(KEY).allowed  # refused, not answered locally
    assert (refusals.seen, failing.fallbacks) == ([], 1)
    c.close()
    failing.close()


def test_prometheus_counts_what_the_coordinator_reports(own_redis: RedisServer) -> None:
    registry = CollectorRegistry()
    hook = PrometheusHook(registry)
    clock = FakeClock()
    config = CoordinationConfig(breaker=BreakerConfig(consecutive_failures=1))
    c = coordinator(own_redis, clock=clock, config=config, events=[hook])
    retrier = Retrier(policy=Policy(max_attempts=2), clock=clock, coordinator=c, key=KEY,
                      hooks=(hook,))
    failing = ScriptedProvider([{"status": 503}], clock)
    assert retrier.call(failing).reason is Reason.EXHAUSTED  # opens the breaker on Redis
    own_redis.stop()
    assert retrier.call(ScriptedProvider([OK], clock)).reason is Reason.OK  # answered locally
    text = generate_latest(registry).decode()
    assert f'retrybudget_breaker_transitions_total{{key="{KEY}",state="open"}} 1.0' in text
    assert f'retrybudget_coordinator_fallbacks_total{{key="{KEY}"}} 2.0' in text
    assert f'retrybudget_operations_total{{key="{KEY}",method="none",outcome="ok"}} 1.0' in text
    c.close()


# Garbage and TTLs ---------------------------------------------------------------------------------


def test_garbage_in_redis_is_treated_as_absent(redis_server: RedisServer) -> None:
    prefix = unique_prefix()
    base = f"{prefix}{{{KEY}}}:"
    config = CoordinationConfig(concurrency=ConcurrencyConfig(limit=2),
                                breaker=BreakerConfig(consecutive_failures=2))
    c = RedisCoordinator(redis_server.url, prefix=prefix, config=config)
    raw = redis_server.client()
    raw.hset(base + "state", mapping={
        "gate": "1e300", "tail": "nan", "herd": "inf", "streak": "-4", "remaining": "lots",
        "limit": "0x10", "reset_at": "-1", "seq": "many", "phase": "open", "open_until": "soon",
        "probe_until": "1e308", "fails": "3.5", "hist": "ab1",
    })
    raw.set(base + "slots", "not a zset")
    raw.hset(base + "budget", mapping={"d:xyz": "1", "w:1": "-5", "junk": "2"})
    raw.set(base + "leases", "not a zset either")

    admission = c.admit(KEY)  # 'open' with a garbage open_until: a probe may go
    assert admission.allowed
    permit = c.acquire(KEY, 1)
    assert permit.wait == 0
    assert permit.lease
    c.learn(KEY, seen(200, {"ratelimit-remaining": "90", "ratelimit-reset": "60"}),
            permit.lease)
    assert isinstance(c.spend_retry(KEY), bool)
    c.finish(KEY, ended(Reason.OK), admission.probe)
    assert c.admit(KEY).allowed
    assert c.fallbacks == 0  # never an error
    raw.hset(base + "state", mapping={"phase": "weird", "hist": "1x1", "fails": "1e20"})
    c.finish(KEY, ended(Reason.EXHAUSTED), False)
    assert c.admit(KEY).allowed  # the history and run were garbage: one failure so far
    assert c.fallbacks == 0
    c.close()
    raw.close()


@pytest.mark.parametrize(("value", "went"), [
    (None, 5), ("0", 0), ("3", 3),
    ("lots", 8), ("-3", 8), ("2.5", 8), ("1e400", 8), ("nan", 8),
])
def test_the_count_is_the_quota_field_and_garbage_in_it_counts_nothing(
    redis_server: RedisServer, value: str | None, went: int,
) -> None:
    c = coordinator(redis_server)
    state = f"{c.prefix}{{{KEY}}}:state"
    raw = redis_server.client()
    c.learn(KEY, seen(200, {"ratelimit-remaining": "5", "ratelimit-limit": "20",
                            "ratelimit-reset": "60"}), None)
    assert raw.hget(state, "quota") == b"5"
    assert 60_000 < raw.pttl(state) <= 1.25 * (600 + 1) * 1000  # extended a quarter further
    if value is not None:
        raw.hset(state, "quota", value)
    assert goes(c, KEY, 8) == went
    assert c.fallbacks == 0
    c.close()
    raw.close()


def test_every_key_has_a_ttl(redis_server: RedisServer) -> None:
    prefix = unique_prefix()
    config = CoordinationConfig(concurrency=ConcurrencyConfig(limit=5),
                                breaker=BreakerConfig(consecutive_failures=1))
    c = RedisCoordinator(redis_server.url, prefix=prefix, config=config)
    c.admit(KEY)
    permit = c.acquire(KEY, 1)
    c.learn(KEY, throttled(2000), None)
    c.acquire(KEY, 1)  # reserves a slot
    c.spend_retry(KEY)
    c.finish(KEY, ended(Reason.EXHAUSTED), False)
    raw = redis_server.client()
    keys = raw.keys(prefix + "*")
    assert {k.decode().rsplit(":", 1)[1] for k in keys} == {"state", "slots", "leases", "budget",
                                                                 "workers"}
    ttls = [raw.pttl(k) for k in keys]
    assert all(0 < ttl <= 1.25 * (600 + 1) * 1000 for ttl in ttls)  # a quarter further at most
    assert permit.lease
    c.close()
    raw.close()


# Load -----------------------------------------------------------------------------------------------


async def test_five_hundred_tasks_on_one_gate_finish_in_bounded_time(
    redis_server: RedisServer,
) -> None:
    spread = 0.004
    c = RedisCoordinator(redis_server.url, prefix=unique_prefix(), socket_timeout=2.0,
                         config=CoordinationConfig(gate=GateConfig(spread=spread, claim_grace=0.1)))
    await herd_at_a_gate(c, KEY, 500, spread, 3000)
    assert c.fallbacks == 0
    await c.aclose()
    c.close()



def test_an_operation_held_at_a_gate_costs_one_round_trip_more_and_does_not_poll(
    redis_server: RedisServer,
) -> None:
    """Held: the admission brings the first acquire (a wait for the gate) and the previous
    operation's settlement, the worker sleeps to its slot and asks once more, then its own
    healthy settlement waits for the next admission: two round trips, however long the wait
    (nothing polls while it waits)."""
    c = RedisCoordinator(redis_server.url, prefix=unique_prefix(), socket_timeout=2.0)
    provider = ScriptedProvider([OK])
    retrier = Retrier(policy=Policy(deadline=10), coordinator=c, key=KEY)

    trips = []
    # the first three load the scripts they have not used yet (a key's first settlement goes
    # at once, the next is held back, the third goes with the admission after it)
    for wait_ms in (50, 50, 50, 50, 400):
        c.learn(KEY, throttled(wait_ms), None)  # a 429 seen elsewhere
        before = command_calls(redis_server)[0]
        outcome = retrier.call(provider)
        trips.append(command_calls(redis_server)[0] - before)
        assert outcome.reason is Reason.OK
        assert [w.reason for w in outcome.waits] == [WaitReason.GATE]
    assert trips[3:] == [2, 2]
    c.close()


def test_while_redis_is_down_each_worker_counts_on_its_share_and_resumes_without_a_blind_window(
    own_redis: RedisServer,
) -> None:
    clock = FakeClock()
    prefix, a, b = two_workers(own_redis, clock)
    first = a.acquire(KEY, 1)  # a sees two live workers, as Redis counts them
    quota = {"ratelimit-limit": "100", "ratelimit-remaining": "40", "ratelimit-reset": "30"}
    a.learn(KEY, seen(200, quota), first.lease)
    own_redis.stop()
    # alone, a counts on its share: half the limit, half of what is left (40 / 2 = 20)
    assert goes(a, KEY, 30) == 20
    assert a.degraded
    # Redis comes back empty: the first call offers what a knew, scaled back to every worker
    own_redis.start()
    clock.advance(1.0)  # a tries Redis again
    assert a.acquire(KEY, 1).wait > 0  # the 20 a sent used up what it knew: held, not blind
    assert not a.degraded
    assert stored(own_redis, prefix) == (b"100", b"0")
    a.close()
    b.close()


def test_while_redis_is_down_a_worker_sends_its_share_of_each_provider_window(
    own_redis: RedisServer,
) -> None:
    clock = FakeClock()
    _, a, b = two_workers(own_redis, clock)
    first = a.acquire(KEY, 1)  # a sees two live workers
    reset = math.floor(clock.wall()) + 30  # GitHub names the window's end as an epoch second
    provider_count = 1
    a.learn(KEY, github(clock, 100 - provider_count, reset), first.lease)
    own_redis.stop()
    # b sends nothing: every answer a gets says more is left than a's share. a still counts
    # each of its own requests, so it stops at its half of the window (50, the first included)
    held = None
    while provider_count < 100:
        permit = a.acquire(KEY, 1)
        if permit.wait > 0:
            held = permit
            break
        provider_count += 1
        a.learn(KEY, github(clock, 100 - provider_count, reset), permit.lease)
    assert a.degraded
    assert provider_count == 50
    # held until the provider's window ends, the instant its reset header names
    assert held is not None
    assert held.reason is WaitReason.PACING
    assert held.retry_at == pytest.approx(reset, abs=1e-6)
    clock.advance(reset - clock.wall() - 0.01)
    assert a.acquire(KEY, 1).wait > 0  # not before
    clock.advance(0.02)
    assert goes(a, KEY, 80) == 50  # a fresh window: the share again, no more
    a.close()
    b.close()


def test_after_an_outage_a_worker_resumes_the_shared_count_at_the_provider_window_end(
    own_redis: RedisServer,
) -> None:
    clock = FakeClock()
    prefix, a, b = two_workers(own_redis, clock)
    first = math.floor(clock.wall()) + 5  # a 5 s window, its end named as an epoch second
    permit = a.acquire(KEY, 1)
    a.learn(KEY, github(clock, 99, first), permit.lease)
    clock.advance(first - clock.wall())  # the next window: two resets show its length
    permit = a.acquire(KEY, 1)
    a.learn(KEY, github(clock, 99, first + 5), permit.lease)
    own_redis.stop()
    went = 0
    while (permit := a.acquire(KEY, 1)).wait == 0:  # a's share of what is left (99 // 2)
        went += 1
        a.learn(KEY, github(clock, 99 - went, first + 5), permit.lease)
    assert (a.degraded, went) == (True, 49)
    own_redis.start()  # empty
    clock.advance(1.5)  # past retry_interval, 3.5 s before the window ends
    a.acquire(KEY, 1)
    assert a.degraded  # no try mid-window: the others may still be spending their shares
    clock.advance(first + 5 - clock.wall())
    permit = a.acquire(KEY, 1)
    assert not a.degraded
    assert permit.wait == 0
    # Redis adopted the window a counted locally, scaled back to both workers: not blind
    assert stored(own_redis, prefix) == (b"100", b"99")
    a.close()
    b.close()


def test_callers_wait_for_the_try_under_way_instead_of_spending_the_window_locally(
    own_redis: RedisServer,
) -> None:
    clock = FakeClock()
    c = coordinator(own_redis, clock=clock, retry_interval=1.0, socket_timeout=5.0)
    c.acquire(KEY, 1)
    own_redis.stop()
    c.acquire(KEY, 1)
    assert c.degraded
    own_redis.start()
    clock.advance(1.1)  # a try is due: the first caller makes it, the others wait for it
    before = c.fallbacks
    barrier = threading.Barrier(8)

    def call(_: int) -> None:
        barrier.wait(10)
        c.acquire(KEY, 1)

    run_threads(8, call)
    assert not c.degraded
    assert c.fallbacks == before  # every one of the 8 was answered by Redis
    c.close()


# Pipelining: the async calls of one loop turn share one round trip -------------------------------


def evalshas(server: RedisServer) -> int:
    """Scripts run by hash on the server so far (each call of a pipeline is one)."""
    raw = redis.Redis(unix_socket_path=str(server.socket), socket_timeout=2.0)
    stats = raw.info("commandstats")
    raw.close()
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


CAPPED = CoordinationConfig(concurrency=ConcurrencyConfig(limit=10))
"""Ten in flight: which of forty simultaneous callers got a place shows each reply's owner."""
QUOTA = {"ratelimit-limit": "1000", "ratelimit-remaining": "900", "ratelimit-reset": "30"}
"""A provider far from its quota: the gate is open, only the cap holds callers."""
CLOSED = "closed.example.com"
"""A key whose gate a 429 closed: its callers in the same pipeline are told to wait."""


async def forty_at_once(c: RedisCoordinator,
                        flushed: RedisServer | None = None) -> tuple[int, int, int, int]:
    """Forty acquires for :data:`KEY` and ten for :data:`CLOSED` started in one loop turn once
    the quota is known (the scripts flushed from ``flushed`` first, when given): each reply is
    its own caller's; (leases, waits, calls for KEY, round trips) of :data:`KEY`'s callers."""
    await c.alearn(KEY, seen(200, QUOTA), None)  # connects, and the gate is open
    await c.aacquire("warm-up", 1)  # the acquire script is loaded
    if flushed is not None:
        raw = flushed.client()
        raw.script_flush()  # gone, as after a restart
        raw.close()
    await c.alearn(CLOSED, throttled(300), None)  # and another key's gate is closed
    before = c.stats()
    keys = [KEY if i % 5 else CLOSED for i in range(50)]  # every fifth caller asks CLOSED
    answers = await asyncio.gather(*(c.aacquire(key, 1) for key in keys))
    after = c.stats()
    permits = [p for key, p in zip(keys, answers, strict=True) if key == KEY]
    assert all(p.reason is WaitReason.GATE and p.wait > 0 and p.lease is None
               for key, p in zip(keys, answers, strict=True) if key == CLOSED)
    leases = {p.lease for p in permits if p.lease}
    assert all((p.lease is None) == (p.wait > 0) for p in permits)
    return (len(leases), sum(p.wait > 0 for p in permits), after.calls - before.calls - 10,
            after.round_trips - before.round_trips)


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipelined", "one-by-one"])
async def test_the_calls_one_loop_turn_makes_share_one_round_trip(
    redis_server: RedisServer, pipeline: bool,
) -> None:
    c = coordinator(redis_server, config=CAPPED, socket_timeout=2.0, pipeline=pipeline)
    scripts_before = evalshas(redis_server)
    leases, waits, calls, trips = await forty_at_once(c)
    assert (leases, waits, calls) == (10, 30, 40)  # each script atomic, each reply its caller's
    assert trips == (1 if pipeline else 50)
    assert evalshas(redis_server) - scripts_before >= 50  # the server still ran every script
    assert c.fallbacks == 0
    await c.aclose()
    c.close()


async def test_a_caller_cancelled_before_its_turn_is_sent_is_left_out(
    redis_server: RedisServer,
) -> None:
    c = coordinator(redis_server, config=CAPPED, socket_timeout=2.0)
    await c.alearn(KEY, seen(200, QUOTA), None)
    before = c.stats().calls
    tasks = [asyncio.create_task(c.aacquire(KEY, 1)) for _ in range(5)]
    await asyncio.sleep(0)  # every task has queued its call; the pipeline goes next turn
    tasks[2].cancel()
    answers = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(answers[2], asyncio.CancelledError)
    assert c.stats().calls - before == 4  # its lease was never taken
    held = await asyncio.gather(*(c.aacquire(KEY, 1) for _ in range(6)))
    assert sum(1 for p in held if p.lease) == 6  # 4 + 6 = the cap: nothing taken for it
    await c.aclose()
    c.close()


async def test_every_caller_of_a_pipeline_whose_redis_died_is_answered_locally(
    own_redis: RedisServer,
) -> None:
    c = coordinator(own_redis, config=CAPPED, socket_timeout=1.0)
    await c.alearn(KEY, seen(200, QUOTA), None)
    own_redis.stop()
    permits = await asyncio.gather(*(c.aacquire(KEY, 1) for _ in range(20)))
    assert c.degraded
    assert c.fallbacks == 20
    assert sum(1 for p in permits if p.lease) == 10  # the local cap, no error, no hang
    await c.aclose()
    c.close()


async def test_scripts_flushed_from_redis_are_loaded_again_for_a_pipeline(
    redis_server: RedisServer,
) -> None:
    c = coordinator(redis_server, config=CAPPED, socket_timeout=2.0)
    leases, waits, calls, trips = await forty_at_once(c, flushed=redis_server)
    assert (leases, waits, calls) == (10, 30, 40)
    assert trips == 3  # refused unknown, the script loaded once, all fifty sent again
    assert c.fallbacks == 0
    await c.aclose()
    c.close()
