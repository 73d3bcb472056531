"""A send rate learned from throttles that name no quota (``_logic/_learned.py``).

The rules on a fake clock with exact values, a property over any sequence of sends, throttles
and quiet time, and the behaviour on both backends (memory on a fake clock, Redis on a real
``redis-server``): a throttle without quota headers spaces every worker's requests by the
learned rate, the rate climbs back to the peak, and quota headers teach no rate.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from retrybudget import FakeClock
from retrybudget.coordination import CoordinationConfig, Coordinator, GateConfig, PacingConfig
from retrybudget.coordination._logic import (
    NEVER,
    Learned,
    Schedule,
    learned_gap,
    learned_rate,
    plan_slot,
    rate_cut,
    send_counted,
    send_rate,
)
from retrybudget.coordination._logic._learned import (
    BETA,
    CEILING,
    FLOOR,
    FORGET,
    HOLD,
    MARGIN,
    QUIET,
    SCALE,
    STEP,
)
from tests.support.coordination import Backend, seen, throttled
from tests.support.strategies import assert_reached, examples, reached, tried

pytest_plugins = ("tests.support.coordination",)  # the backend and redis_server fixtures

KEY = "api.example.com"
T0 = 1000.0
EXACT = 1e-9
KEEP = 1 - MARGIN
"""The share of the admitted rate a peak keeps."""


def sends(n: int, at: float = T0, s: Learned | None = None) -> Learned:
    """``s`` (a fresh value by default) after ``n`` requests went at ``at``."""
    s = s or Learned()
    for _ in range(n):
        s = send_counted(s, at)
    return s


def recovery(peak: float) -> float:
    """Seconds from a cut back to ``peak`` (CUBIC's ``K``)."""
    k: float = (peak * (1 - BETA) / SCALE) ** (1 / 3)
    return k


# The rules, on a fake clock ---------------------------------------------------------------------


def test_a_throttle_naming_no_quota_cuts_to_beta_of_the_rate_the_provider_admitted() -> None:
    s = rate_cut(sends(25), T0 + 0.3)
    assert s.peak == pytest.approx(24 * KEEP, abs=EXACT)  # 25 went, this one was refused
    assert s.cut == T0 + 0.3
    assert learned_rate(s, T0 + 0.3) == pytest.approx(BETA * 24 * KEEP, abs=EXACT)
    assert learned_gap(s, T0 + 0.3) == pytest.approx(1 / (BETA * 24 * KEEP), abs=EXACT)


def test_before_any_throttle_nothing_is_paced() -> None:
    s = sends(500)
    assert learned_rate(s, T0) is None
    assert learned_gap(s, T0) == 0.0


def test_the_refusals_of_one_burst_each_take_one_off_the_peak_and_cut_once() -> None:
    s = rate_cut(sends(25), T0)
    for n in range(1, 5):  # requests in flight when the first refusal came back
        s = rate_cut(s, T0 + n * 0.01)
        assert s.peak == pytest.approx(24 * KEEP - n, abs=EXACT)
        assert s.cut == T0
    assert learned_rate(s, T0 + 0.04) < BETA * 24 * KEEP


def test_a_throttle_after_the_hold_cuts_again_from_the_rate_reached() -> None:
    s = rate_cut(sends(21), T0)
    assert s.peak == pytest.approx(20 * KEEP, abs=EXACT)
    s = sends(30, T0 + HOLD, s)  # more sent than the rate allowed
    before = learned_rate(s, T0 + HOLD)
    assert before is not None
    s = rate_cut(s, T0 + HOLD)
    assert s.cut == T0 + HOLD
    assert s.peak == pytest.approx(before, abs=EXACT)  # the rate reached, not the 29 sent
    assert learned_rate(s, T0 + HOLD) == pytest.approx(BETA * before, abs=EXACT)


def test_the_rate_climbs_back_to_the_peak_holds_it_then_probes_upward() -> None:
    s = rate_cut(sends(21), T0)
    peak = 20 * KEEP
    k = recovery(peak)
    assert learned_rate(s, T0 + k / 2) == pytest.approx(peak - SCALE * (k / 2) ** 3, abs=EXACT)
    assert learned_rate(s, T0 + k) == pytest.approx(peak, abs=EXACT)
    assert learned_rate(s, T0 + k + QUIET - 0.001) == pytest.approx(peak, abs=EXACT)
    assert learned_rate(s, T0 + k + QUIET + 0.001) == pytest.approx(peak * (1 + STEP), abs=EXACT)
    assert learned_rate(s, T0 + k + 3 * QUIET + 0.001) == pytest.approx(peak * (1 + 3 * STEP),
                                                                         abs=EXACT)
    steps = round((FORGET - 1) / STEP)
    assert learned_rate(s, T0 + k + (steps - 1) * QUIET) is not None
    assert learned_rate(s, T0 + k + steps * QUIET + 0.001) is None  # probed to twice the peak: gone


def test_fewer_than_one_admitted_a_second_teaches_nothing() -> None:
    assert rate_cut(sends(2), T0).peak is None  # 1 admitted, less the margin
    assert rate_cut(Learned(), T0).peak is None
    assert rate_cut(sends(3), T0).peak == pytest.approx(2 * KEEP, abs=EXACT)


def test_the_send_count_slides_over_the_last_second() -> None:
    s = sends(10)
    assert send_rate(s, T0 + 0.5) == 10.0
    s = sends(4, T0 + 1.0, s)  # the next bucket: the earlier one counts for what is inside
    assert send_rate(s, T0 + 1.25) == pytest.approx(4 + 10 * 0.75, abs=EXACT)
    assert send_rate(s, T0 + 2.0) == 4.0
    assert send_rate(s, T0 + 3.5) == 0.0


def test_a_slot_is_spaced_by_the_rate_at_the_slot_before_it() -> None:
    learned = rate_cut(sends(21), T0)
    gate, pacing = GateConfig(), PacingConfig()
    s = Schedule(tail=T0 + 5.0, answered=True)
    slot, _ = plan_slot(s, T0, gate, pacing, learned_gap=learned_gap(learned, s.tail))
    assert slot == pytest.approx(T0 + 5.0 + 1 / (20 * KEEP), abs=EXACT)  # the peak by then
    assert learned_gap(learned, T0) == pytest.approx(1 / (BETA * 20 * KEEP), abs=EXACT)


# The property ------------------------------------------------------------------------------------

EVENTS = st.lists(st.tuples(st.sampled_from(["send", "throttle", "plan"]),
                            st.sampled_from([0.0, 0.001, 0.03, 0.2, 0.9, 1.5, 4.0, 30.0])),
                  max_size=60)


@settings(max_examples=examples(600, cap=3000))  # one small state machine: saturated early
@given(EVENTS, st.integers(0, 40))
@example([("throttle", 0.03)] * 5 + [("plan", 0.2)] * 3, 30)
def test_the_learned_rate_stays_bounded_cuts_by_beta_and_spaces_every_slot(
        events: list[tuple[str, float]], burst: int) -> None:
    """Whatever is sent and refused: the rate is None or within [FLOOR, CEILING]; a throttle
    leaves it at most BETA times the rate at that instant (the learned one, else the rate
    sent), and never higher until time passes; without a throttle it only rises (or is
    forgotten); and a slot planned by the memory coordinator's rule lies at least the
    learned gap after the slot before it."""
    tried("learned rate")
    gate, pacing = GateConfig(spread=0.0), PacingConfig()
    s, now = sends(burst), T0
    schedule = Schedule(answered=True)
    for kind, gap in events:
        before = learned_rate(s, now)
        now += gap
        after_time = learned_rate(s, now)
        if before is not None and after_time is not None and s.cut <= now - gap:
            assert after_time >= before - EXACT  # quiet time only raises it
            reached("learned rate", "rises with quiet time")
        if kind == "send":
            s = send_counted(s, now)
        elif kind == "throttle":
            at_throttle = learned_rate(s, now)
            sent_rate = send_rate(s, now)
            cut = rate_cut(s, now)
            rate = learned_rate(cut, now)
            if rate is not None and cut.cut == now and s.cut != now:
                bound = at_throttle if at_throttle is not None else sent_rate
                assert rate <= BETA * bound + EXACT
                reached("learned rate", "cut by beta")
            elif rate is not None and at_throttle is not None:
                assert rate <= at_throttle + EXACT  # the same burst: never higher
            s = cut
        else:
            previous = schedule.tail
            learned = learned_gap(s, max(now, schedule.tail))
            slot, schedule = plan_slot(schedule, now, gate, pacing, learned_gap=learned)
            if previous != NEVER and learned > 0:
                assert slot - previous >= learned - EXACT
                reached("learned rate", "slot spaced")
        rate = learned_rate(s, now)
        assert rate is None or FLOOR <= rate <= CEILING


def test_the_learned_rate_property_reached_each_check() -> None:
    assert_reached("learned rate", ("rises with quiet time", "cut by beta", "slot spaced"))


# The behaviour, on both backends -----------------------------------------------------------------


def planned(backend: Backend, workers: list[Coordinator], n: int) -> list[float]:
    """The instants (on this test's clock) that ``n`` acquires asked at once, taking turns
    among ``workers``, were told to go at: when each asked plus its wait."""
    out = []
    for i in range(n):
        asked = backend.clock.monotonic()
        out.append(asked + workers[i % len(workers)].acquire(KEY, 1).wait)
    return out


def slack(backend: Backend) -> float:
    """How far a planned instant may stray: 0 on the fake clock; on Redis the time a call took
    (the server read its clock between the test's reading and the answer): generous, a loaded
    machine took over 5 ms, and still well below the 43 ms between the gaps told apart."""
    return EXACT if isinstance(backend.clock, FakeClock) else 0.02


def sent_and_answered(c: Coordinator, n: int) -> None:
    """``n`` requests under ``KEY`` went and were answered 200 without quota headers."""
    for _ in range(n):
        permit = c.acquire(KEY, 1)
        assert permit.wait == 0
        c.learn(KEY, seen(200), permit.lease)


def test_a_throttle_without_quota_headers_spaces_every_worker_by_the_learned_rate(
        backend: Backend) -> None:
    a, b = backend.workers(CoordinationConfig(gate=GateConfig(spread=0.0)), n=2)
    sent_and_answered(a, 11)
    b.learn(KEY, throttled(100), None)  # Retry-After only: 10 admitted in the last second
    backend.sleep(0.1)
    slots = planned(backend, [a, b], 4)
    learned = rate_cut(sends(11), 0.0)  # the same rule, the cut at 0
    for earlier, later in itertools.pairwise(slots):
        # spaced by the rate at the slot before: between the cut rate's gap and the peak's
        assert 1 / 10 - slack(backend) <= later - earlier
        assert later - earlier <= learned_gap(learned, 0.0) + slack(backend)
    assert slots[-1] - slots[0] > 3 / 10 - slack(backend)  # unpaced, all four went at once


def test_the_learned_rate_climbs_back_to_the_peak(backend: Backend) -> None:
    c = backend.one(CoordinationConfig(gate=GateConfig(spread=0.0)))
    sent_and_answered(c, 11)
    c.learn(KEY, throttled(0), None)
    backend.sleep(recovery(10 * KEEP) + 0.05)
    slots = planned(backend, [c], 4)
    for earlier, later in itertools.pairwise(slots):
        assert later - earlier == pytest.approx(1 / (10 * KEEP), abs=slack(backend))  # the peak


def test_a_throttle_with_quota_headers_teaches_no_rate(backend: Backend) -> None:
    c = backend.one(CoordinationConfig(gate=GateConfig(spread=0.0)))
    sent_and_answered(c, 11)
    quota = {"retry-after": "0", "ratelimit-limit": "100", "ratelimit-remaining": "50",
             "ratelimit-reset": "30"}
    c.learn(KEY, seen(429, quota), None)
    assert [c.acquire(KEY, 1).wait for _ in range(5)] == [0.0] * 5  # nothing is low


def test_without_pacing_no_rate_is_learned(backend: Backend) -> None:
    c = backend.one(CoordinationConfig(gate=GateConfig(spread=0.0), pacing=None))
    for _ in range(11):
        c.learn(KEY, seen(200), c.acquire(KEY, 1).lease)
    c.learn(KEY, throttled(0), None)
    assert [c.acquire(KEY, 1).wait for _ in range(5)] == [0.0] * 5


def test_the_memory_backend_plans_the_learned_gaps_exactly() -> None:
    backend = Backend("memory", FakeClock())
    c = backend.one(CoordinationConfig(gate=GateConfig(spread=0.0)))
    sent_and_answered(c, 21)
    c.learn(KEY, throttled(0), None)  # the cut is now: the slots follow the gaps from it
    peak = 20 * KEEP  # 20 admitted; the rate from the cut is CUBIC's
    k = recovery(peak)
    first = 1 / (BETA * peak)
    second = first + 1 / (SCALE * (first - k) ** 3 + peak)
    third = second + 1 / (SCALE * (second - k) ** 3 + peak)
    assert [c.acquire(KEY, 1).wait for _ in range(3)] == pytest.approx(
        [first, second, third], abs=EXACT)


def test_a_fail_fast_caller_is_not_spaced_by_the_learned_rate(backend: Backend) -> None:
    # The gateway's lookups fail fast: a rate inferred from one throttle must not turn them
    # away once the provider's own gate is open (after one 429 a gateway at 100 lookups/s
    # refused nearly every lookup for the rest of the run: the rate was learned at startup).
    c = backend.one(CoordinationConfig(gate=GateConfig(spread=0.0)))
    sent_and_answered(c, 11)
    c.learn(KEY, throttled(0), None)  # Retry-After: 0, no quota: a rate is learned
    permits = [c.acquire(KEY, 1, fail_fast=True) for _ in range(5)]
    assert [p.wait for p in permits] == [0.0] * 5
    assert all(p.lease is not None for p in permits)  # each went, counted in flight
    waiting = c.acquire(KEY, 1)  # a caller that waits is still spaced by the learned rate
    assert waiting.wait > 0
