"""The memory coordinator under load: many threads with exact counts, thousands of tasks."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from retrybudget import SYSTEM_CLOCK, FakeClock, Policy, Retrier
from retrybudget.coordination import (
    BreakerConfig,
    ConcurrencyConfig,
    CoordinationConfig,
    GateConfig,
    MemoryCoordinator,
    PacingConfig,
    RetryBudgetConfig,
)
from retrybudget.core.actions import Permit
from retrybudget.core.outcome import Reason
from tests.support.coordination import (
    Window,
    ended,
    herd_at_a_gate,
    run_threads,
    seen,
    simulate,
    throttled,
)
from tests.support.strategies import assert_reached, examples, reached, tried

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
            c.finish(KEY, ended(Reason.OK), False)  # a healthy operation earns half a retry
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



def test_five_hundred_operations_behind_one_retry_after_all_finish_released_by_quota() -> None:
    """500 concurrent operations (5 s deadline) meet a used-up window (429, Retry-After 1 s)
    of a provider serving 100 per 1 s window: released by each window's quota, all 500 end
    ``ok`` in the five windows that open before the deadline. Virtual time: deterministic."""
    clock = FakeClock()
    c = MemoryCoordinator(clock=clock)
    provider = Window(clock, limit=100, origin=clock.monotonic() - 0.3)  # resets in 0.7 s
    provider.served[0] = 100  # the window open now is used up
    start = clock.monotonic()
    outcomes = simulate(c, clock, provider, 500, Policy(deadline=5.0, max_attempts=5))
    assert Counter(o.reason for o in outcomes) == {Reason.OK: 500}
    assert dict(provider.served) == {0: 100, 1: 100, 2: 100, 3: 100, 4: 100, 5: 100}
    assert set(provider.rejected) == {0}  # only first attempts, before any answer came back
    assert clock.monotonic() - start < 5.0


def test_with_a_fixed_spread_and_no_quota_the_same_herd_would_not_all_finish() -> None:
    """The counterpart: without quota headers the release falls back to one per spread."""
    clock = FakeClock()
    c = MemoryCoordinator(clock=clock)
    provider = Window(clock, limit=100, origin=clock.monotonic() - 0.3)
    provider.served[0] = 100
    quiet = Window.answer

    def bare(self: Window) -> tuple[int, dict[str, str]]:
        status, headers = quiet(self)
        return status, {k: v for k, v in headers.items() if k == "retry-after"}

    provider.answer = bare.__get__(provider)  # type: ignore[method-assign]
    outcomes = simulate(c, clock, provider, 500, Policy(deadline=5.0, max_attempts=5))
    assert Counter(o.reason for o in outcomes)[Reason.OK] < 500


def test_a_subclass_that_answers_an_action_its_own_way_is_asked_through_handle() -> None:
    """The merged first-attempt calls are the memory coordinator's own answers: a subclass
    that overrides any of the flow's actions is asked each action (its override runs)."""
    import retrybudget as rb

    asked: Counter[str] = Counter()

    class Counting(MemoryCoordinator):
        def acquire(self, key: str, attempt: int, write_gap: float = 0.0, *,
                    max_wait: float | None = None, fail_fast: bool = False) -> Any:
            asked["acquire"] += 1
            return super().acquire(key, attempt, write_gap, max_wait=max_wait,
                                   fail_fast=fail_fast)

    assert MemoryCoordinator()._first_calls() is not None
    assert Counting()._first_calls() is None
    for coordinator, expected in ((MemoryCoordinator(clock=FakeClock()), 0),
                                  (Counting(clock=FakeClock()), 2)):
        retrier = rb.Retrier(clock=coordinator.clock, coordinator=coordinator)
        for _ in range(2):
            assert retrier.call(lambda: 42).value == 42
        assert asked["acquire"] == expected
        assert coordinator.stats().admitted == 2


_MERGED_STEPS = st.lists(st.tuples(
    st.sampled_from(["go", "go", "go", "write", "answer", "answer", "again", "plain",
                     "throttled", "advance", "hold", "fail"]),
    st.integers(0, 12), st.sampled_from([0.0, 0.0005, 0.2, 1.5, 40.0])), max_size=40)


@settings(max_examples=examples(150), deadline=None)
@given(steps=_MERGED_STEPS, fail_fast=st.booleans(),
       cap=st.sampled_from([None, 2]), breaker=st.booleans(), probe_unknown=st.booleans())
def test_the_merged_calls_answer_as_the_flows_actions(
        steps: list[tuple[str, int, float]], fail_fast: bool, cap: int | None,
        breaker: bool, probe_unknown: bool) -> None:
    """The two calls a coordinated first attempt is answered by (one admits and acquires, one
    learns and finishes; a healthy key's in a few steps) answer and change the key exactly as
    ``admit`` then ``acquire``, and ``learn`` then ``finish``, do: twin coordinators on twin
    clocks, every answer and the whole key state equal after every step."""
    from retrybudget.core.throttle import Throttle

    tried("merged calls")
    config = CoordinationConfig(
        concurrency=None if cap is None else ConcurrencyConfig(limit=cap),
        breaker=BreakerConfig() if breaker else None,
        pacing=PacingConfig(probe_unknown_limit=probe_unknown))
    twins = [MemoryCoordinator(config, clock=FakeClock()) for _ in range(2)]
    merged, plain = twins
    ok = Retrier(policy=Policy(), clock=FakeClock()).call(lambda: 1)
    failed = Retrier(policy=Policy(max_attempts=1), clock=FakeClock()).call(_raises)
    leases: list[tuple[str | None, bool]] = []
    for kind, n, seconds in steps:
        if kind in ("go", "write"):
            gap = 1.0 if kind == "write" else 0.0
            got = merged._first_gate(KEY, KEY, gap, None if not fail_fast else 5.0, fail_fast)
            admission = plain.admit(KEY)
            permit = (plain.acquire(KEY, 1, gap, max_wait=None if not fail_fast else 5.0,
                                    fail_fast=fail_fast) if admission.allowed else None)
            assert got == (admission, permit)
            if permit is not None and permit.wait <= 0:
                leases.append((permit.lease, admission.probe))
                schedule = merged._keys[KEY].schedule
                reached("merged calls", "a first window" if not schedule.answered
                        else "a counted window" if schedule.quota is not None else "no count")
        elif kind in ("answer", "again") and leases:
            lease, probe = leases.pop(n % len(leases))
            known = plain._keys[KEY].schedule.reset_at  # "again": the known window named again
            reset = (seconds + 1.0 if kind == "answer" or known is None
                     else known - plain.clock.monotonic() + (seconds - 0.2) / 100)
            throttled = n == 0 and kind == "answer"
            throttle = Throttle(throttled=throttled, hint=seconds if throttled else None,
                                remaining=n if kind == "answer" else n % 11, limit=10,
                                reset=reset)
            outcome = failed if throttled else ok
            merged._first_done(KEY, throttle, lease, KEY, outcome, probe)
            plain.learn(KEY, throttle, lease)
            plain.finish(KEY, outcome, probe)
        elif kind == "plain" and leases:  # an answer that names no quota
            lease, probe = leases.pop(n % len(leases))
            merged._first_done(KEY, Throttle(), lease, KEY, ok, probe)
            plain.learn(KEY, Throttle(), lease)
            plain.finish(KEY, ok, probe)
        elif kind == "throttled" and leases:  # a throttle that names no quota: a rate learned
            lease, probe = leases.pop(n % len(leases))
            throttle = Throttle(throttled=True, hint=seconds if n % 2 else None)
            merged._first_done(KEY, throttle, lease, KEY, ok, probe)
            plain.learn(KEY, throttle, lease)
            plain.finish(KEY, ok, probe)
        elif kind == "advance":
            for c in twins:
                c.clock.advance(seconds)  # type: ignore[attr-defined]
        elif kind == "hold":
            for c in twins:
                c.hold(KEY, seconds)
        elif kind == "fail" and leases:
            lease, probe = leases.pop(n % len(leases))
            merged._first_done(KEY, None, lease, KEY, failed, probe)
            plain.learn(KEY, None, lease)
            plain.finish(KEY, failed, probe)
        states = [[(name, k.schedule, k.breaker, k.budget, list(k.slots), dict(k.leases),
                    k.last_write, k.learned) for name, k in sorted(c._keys.items())]
                  for c in twins]
        assert states[0] == states[1]
        assert merged.stats() == plain.stats()


def _raises() -> None:
    raise ConnectionResetError("reset")


def test_the_merged_calls_property_reached_its_checks() -> None:
    assert_reached("merged calls", ("a first window", "a counted window", "no count"))


def _first_gate_as_plain(merged: MemoryCoordinator, plain: MemoryCoordinator) -> Permit:
    """The merged admit and acquire's answer, checked equal to ``admit`` then ``acquire`` on
    the twin; its permit (an admission that goes)."""
    got = merged._first_gate(KEY, KEY, 0.0, None, False)
    want = (plain.admit(KEY), plain.acquire(KEY, 1))
    assert got == want
    assert want[1] is not None
    return want[1]


def test_a_healthy_key_releasing_its_herd_is_answered_as_acquire_answers_it() -> None:
    """A key past its first window (its count not known) whose held workers just claimed the
    slots the gate's opening spread them over, the last within ``EPSILON`` ahead of now: the
    herd is still being released, so a newcomer at that instant is spaced a spread behind
    it, by the merged call as by ``acquire`` (not let go at once as a healthy key's)."""
    from retrybudget.core.throttle import Throttle

    twins = [MemoryCoordinator(clock=FakeClock()) for _ in range(2)]
    merged, plain = twins
    for c in twins:  # answered, no quota named: its window not counted
        first = c.acquire(KEY, 1)
        c.learn(KEY, Throttle(), first.lease)
        c.hold(KEY, 1.0)
    held = [[c.acquire(KEY, 1) for _ in range(2)] for c in twins]
    assert held[0] == held[1]
    waits = [permit.wait for permit in held[0]]
    assert 0 < waits[0] < waits[1]  # spread over the gate's opening
    for c in twins:
        c.clock.advance(waits[1] - 0.0005)  # type: ignore[attr-defined]
    back = [[c.acquire(KEY, 1) for _ in range(2)] for c in twins]
    assert back[0] == back[1]
    assert [permit.wait for permit in back[0]] == [0.0, 0.0]  # both slots due: claimed
    assert _first_gate_as_plain(merged, plain).wait > 0  # spaced behind the herd
    assert merged._keys[KEY].schedule == plain._keys[KEY].schedule


def test_a_key_probed_for_its_unknown_limit_is_answered_as_acquire_answers_it() -> None:
    """With ``PacingConfig(probe_unknown_limit=True)``, a key whose first answer named no
    quota, within its probing second and with a request in flight: the next caller that waits
    is held by the merged call as by ``acquire`` (it is no healthy key's request)."""
    from retrybudget.core.throttle import Throttle

    config = CoordinationConfig(pacing=PacingConfig(probe_unknown_limit=True))
    twins = [MemoryCoordinator(config, clock=FakeClock()) for _ in range(2)]
    merged, plain = twins
    for c in twins:
        first = c.acquire(KEY, 1)
        c.learn(KEY, Throttle(), first.lease)  # answered: no quota named
        c.clock.advance(0.2)  # type: ignore[attr-defined]
        assert c.acquire(KEY, 1).wait == 0  # one in flight, the probe
    assert _first_gate_as_plain(merged, plain).wait > 0  # held while the probe is out
    assert merged._keys[KEY].schedule == plain._keys[KEY].schedule


def test_a_key_whose_count_is_used_up_is_answered_as_acquire_answers_it() -> None:
    """A key past its first window whose count the requests that went have used up (far from
    low, by the provider's last answer): the next request waits for the reset, by the merged
    call as by ``acquire`` (it is no healthy key's request)."""
    from retrybudget.core.throttle import Throttle

    twins = [MemoryCoordinator(clock=FakeClock()) for _ in range(2)]
    merged, plain = twins
    for c in twins:
        first = c.acquire(KEY, 1)
        c.learn(KEY, Throttle(remaining=9, limit=10, reset=600.0), first.lease)
    for _ in range(9):  # the window's nine left, each let go at once
        assert _first_gate_as_plain(merged, plain).wait == 0
    assert merged._keys[KEY].schedule.quota == 0
    assert _first_gate_as_plain(merged, plain).wait > 0  # held for the reset
    assert merged._keys[KEY].schedule == plain._keys[KEY].schedule


def test_a_healthy_keys_2xx_moves_its_counters_as_learn_moves_the_schedule() -> None:
    """A 2xx on a key in its counted window, naming its reset again, is counted in place (no
    schedule built until one is read); a stale count, an earlier naming, a lapsed lease given
    back, another window or another limit: the key changes as ``learn`` then ``finish`` change
    it, every answer and the whole state equal to the twin's after each step (two requests
    still in flight when the provider's count lags the key's own)."""
    from retrybudget.core.throttle import Throttle

    config = CoordinationConfig(concurrency=ConcurrencyConfig(limit=50, lease_ttl=5.0))
    twins = [MemoryCoordinator(config, clock=FakeClock()) for _ in range(2)]
    merged, plain = twins
    ok = Retrier(policy=Policy(), clock=FakeClock()).call(lambda: 1)
    for c in twins:
        first = c.acquire(KEY, 1)
        c.learn(KEY, Throttle(remaining=90, limit=100, reset=600.0), first.lease)
    counted_in_place = 0
    answers = [(80, 100, 600.0), (85, 100, 600.0), (78, 100, 599.5), (60, 100, 593.5),
               (50, 200, 600.0), (40, 100, 100.0), (30, 100, 100.0)]
    for step, (remaining, limit, reset) in enumerate(answers):
        permits = [_first_gate_as_plain(merged, plain) for _ in range(3 if step in (2, 3) else 1)]
        for c in twins:
            c.clock.advance(6.0 if step == 3 else 0.1)  # type: ignore[attr-defined]
        before = merged._keys[KEY]._schedule
        throttle = Throttle(remaining=remaining, limit=limit, reset=reset)
        merged._first_done(KEY, throttle, permits[0].lease, KEY, ok, False)
        plain.learn(KEY, throttle, permits[0].lease)
        plain.finish(KEY, ok, False)
        counted_in_place += merged._keys[KEY]._schedule is before
        assert merged._keys[KEY].schedule == plain._keys[KEY].schedule, step
        assert merged._keys[KEY].leases == plain._keys[KEY].leases, step
        assert merged._keys[KEY].learned == plain._keys[KEY].learned, step
        assert merged._keys[KEY].budget == plain._keys[KEY].budget, step
    # counted in place: the first, the stale count, the earlier naming, the lapsed leases and
    # the second answer in the new window; learnt anew: another limit, another window
    assert counted_in_place == 5
    assert merged.schedule(KEY) == plain.schedule(KEY)
