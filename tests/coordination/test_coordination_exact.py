"""The coordinator's arithmetic at its edges: the breaker, the retry budget's slices, the
release of held workers by quota, and the answers handed to the flow.

Pure functions of ``coordination/_logic/`` on exact instants; each test kills mutants the
behavioural suites let through (``docs/mutation.md``).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from retrybudget import WaitReason
from retrybudget.coordination import BreakerConfig, GateConfig, PacingConfig, RetryBudgetConfig
from retrybudget.coordination._logic import (
    EPSILON,
    NEVER,
    Breaker,
    Budget,
    Health,
    Phase,
    Schedule,
    Verdict,
    admission_of,
    booked_from,
    breaker_admit,
    breaker_finish,
    budget_deposit,
    budget_withdraw,
    learn,
    permit_of,
    plan_slot,
    release_slot,
)
from retrybudget.core.throttle import Throttle

CFG = BreakerConfig(consecutive_failures=3, failure_ratio=0.5, window=4, min_operations=4,
                    cool_down=30.0, probe_ttl=10.0)

# The breaker --------------------------------------------------------------------------------


def test_an_open_breaker_refuses_until_the_instant_its_cool_down_ends_then_admits_one_probe(
) -> None:
    opened = Breaker(Phase.OPEN, open_until=130.0)
    verdict, b = breaker_admit(opened, 129.5, CFG)
    assert (verdict.allowed, verdict.probe, verdict.retry_in) == (False, False, 0.5)
    assert b == opened
    verdict, b = breaker_admit(opened, 130.0, CFG)  # at the instant: the probe goes
    assert (verdict.allowed, verdict.probe) == (True, True)
    assert (b.phase, b.probe_until) == (Phase.HALF_OPEN, 140.0)


def test_while_the_probe_is_out_everyone_else_is_refused_until_it_lapses() -> None:
    probing = Breaker(Phase.HALF_OPEN, open_until=130.0, probe_until=140.0)
    verdict, b = breaker_admit(probing, 132.0, CFG)
    assert (verdict.allowed, verdict.probe, verdict.retry_in) == (False, False, 8.0)
    assert b == probing
    verdict, b = breaker_admit(probing, 140.0, CFG)  # lapsed at the instant: a new probe
    assert (verdict.allowed, verdict.probe) == (True, True)
    assert b.probe_until == 150.0


def test_only_the_probe_decides_a_half_open_breaker() -> None:
    probing = Breaker(Phase.HALF_OPEN, open_until=130.0, probe_until=140.0)
    # an operation admitted before the breaker opened finishes: nothing changes
    assert breaker_finish(probing, Health.SUCCESS, False, 131.0, CFG) == (probing, False)
    assert breaker_finish(probing, Health.FAILURE, False, 131.0, CFG) == (probing, False)
    # the probe: success closes, failure opens again (and says it just opened), neutral frees it
    assert breaker_finish(probing, Health.SUCCESS, True, 131.0, CFG) == (Breaker(), False)
    assert breaker_finish(probing, Health.FAILURE, True, 131.0, CFG) == (
        Breaker(Phase.OPEN, open_until=161.0), True)
    assert breaker_finish(probing, Health.NEUTRAL, True, 131.0, CFG) == (
        Breaker(Phase.HALF_OPEN, open_until=130.0, probe_until=NEVER), False)


def test_an_open_breaker_ignores_late_finishes() -> None:
    opened = Breaker(Phase.OPEN, open_until=130.0)
    assert breaker_finish(opened, Health.FAILURE, False, 120.0, CFG) == (opened, False)
    assert breaker_finish(opened, Health.SUCCESS, False, 120.0, CFG) == (opened, False)


def test_a_closed_breaker_counts_failures_and_successes_but_not_neutral_outcomes() -> None:
    b = Breaker(failures=1, history="001")
    assert breaker_finish(b, Health.NEUTRAL, False, 1.0, CFG) == (b, False)
    after, opened = breaker_finish(b, Health.SUCCESS, False, 1.0, CFG)
    assert (after.failures, after.history, opened) == (0, "0010", False)


def test_the_failure_ratio_trips_at_half_of_the_window_and_not_below() -> None:
    # window 4, at least 4 operations: one failure in four stays closed, two open it
    after, opened = breaker_finish(Breaker(history="000"), Health.FAILURE, False, 5.0, CFG)
    assert (after.phase, after.history, opened) == (Phase.CLOSED, "0001", False)
    after, opened = breaker_finish(Breaker(history="001"), Health.FAILURE, False, 5.0, CFG)
    assert (after, opened) == (Breaker(Phase.OPEN, open_until=35.0), True)


# The answers the flow gets ------------------------------------------------------------------


def test_a_refused_admission_names_the_instant_on_the_callers_wall_clock() -> None:
    refused = admission_of(Verdict(False, retry_in=4.5), 1000.0)
    assert (refused.allowed, refused.probe, refused.retry_at) == (False, False, 1004.5)
    assert isinstance(refused.detail, str)
    assert refused.detail
    assert admission_of(Verdict(False), 1000.0).retry_at is None
    probe = admission_of(Verdict(True, probe=True), 1000.0)
    assert (probe.allowed, probe.probe, probe.retry_at) == (True, True, None)


def test_a_pacing_permit_names_the_reset_even_when_it_is_under_a_second() -> None:
    paced = permit_of("pace", 0.2, 0.0, None, 1000.0, reset_in=0.5)
    assert (paced.wait, paced.reason, paced.retry_at) == (0.2, WaitReason.PACING, 1000.5)
    assert permit_of("pace", 0.2, 0.0, None, 1000.0).retry_at is None
    gate = permit_of("gate", 3.0, 3.0, None, 1000.0, reset_in=5.0)
    assert (gate.wait, gate.reason, gate.retry_at) == (3.0, WaitReason.GATE, 1005.0)


# Releasing held workers by quota --------------------------------------------------------------


def booked_in_turn(s: Schedule, at: float, quota: int, spread: float, n: int,
                   reserved: Sequence[float] = ()) -> list[float]:
    """The slots of ``n`` held workers booked one after the other in the release at ``at``
    (each slot reserved before the next worker asks), besides ``reserved``."""
    held = sorted(reserved)
    slots = []
    for _ in range(n):
        slot, _ = release_slot(s, at, quota, spread, held)
        bisect.insort(held, slot)
        slots.append(slot)
    return slots


def test_held_workers_are_released_quota_by_quota_one_window_apart() -> None:
    s = Schedule(window=60.0)
    assert booked_in_turn(s, 100.0, 2, 0.5, 5) == [100.0, 100.0, 160.0, 160.0, 220.0]


def test_a_quota_of_one_releases_one_worker_per_window() -> None:
    assert release_slot(Schedule(window=60.0), 100.0, 1, 0.5, [100.0]) == (160.0, 2)


def test_the_first_window_short_of_its_quota_is_filled_before_a_later_one() -> None:
    """Asks again that crowd the release's own window do not push every later window's
    bookings further out: the first window short of its quota gets the next worker."""
    s = Schedule(window=1.0)
    crowded = [100.05] * 5  # asks again, all in the release's window (quota 2)
    assert booked_in_turn(s, 100.0, 2, 0.05, 5, crowded) == [101.0, 101.0, 102.0, 102.0,
                                                             103.0]
    gap = [100.0, 100.0, 101.0, 102.0, 102.0]  # a worker booked into 101 went elsewhere
    assert release_slot(s, 100.0, 2, 0.05, gap) == (101.0, 6)
    assert release_slot(s, 100.0, 2, 0.05, [99.4, 100.0]) == (100.0, 2)  # 99.4: not its
    assert release_slot(s, 100.0, 2, 0.05, [100.0, 100.0, 100.49, 101.0]) == (101.0, 5)
    assert release_slot(s, 100.0, 2, 0.05, [100.0, 100.0, 100.5, 101.0]) == (102.0, 5)


def test_without_a_quota_or_a_window_the_next_worker_asks_again_after_the_spread() -> None:
    assert release_slot(Schedule(window=60.0), 100.0, 0, 0.5, []) == (100.5, 1)
    assert release_slot(Schedule(), 100.0, 2, 0.5, [100.0] * 3) == (100.5, 4)
    assert release_slot(Schedule(), 100.0, 2, 0.5, [100.0]) == (100.0, 2)


def test_before_any_roll_the_first_request_to_the_reset_bounds_the_window_from_below() -> None:
    s = Schedule(first=97.0, reset_at=100.0)
    assert booked_in_turn(s, 100.0, 2, 0.5, 5) == [100.0, 100.0, 103.0, 103.0, 106.0]
    two = [100.0, 100.0]
    assert release_slot(Schedule(first=99.9, reset_at=100.0), 100.0, 2, 0.5, two)[0] == 100.5
    # after a roll, at a gate that is not the reset, or with no first request: one spread
    assert release_slot(Schedule(first=97.0, reset_at=100.0, rolled_at=99.0), 100.0, 2, 0.5,
                        two)[0] == 100.5
    assert release_slot(Schedule(first=97.0, reset_at=90.0), 100.0, 2, 0.5, two)[0] == 100.5
    assert release_slot(Schedule(reset_at=100.0), 100.0, 2, 0.5, two)[0] == 100.5


def test_the_first_acquire_before_any_answer_is_remembered_and_kept_by_a_window() -> None:
    gate = GateConfig(spread=0.5)
    _, s = plan_slot(Schedule(), 10.0, gate, PacingConfig())
    assert s.first == 10.0
    _, s = plan_slot(s, 11.0, gate, PacingConfig())
    assert s.first == 10.0
    named = Throttle(remaining=0, limit=4, reset=2.0)
    assert learn(s, named, 11.0, gate).first == 10.0
    assert learn(s, Throttle(), 11.0, gate).first == NEVER  # the first answer names no window
    _, late = plan_slot(Schedule(answered=True), 12.0, gate, PacingConfig())
    assert late.first == NEVER  # an answer came first: no probe of this window


def test_a_release_counts_the_slots_another_naming_of_its_reset_booked() -> None:
    """Slots booked from half a window before the release on belong to it: a reset named
    again 10 ms later does not book its windows twice."""
    s = Schedule(window=1.0, limit=2, quota=0, reset_at=100.01, gate=NEVER)
    reserved = [100.0, 100.0, 101.0]  # booked by the release at 100.0
    slot, _ = plan_slot(s, 99.5, GateConfig(spread=0.05), PacingConfig(), 0, reserved)
    assert slot == 101.01  # the second window's last place: booked once
    assert booked_from(s, 100.01) == 99.51
    assert booked_from(Schedule(), 100.0) == 100.0 - EPSILON


def test_the_windows_length_follows_the_closest_naming_of_its_reset() -> None:
    """A late first answer names the reset 0.2 s late; an earlier naming of the same reset
    corrects the window's length too, so the release books later windows on 1 s, not 1.2."""
    s = Schedule(rolled_at=100.0, limit=10, quota=10, used=0)
    s = learn(s, Throttle(remaining=9, limit=10, reset=1.2), 100.0, GateConfig())
    assert s.reset_at == 101.2
    assert s.window is not None
    assert abs(s.window - 1.2) < 1e-9
    s = learn(s, Throttle(remaining=8, limit=10, reset=0.95), 100.05, GateConfig())
    assert s.reset_at == 101.0
    assert s.window is not None
    assert abs(s.window - 1.0) < 1e-9
    s = learn(s, Throttle(remaining=7, limit=10, reset=1.0), 100.1, GateConfig())
    assert s.reset_at == 101.0  # a later naming changes neither
    assert abs(s.window - 1.0) < 1e-9


def test_a_window_used_up_closes_the_gate_at_the_earliest_naming_of_its_reset() -> None:
    """Each window's last answer (remaining 0) closes the gate until the reset it names, a
    little later than the naming the held workers' slots were planned on: the gate takes the
    earlier one, so those slots stay ahead of it. A Retry-After of its own still wins."""
    s = Schedule(remaining=1, limit=10, reset_at=101.0, quota=1, used=9)
    last = Throttle(throttled=True, hint=1.05, remaining=0, limit=10, reset=1.05)
    assert learn(s, last, 100.0, GateConfig()).gate == 101.0
    asked = Throttle(throttled=True, hint=2.0, remaining=0, limit=10, reset=1.05)
    assert learn(s, asked, 100.0, GateConfig()).gate == 102.0
    passed = Schedule(remaining=1, limit=10, reset_at=99.9, quota=1, used=9)
    assert learn(passed, last, 100.0, GateConfig()).gate == 101.05  # not a known reset


def test_a_due_slot_the_key_holds_is_booked_into_the_first_window_with_room() -> None:
    """Its holder (its own slot popped) keeps its place while its window has room, and is
    never put over a window already booked full."""
    s = Schedule(window=1.0, limit=2, quota=0, reset_at=100.01, gate=NEVER)
    gate = GateConfig(spread=0.05)
    slot, _ = plan_slot(s, 100.0, gate, PacingConfig(), 0, [100.01, 101.01, 101.01])
    assert slot == 100.01  # the place it left in this window
    slot, _ = plan_slot(s, 100.0, gate, PacingConfig(), 0, [100.01, 100.01, 101.01])
    assert slot == 101.01  # this window is full: the next has room
    slot, _ = plan_slot(s, 100.0, gate, PacingConfig(), 0, [100.01, 100.01, 101.01, 101.01])
    assert slot == 102.01  # both full


# The retry budget's slices ----------------------------------------------------------------------


def test_the_budget_keeps_one_slice_per_tenth_of_its_window() -> None:
    cfg = RetryBudgetConfig(ratio=0.5, min_retries_per_sec=0.3, ttl=10.0)
    b = budget_deposit(budget_deposit(Budget(), 12.1, cfg), 12.9, cfg)
    assert b.slices == ((12, 2, 0),)
    allowed, b = budget_withdraw(b, 12.95, cfg)
    assert allowed
    assert b.slices == ((12, 2, 1),)
    b = budget_deposit(b, 13.0, cfg)
    assert b.slices == ((12, 2, 1), (13, 1, 0))
