"""The memory coordinator under load: many threads with exact counts, thousands of tasks."""

from __future__ import annotations

import threading

from retrybudget import SYSTEM_CLOCK, FakeClock
from retrybudget.coordination import (
    BreakerConfig,
    ConcurrencyConfig,
    CoordinationConfig,
    GateConfig,
    MemoryCoordinator,
    RetryBudgetConfig,
)
from retrybudget.core.outcome import Reason
from test_coordination_support import ended, herd_at_a_gate, run_threads, seen, throttled

KEY = "api.example.com"


def test_many_threads_keep_exact_counts() -> None:
    threads, ops, cap = 32, 200, 8
    config = CoordinationConfig(
        concurrency=ConcurrencyConfig(limit=cap),
        retry_budget=RetryBudgetConfig(ratio=0.5, min_retries_per_sec=0.0, ttl=3600),
        breaker=BreakerConfig(consecutive_failures=threads * ops, failure_ratio=None),
    )
    c = MemoryCoordinator(config, clock=FakeClock())
    lock = threading.Lock()
    in_flight = [0, 0]  # now, most ever
    phase = threading.Barrier(threads)
    ok = seen(200)
    spins = [0]

    def worker(_: int) -> None:
        for _ in range(ops):
            assert c.admit(KEY).allowed
            for _ in range(10_000):
                permit = c.acquire(KEY, 1)
                if permit.wait == 0:
                    break
                with lock:
                    spins[0] += 1
                SYSTEM_CLOCK.sleep(0.0001)
            else:
                raise AssertionError("no place in flight within 10 000 tries")
            with lock:
                in_flight[0] += 1
                in_flight[1] = max(in_flight)
            with lock:  # the "request" is over: leave, then give the lease back
                in_flight[0] -= 1
            c.learn(KEY, ok, permit.lease)
        phase.wait(30)
        for _ in range(ops):
            c.spend_retry(KEY)
        phase.wait(30)
        for _ in range(ops):
            c.finish(KEY, ended(Reason.EXHAUSTED), False)

    run_threads(threads, worker, timeout=60)
    stats = c.stats()
    total = threads * ops
    assert stats.admitted == total
    assert in_flight[1] <= cap
    assert stats.concurrency_waits == spins[0]
    assert (stats.retries_allowed, stats.retries_refused) == (total // 2, total // 2)
    assert stats.breaker_opened == 1  # the last of total failures in a row opened it
    assert not c.admit(KEY).allowed
    for _ in range(cap):  # every lease came back
        assert c.acquire(KEY, 2).lease


async def test_two_thousand_tasks_on_one_gate_finish_in_bounded_time() -> None:
    spread = 0.001
    c = MemoryCoordinator(CoordinationConfig(gate=GateConfig(spread=spread, claim_grace=0.1)))
    await herd_at_a_gate(c, KEY, 2000, spread, 2000)


def test_a_fake_clock_gate_releases_threads_in_slot_order() -> None:
    clock = FakeClock()
    c = MemoryCoordinator(CoordinationConfig(gate=GateConfig(spread=0.1)), clock=clock)
    c.learn(KEY, throttled(1000), None)
    waits = sorted(c.acquire(KEY, 1).wait for _ in range(5))
    assert all(abs(w - (1.0 + 0.1 * i)) < 1e-9 for i, w in enumerate(waits))
    clock.advance(1.0)
    assert c.acquire(KEY, 1).wait == 0
    assert c.acquire(KEY, 1).wait > 0  # the next slot is 0.1 s away
