"""One behavioural suite for every coordination backend (memory, and Redis on a real server).

Each test runs once per backend. Memory runs on a fake clock and every value is exact. Redis
reads its server's clock, so its tests let real time pass; a wait or an instant the server
planned can only come out earlier than on the fake clock, by at most the real time that passed
beyond what the test slept (:meth:`Backend.lateness`, measured, however loaded the machine).
"""

from __future__ import annotations

import threading

import pytest

from retrybudget import SYSTEM_CLOCK, FakeClock, Policy, Retrier, WaitReason
from retrybudget.coordination import (
    BreakerConfig,
    ConcurrencyConfig,
    CoordinationConfig,
    Coordinator,
    GateConfig,
    PacingConfig,
    RetryBudgetConfig,
)
from retrybudget.coordination._logic import FLIGHT_TTL, LEARNED_CONSTANTS, PROBE_PATIENCE
from retrybudget.core.classify import Kind
from retrybudget.core.outcome import Reason
from retrybudget.core.profiles import GENERIC, Profile
from retrybudget.core.throttle import Throttle
from retrybudget.testing import ScriptedProvider, expand_placeholders
from tests.support.coordination import (
    Backend,
    Recorder,
    ended,
    goes,
    run_threads,
    seen,
    throttled,
)

pytest_plugins = ("tests.support.coordination",)  # the backend and redis_server fixtures

KEY = "api.example.com"
OK = {"status": 200, "body": {"ok": True}}


EXACT = 1e-9
"""Float rounding on the fake clock."""
TIME_RESOLUTION = 1e-5
"""Redis's TIME has microseconds; rounding of the values built from it stays below this."""
CLOCK_READS = 0.01
"""A real-clock allowance, on the Redis side only: the test's lateness is measured from our
clock and the plan from the server's, read by different calls in different processes; on a
loaded machine the two were seen up to 2 ms further apart than the lateness measured. The
memory backend, on the fake clock, stays exact."""


class Planned:
    """Equal to what the server planned ``value`` to be when the clock ran as the test slept:
    exactly on the fake clock; on the real one, no later than that and no earlier than the
    lateness measured when compared (the server read its clock at most that much later)."""

    def __init__(self, backend: Backend, value: float) -> None:
        self.backend = backend
        self.value = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (int, float)):
            return NotImplemented
        if isinstance(self.backend.clock, FakeClock):
            return abs(other - self.value) <= EXACT * max(1.0, abs(self.value))
        low = self.value - self.backend.lateness() - CLOCK_READS
        return low <= other <= self.value + TIME_RESOLUTION

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Planned({self.value!r}, late by at most {self.backend.lateness():.4f})"


def approx(backend: Backend, value: float) -> object:
    return Planned(backend, value)


class Spanned(Planned):
    """:class:`Planned` from a span between ``spans`` pairs of the server's clock readings
    (as a window's length bounded by two instants it read): on the real clock each span may
    also have come out longer by up to the lateness, so the value may be that much later."""

    def __init__(self, backend: Backend, value: float, spans: int) -> None:
        super().__init__(backend, value)
        self.spans = spans

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (int, float)) or isinstance(self.backend.clock, FakeClock):
            return super().__eq__(other)
        lateness = self.backend.lateness()
        return (self.value - lateness - CLOCK_READS <= other
                <= self.value + self.spans * (lateness + CLOCK_READS) + TIME_RESOLUTION)

    __hash__ = None  # type: ignore[assignment]


def answered(c: Coordinator, key: str = KEY) -> Coordinator:
    """``c`` after an answer without quota headers came back under ``key``: past the key's
    first window (its probes), and nothing counted."""
    c.learn(key, seen(200), None)
    return c


# The gate ---------------------------------------------------------------------------------------


def test_a_rate_limit_holds_every_worker_until_the_same_instant(backend: Backend) -> None:
    a, b = backend.workers(n=2)
    a.learn(KEY, throttled(300), None)
    permit = b.acquire(KEY, 1)
    assert permit.reason is WaitReason.GATE
    assert permit.wait == approx(backend, 0.3)
    assert permit.retry_at == approx(backend, backend.clock.wall() + 0.3)
    backend.sleep(permit.wait)
    assert b.acquire(KEY, 1).wait == 0


def test_other_keys_are_not_held(backend: Backend) -> None:
    c = backend.one()
    c.learn(KEY, throttled(300), None)
    assert c.acquire("other.example.com", 1).wait == 0


def test_a_gate_is_never_shortened(backend: Backend) -> None:
    c = backend.one()
    c.learn(KEY, throttled(400), None)
    c.learn(KEY, throttled(100), None)
    assert c.acquire(KEY, 1).wait == approx(backend, 0.4)


def test_remaining_zero_with_a_reset_closes_the_gate_on_a_2xx(backend: Backend) -> None:
    c = backend.one()
    c.learn(KEY, seen(200, {"ratelimit-remaining": "0", "ratelimit-reset": "0.3"}), None)
    permit = c.acquire(KEY, 1)
    assert (permit.reason, permit.wait) == (WaitReason.GATE, approx(backend, 0.3))


def test_the_reset_gets_the_profiles_slack(backend: Backend) -> None:
    profile = GENERIC.derive("slack", reset_slack=0.2)
    c = backend.one()
    c.learn(KEY, seen(429, {"ratelimit-remaining": "0", "ratelimit-reset": "0.1"},
                      profile=profile), None)
    assert c.acquire(KEY, 1).wait == approx(backend, 0.3)


def test_a_rate_limit_without_a_hint_uses_the_floor_doubled_on_repeats(backend: Backend) -> None:
    profile = GENERIC.derive("short", rate_limit_floor=0.1, rate_limit_multiplier=2.0)
    c = backend.one(CoordinationConfig(gate=GateConfig(spread=0.0)))
    c.learn(KEY, seen(429, profile=profile), None)
    assert c.acquire(KEY, 1).wait == approx(backend, 0.1)
    backend.sleep(0.1)
    c.learn(KEY, seen(429, profile=profile), None)  # again, right after the gate: a repeat
    assert c.acquire(KEY, 1).wait == approx(backend, 0.2)


def test_the_gate_waits_by_the_operations_profile_not_one_of_its_own(backend: Backend) -> None:
    short = GENERIC.derive("short", rate_limit_floor=0.1)
    c = backend.one()  # the coordinator has no profile setting: the throttle value names it
    c.learn(KEY, seen(429, profile=short), None)
    assert c.acquire(KEY, 1).wait == approx(backend, 0.1)
    c.learn("other", seen(429, profile=GENERIC), None)
    assert c.acquire("other", 1).wait == approx(backend, GENERIC.rate_limit_floor)


def test_workers_held_at_a_gate_get_distinct_slots(backend: Backend) -> None:
    workers = backend.workers(CoordinationConfig(gate=GateConfig(spread=0.05)), n=4)
    workers[0].learn(KEY, throttled(200), None)
    waits = [w.acquire(KEY, 1).wait for w in workers]
    assert waits == [approx(backend, 0.2 + 0.05 * i) for i in range(4)]
    # each comes back for its slot and goes; a newcomer during the release queues behind
    backend.sleep(0.2)
    assert workers[0].acquire(KEY, 1).wait == 0
    late = workers[1].acquire(KEY, 1)
    assert late.reason is WaitReason.PACING
    assert late.wait == approx(backend, 0.2)


def test_the_release_ends_with_the_last_held_worker(backend: Backend) -> None:
    workers = backend.workers(CoordinationConfig(gate=GateConfig(spread=0.1)), n=2)
    workers[0].learn(KEY, throttled(100), None)
    assert [w.acquire(KEY, 1).wait for w in workers] == [approx(backend, 0.1),
                                                          approx(backend, 0.2)]
    backend.sleep(0.1)
    assert workers[0].acquire(KEY, 1).wait == 0  # the first held worker
    queued = workers[0].acquire(KEY, 1)  # a newcomer during the release queues behind it...
    assert (queued.reason, queued.wait) == (WaitReason.PACING, approx(backend, 0.2))
    backend.sleep(0.1)
    assert workers[1].acquire(KEY, 1).wait == 0  # the last held worker
    assert workers[1].acquire(KEY, 1).wait == 0  # ...but did not prolong the release


def test_an_abandoned_slot_lapses(backend: Backend) -> None:
    gate = GateConfig(spread=0.05, claim_grace=0.1)
    a, b = backend.workers(CoordinationConfig(gate=gate), n=2)
    a.learn(KEY, throttled(100), None)
    assert a.acquire(KEY, 1).wait > 0  # reserves the slot at the gate, then gives up
    backend.sleep(0.35)
    assert b.acquire(KEY, 1).wait == 0
    assert b.acquire(KEY, 1).wait == 0  # no queue left behind


def test_fail_fast_operations_stop_at_the_gate_with_zero_attempts(backend: Backend) -> None:
    a, b = backend.workers(n=2)
    a.learn(KEY, throttled(500), None)
    provider = ScriptedProvider([OK], backend.clock)
    retrier = Retrier(policy=Policy(rate_limit="fail_fast", deadline=2), clock=backend.clock,
                      coordinator=b, key=KEY)
    outcome = retrier.call(provider)
    assert (outcome.reason, outcome.attempts, provider.count) == (Reason.RATE_LIMITED, 0, 0)
    assert outcome.retry_at == approx(backend, backend.clock.wall() + 0.5)


def test_a_waiting_operation_goes_after_the_reset(backend: Backend) -> None:
    a, b = backend.workers(n=2)
    gate_at = backend.clock.wall() + 0.2  # read before the gate closes: no later than it
    a.learn(KEY, throttled(200), None)
    provider = ScriptedProvider([OK], backend.clock)
    outcome = Retrier(policy=Policy(deadline=5), clock=backend.clock, coordinator=b,
                      key=KEY).call(provider)
    assert outcome.reason is Reason.OK
    assert [w.reason for w in outcome.waits] == [WaitReason.GATE]
    assert provider.requests[0]["arrival"] >= gate_at - TIME_RESOLUTION


def test_a_gate_past_the_deadline_stops_at_once(backend: Backend) -> None:
    a, b = backend.workers(n=2)
    a.learn(KEY, throttled(5000), None)
    provider = ScriptedProvider([OK], backend.clock)
    outcome = Retrier(policy=Policy(deadline=1), clock=backend.clock, coordinator=b,
                      key=KEY).call(provider)
    assert (outcome.reason, outcome.attempts, outcome.waits) == (Reason.RATE_LIMITED, 0, ())


def test_a_caller_that_would_not_wait_reserves_no_slot(backend: Backend) -> None:
    """Refused callers (fail_fast behind the gate, or a slot past what fits their deadline)
    are told the wait they declined, and book nothing: the next caller that waits gets the
    gate instant itself, as if none of them had asked."""
    c = backend.one(CoordinationConfig(gate=GateConfig(spread=0.05)))
    c.learn(KEY, throttled(300), None)
    refused = [c.acquire(KEY, 1, fail_fast=True) for _ in range(3)]
    refused += [c.acquire(KEY, 1, max_wait=0.1) for _ in range(3)]
    assert [(p.reason, p.wait) for p in refused] == [(WaitReason.GATE, approx(backend, 0.3))] * 6
    assert [c.acquire(KEY, 1, max_wait=5.0).wait for _ in range(2)] == [
        approx(backend, 0.3), approx(backend, 0.35)]


def test_fail_fast_refusals_at_a_gate_leave_no_queue_behind_it(backend: Backend) -> None:
    """A short 429 holds fail_fast operations only until the gate opens: the refused ones
    left no slots, so every operation after it goes at once (no pacing wait)."""
    a, b = backend.workers(CoordinationConfig(gate=GateConfig(spread=0.05)), n=2)
    provider = ScriptedProvider([OK], backend.clock)
    retrier = Retrier(policy=Policy(rate_limit="fail_fast", deadline=2), clock=backend.clock,
                      coordinator=b, key=KEY)
    a.learn(KEY, throttled(200), None)
    held = [retrier.call(provider) for _ in range(5)]
    assert [(o.reason, o.attempts) for o in held] == [(Reason.RATE_LIMITED, 0)] * 5
    backend.sleep(0.2)
    after = [retrier.call(provider) for _ in range(5)]
    assert [(o.reason, o.attempts, o.waits) for o in after] == [(Reason.OK, 1, ())] * 5


def test_a_fail_fast_caller_is_placed_within_one_herd_window(backend: Backend) -> None:
    """Waiting workers held at a gate queue ``spread`` apart however many they are (each
    comes back for its slot); a ``fail_fast`` newcomer during their release is never placed
    more than ``herd_window`` ahead: it shares the window's slots in turn."""
    c = backend.one(CoordinationConfig(gate=GateConfig(spread=0.05, herd_window=0.22)))
    c.learn(KEY, throttled(300), None)
    held = [c.acquire(KEY, 1).wait for _ in range(8)]
    assert held == [approx(backend, 0.3 + 0.05 * i) for i in range(8)]
    backend.sleep(0.3)
    assert c.acquire(KEY, 1).wait == 0  # claims the slot at the gate
    fast = [c.acquire(KEY, 1, fail_fast=True).wait for _ in range(3)]
    # the 4, 5 and 6 slots booked within 0.22 s put each 0.05 further round the window
    assert fast == [approx(backend, w) for w in (0.2, 0.03, 0.08)]
    assert c.acquire(KEY, 1).wait == approx(backend, 0.4)  # a waiting one: behind the last


def test_fail_fast_slots_paced_past_the_reset_lie_within_one_herd_window_of_it(
        backend: Backend) -> None:
    """Paced slots (2 left, no limit named, reset in 0.3 s: 0.15 apart) that run past the
    reset are released from it ``spread`` apart; a ``fail_fast`` caller's within one
    ``herd_window`` of it (beyond, it shares those slots in turn), a waiting one's not."""
    gate = GateConfig(spread=0.05, herd_window=0.1)
    headers = {"ratelimit-remaining": "2", "ratelimit-reset": "0.3"}
    fast, slow = backend.one(CoordinationConfig(gate=gate)), backend.one(
        CoordinationConfig(gate=gate))
    fast.learn(KEY, seen(200, headers), None)
    slow.learn(KEY, seen(200, headers), None)
    waits = [fast.acquire(KEY, 1, fail_fast=True).wait for _ in range(6)]
    assert waits == [0] + [approx(backend, w) for w in (0.15, 0.3, 0.35, 0.4, 0.35)]
    waits = [slow.acquire(KEY, 1).wait for _ in range(6)]
    assert waits == [0] + [approx(backend, w) for w in (0.15, 0.3, 0.35, 0.4, 0.45)]


def test_a_429_seen_by_one_operation_holds_the_next(backend: Backend) -> None:
    c = backend.one()
    script = [{"status": 429, "headers": {"retry-after-ms": "200"}}, OK]
    first = ScriptedProvider(script, backend.clock)
    retrier = Retrier(policy=Policy(deadline=5, rate_limit="fail_fast"), clock=backend.clock,
                      coordinator=c, key=KEY)
    assert retrier.call(first).reason is Reason.RATE_LIMITED
    second = ScriptedProvider([OK], backend.clock)
    assert retrier.call(second).reason is Reason.RATE_LIMITED
    assert second.count == 0


# Pacing -----------------------------------------------------------------------------------------


def low_quota(remaining: int, reset: float, limit: int = 100, *,
              profile: Profile = GENERIC) -> Throttle:
    return seen(200, {"ratelimit-remaining": str(remaining), "ratelimit-limit": str(limit),
                      "ratelimit-reset": str(reset)}, profile=profile)


def test_a_low_quota_spreads_what_is_left_over_the_time_to_reset(backend: Backend) -> None:
    c = backend.one()
    c.learn(KEY, low_quota(2, 1.0), None)
    assert c.acquire(KEY, 1).wait == 0
    permit = c.acquire(KEY, 1)
    assert permit.reason is WaitReason.PACING
    assert permit.wait == approx(backend, 0.5)


def test_pacing_puts_no_slot_past_the_reset(backend: Backend) -> None:
    c = backend.one()
    c.learn(KEY, low_quota(2, 1.0), None)
    waits = [c.acquire(KEY, 1).wait for _ in range(5)]
    # 0.5 apart until the reset; past it the new window's slots are `spread` apart
    assert waits == [0] + [approx(backend, w) for w in (0.5, 1.0, 1.05, 1.1)]


def test_a_quota_above_the_threshold_is_not_paced(backend: Backend) -> None:
    c = backend.one(CoordinationConfig(pacing=PacingConfig(threshold=0.1)))
    c.learn(KEY, low_quota(50, 1.0), None)
    assert [c.acquire(KEY, 1).wait for _ in range(3)] == [0, 0, 0]


def test_pacing_can_be_switched_off(backend: Backend) -> None:
    c = backend.one(CoordinationConfig(pacing=None))
    c.learn(KEY, low_quota(2, 1.0), None)
    assert [c.acquire(KEY, 1).wait for _ in range(3)] == [0, 0, 0]


def test_a_stale_observation_does_not_undo_a_newer_one(backend: Backend) -> None:
    c = backend.one()
    c.learn(KEY, low_quota(1, 1.0), None)
    c.learn(KEY, low_quota(80, 1.0), None)  # overtaken, same window
    c.acquire(KEY, 1)
    assert c.acquire(KEY, 1).wait == approx(backend, 1.0)


@pytest.mark.parametrize("order", ["earlier first", "later first"])
def test_one_reset_named_twice_keeps_the_earlier_naming(backend: Backend, order: str) -> None:
    """Answers name one reset a little apart (an epoch read against a whole-second Date, and
    the time each took to arrive); each naming is at or after the real reset, so the count
    rolls over at the earliest one, whichever came first."""
    c = backend.one(CoordinationConfig(gate=GateConfig(spread=0.05)))
    namings = [low_quota(10, 1.0, limit=20), low_quota(9, 1.6, limit=20)]
    for throttle in namings if order == "earlier first" else namings[::-1]:
        c.learn(KEY, throttle, None)
    assert goes(c, KEY, 10) == 9  # what is left, by the lower remaining
    held = c.acquire(KEY, 1)
    assert held.wait == approx(backend, 1.0)  # not 1.6
    assert held.retry_at == approx(backend, backend.clock.wall() + 1.0)


# The window's quota count --------------------------------------------------------------------


@pytest.mark.parametrize("slack", [0.0, 0.2])
def test_the_count_lets_what_is_left_go_and_releases_the_rest_by_quota_at_the_reset(
    backend: Backend, slack: float,
) -> None:
    profile = GENERIC.derive("slack", reset_slack=slack)
    c = backend.one(CoordinationConfig(gate=GateConfig(spread=0.05)))
    c.learn(KEY, low_quota(10, 1.0, limit=20, profile=profile), None)  # not low: no pacing
    permits = [c.acquire(KEY, 1) for _ in range(35)]
    assert [p.wait for p in permits[:10]] == [0] * 10
    held = permits[10:30]  # the next window's quota: released all at once at the reset
    assert [p.wait for p in held] == [approx(backend, 1.0 + slack)] * 20
    assert {p.reason for p in held} == {WaitReason.PACING}  # no gate...
    reset_at = backend.clock.wall() + 1.0 + slack  # ...but each names the reset
    assert [p.retry_at for p in held] == [approx(backend, reset_at)] * 20
    beyond = permits[30:]  # over the next window's quota: ask again once the release is answered
    assert [p.wait for p in beyond] == [approx(backend, 1.05 + slack)] * 5
    assert c.stats().gate_waits == 0
    assert backend.counted(c, KEY) == 0


@pytest.mark.parametrize("headers", [
    {"ratelimit-remaining": "15", "ratelimit-limit": "20", "ratelimit-reset": "0"},
    {"x-ratelimit-remaining": "15", "x-ratelimit-limit": "20", "x-ratelimit-reset": "{epoch-10}"},
    {"ratelimit-remaining": "15", "ratelimit-limit": "20"},
], ids=["reset-now", "reset-in-the-past", "no-reset"])
def test_an_answer_whose_reset_has_passed_leaves_the_count_alone(
    backend: Backend, headers: dict[str, str],
) -> None:
    c = backend.one()
    c.learn(KEY, low_quota(5, 2.0, limit=20), None)
    wall = SYSTEM_CLOCK.wall()
    c.learn(KEY, seen(200, {k: expand_placeholders(v, wall) for k, v in headers.items()},
                      wall=wall), None)
    assert backend.counted(c, KEY) == 5
    assert goes(c, KEY, 8) == 5


def test_an_answer_without_quota_headers_counts_nothing(backend: Backend) -> None:
    c = backend.one()
    c.learn(KEY, seen(200), None)
    assert goes(c, KEY, 30) == 30  # blind: nothing to count
    assert backend.counted(c, KEY) is None


def test_a_used_up_window_holds_until_the_earliest_naming_of_its_reset(backend: Backend) -> None:
    c = backend.one()
    c.learn(KEY, low_quota(1, 0.5, limit=10), None)
    c.learn(KEY, low_quota(0, 0.55, limit=10), None)  # its last answer names it a little later
    permit = c.acquire(KEY, 1)
    assert permit.reason is WaitReason.GATE
    assert permit.wait == approx(backend, 0.5)  # the slots planned on 0.5 stay ahead of it


def test_a_holder_back_for_its_slot_while_the_key_holds_gets_the_first_window_with_room(
    backend: Backend,
) -> None:
    """Its own window while that has room (it keeps its place there), never one already
    booked full: holders crowding one window would all come back again at the next."""
    c = backend.one()
    c.learn(KEY, low_quota(0, 0.2, limit=2), None)  # used up until the reset (0.2 s)
    held = [c.acquire(KEY, 1) for _ in range(4)]  # two at the reset, two a spread later
    assert all(p.wait > 0 for p in held)
    backend.sleep(0.2)
    sent = [c.acquire(KEY, 1) for _ in range(2)]  # the window opens: two slots claimed
    assert [p.wait for p in sent] == [0, 0]
    c.learn(KEY, low_quota(1, 1.0, limit=2), sent[0].lease)  # names the next reset
    clock = backend.clock

    def slot() -> float:
        return clock.monotonic() + c.acquire(KEY, 1).wait

    ahead = slot()  # a newcomer: booked at the next reset
    backend.sleep(0.05)  # the other two held workers' slots fall due; the count still holds
    back = slot()
    assert abs(back - ahead) < 0.5  # the next window has room: it keeps its place there
    again = slot()  # the second one back: the next window is booked full now
    assert 0.5 < again - back < 1.5  # the window after it
    newcomer = slot()
    assert abs(newcomer - again) < 0.5  # which has room for one more
    assert slot() - again > 0.5  # and then not


def test_a_fresh_key_lets_a_probe_go_and_holds_the_rest_until_an_answer_names_the_quota(
    backend: Backend,
) -> None:
    c = backend.one()
    probe = c.acquire(KEY, 1)
    assert probe.wait == 0
    assert probe.lease
    held = [c.acquire(KEY, 1) for _ in range(5)]  # before any answer: the first window
    assert {(p.reason, p.retry_at) for p in held} == {(WaitReason.PACING, None)}
    assert [p.wait for p in held] == [approx(backend, 0.05)] * 5  # one spread: ask again then
    assert backend.counted(c, KEY) is None  # nothing counted yet
    c.learn(KEY, low_quota(3, 1.0, limit=4), probe.lease)  # the answer names the quota
    backend.sleep(0.05)
    assert goes(c, KEY, 10) == 3  # what the window allows goes; the rest wait for the reset
    late = c.acquire(KEY, 1)
    assert late.reason is WaitReason.PACING
    assert late.retry_at is not None  # held by the count until its reset


def test_before_a_window_rolled_over_the_held_ask_again_a_lower_bound_of_its_length_apart(
    backend: Backend,
) -> None:
    """The probe went at 0 and was counted in the window ending at the named reset (2 s
    later), so that window lasts at least 2 s: beyond the release at the reset, the next
    quota's workers ask again 2 s after it, the next 4 s after it, not all one spread
    after it (their asking again would come at once)."""
    c = backend.one(CoordinationConfig(gate=GateConfig(spread=0.05)))
    probe = c.acquire(KEY, 1)
    assert probe.wait == 0
    c.learn(KEY, low_quota(0, 2.0, limit=4), probe.lease)  # the window is used up until 2 s
    held = [c.acquire(KEY, 1).wait for _ in range(10)]
    assert held[:4] == [approx(backend, 2.0)] * 4  # released by quota at the reset
    # ask again one lower bound later: the probe's acquire to the reset its answer named,
    # two readings of the server's clock
    assert held[4:8] == [Spanned(backend, 4.0, 1)] * 4
    assert held[8:] == [Spanned(backend, 6.0, 2)] * 2


def test_a_first_answer_naming_no_window_bounds_no_window_length(backend: Backend) -> None:
    c = backend.one(CoordinationConfig(gate=GateConfig(spread=0.05)))
    probe = c.acquire(KEY, 1)
    c.learn(KEY, seen(200), probe.lease)  # the first answer: no quota headers
    backend.sleep(1.0)
    c.learn(KEY, low_quota(0, 2.0, limit=4), None)  # the first named window comes later
    held = [c.acquire(KEY, 1).wait for _ in range(6)]
    assert held[:4] == [approx(backend, 2.0)] * 4
    assert held[4:] == [approx(backend, 2.05)] * 2  # one spread: ask again once answered


def test_an_answer_without_quota_headers_ends_the_first_window(backend: Backend) -> None:
    c = backend.one()
    probe = c.acquire(KEY, 1)
    assert c.acquire(KEY, 1).wait > 0
    c.learn(KEY, None, probe.lease)  # the attempt was not made: no answer yet
    probe = c.acquire(KEY, 1)
    assert probe.wait == 0
    assert c.acquire(KEY, 1).wait > 0
    c.learn(KEY, seen(200), probe.lease)  # an answer, with nothing to count
    assert goes(c, KEY, 30) == 30


SPAN = LEARNED_CONSTANTS["SPAN"]
"""How long after its first answer, when that named no quota, a key is still probed (with
``PacingConfig.probe_unknown_limit`` on)."""
PROBING = CoordinationConfig(gate=GateConfig(spread=0.05),
                             pacing=PacingConfig(probe_unknown_limit=True))


@pytest.mark.parametrize(("pacing", "expected"), [
    (PacingConfig(), 30),  # the default: nothing counted, nothing holds them
    (PacingConfig(probe_unknown_limit=True), 1),  # opted in: one at a time for a span
], ids=["default", "opted-in"])
def test_waiting_callers_of_a_key_whose_answer_named_no_quota_go_at_once_unless_opted_in(
    backend: Backend, pacing: PacingConfig, expected: int,
) -> None:
    """By default a key whose first answer named no quota sends its waiting callers at once
    (blind), however many requests are in flight; ``probe_unknown_limit`` holds them to
    ``probes`` in flight for a span."""
    c = backend.one(CoordinationConfig(pacing=pacing))
    probe = c.acquire(KEY, 1)
    assert c.acquire(KEY, 1, max_wait=5.0).wait > 0  # the first window: only the probe goes
    c.learn(KEY, seen(200), probe.lease)
    went = [c.acquire(KEY, 1, max_wait=5.0) for _ in range(30)]  # callers that would wait
    assert sum(permit.wait == 0 for permit in went) == expected
    assert all(permit.lease for permit in went[:expected])


def test_with_probe_unknown_limit_an_answer_without_quota_headers_starts_a_span_of_probing(
    backend: Backend,
) -> None:
    c = backend.one(PROBING)
    probe = c.acquire(KEY, 1)
    assert c.acquire(KEY, 1).wait > 0
    c.learn(KEY, seen(200), probe.lease)  # an answer, with nothing to count
    assert goes(c, KEY, 30) == 1  # callers that wait: one at a time for a span
    assert sum(c.acquire(KEY, 1, fail_fast=True).wait == 0 for _ in range(5)) == 5
    backend.sleep(SPAN)
    assert goes(c, KEY, 30) == 30  # then blind


def test_a_key_whose_answers_name_no_quota_is_probed_one_request_at_a_time_for_a_span(
    backend: Backend,
) -> None:
    """With ``probe_unknown_limit`` on, after a first answer that named no quota, a caller
    that waits goes while nothing else is in flight, for a span: the first throttle then
    refuses only the request that found the limit. Held, it asks again one spread later; an
    answer frees the next."""
    c = backend.one(PROBING)
    probe = c.acquire(KEY, 1)
    c.learn(KEY, seen(200), probe.lease)
    first = c.acquire(KEY, 1)
    assert (first.wait, bool(first.lease)) == (0, True)
    held = c.acquire(KEY, 1)
    assert (held.reason, held.wait, held.retry_at) == (
        WaitReason.PACING, approx(backend, 0.05), None)
    # a caller whose deadline leaves less than a spread goes: a guess does not end it
    close = c.acquire(KEY, 1, max_wait=0.04)
    assert (close.wait, bool(close.lease)) == (0, True)
    c.learn(KEY, seen(200), close.lease)
    c.learn(KEY, seen(200), first.lease)  # answered: the held caller goes at its slot
    backend.sleep(0.05)
    again = c.acquire(KEY, 1)
    assert (again.wait, bool(again.lease)) == (0, True)
    assert c.acquire(KEY, 1).reason is WaitReason.PACING  # and is waited for in turn
    backend.sleep(SPAN)
    assert goes(c, KEY, 10) == 10


def test_a_throttle_ends_the_probing_the_gate_and_the_learned_rate_take_over(
    backend: Backend,
) -> None:
    c = backend.one(PROBING)
    probe = c.acquire(KEY, 1)
    c.learn(KEY, seen(200), probe.lease)
    assert c.acquire(KEY, 1).wait == 0  # in flight, never answered
    c.learn(KEY, throttled(100), None)  # a throttle: its gate holds everyone
    backend.sleep(0.1)
    assert goes(c, KEY, 5) == 5  # within the span, not held by the request in flight


def test_a_first_answer_naming_a_quota_is_counted_not_probed(backend: Backend) -> None:
    c = backend.one(PROBING)
    probe = c.acquire(KEY, 1)
    c.learn(KEY, low_quota(50, 10.0, limit=100), probe.lease)
    assert goes(c, KEY, 8) == 8  # what the count allows goes, one in flight or many


@pytest.mark.parametrize(("probes", "expected"), [(0, 30), (1, 1), (4, 4)])
def test_the_probe_set_is_the_pacing_configs(backend: Backend, probes: int,
                                             expected: int) -> None:
    c = backend.one(CoordinationConfig(pacing=PacingConfig(probes=probes)))
    assert goes(c, KEY, 30) == expected  # 0: the first window is sent blind


def test_a_fresh_key_holds_other_workers_too(backend: Backend) -> None:
    a, b = backend.workers(n=2)
    assert a.acquire(KEY, 1).wait == 0
    assert b.acquire(KEY, 1).reason is WaitReason.PACING  # shared: one probe for all


def test_a_first_window_probe_whose_holder_died_holds_the_others_only_for_the_patience(
    backend: Backend,
) -> None:
    a, b = backend.workers(n=2)
    assert a.acquire(KEY, 1).lease  # the key's probe; its holder dies, no answer ever comes
    assert b.acquire(KEY, 1).reason is WaitReason.PACING
    backend.sleep(PROBE_PATIENCE)
    again = b.acquire(KEY, 1)  # the dead probe stalls no one longer: another probe goes
    assert (again.wait, bool(again.lease)) == (0, True)
    assert b.acquire(KEY, 1).reason is WaitReason.PACING  # and is waited for in turn
    b.learn(KEY, seen(200), again.lease)  # its answer ends the first window
    assert goes(b, KEY, 5) == 5


def test_after_the_reset_the_count_starts_from_the_limit_less_what_is_in_flight(
    backend: Backend,
) -> None:
    c = backend.one()
    c.learn(KEY, low_quota(3, 0.2, limit=20), None)
    assert goes(c, KEY, 4) == 3  # three in flight (never answered), the fourth held
    backend.sleep(0.2)
    assert c.acquire(KEY, 1).wait == 0  # the held worker comes back for its slot
    assert backend.counted(c, KEY) == 20 - 3 - 1
    # the count still holds, though the new window's reset is unknown: the answers of the
    # requests in flight will name it, so what is over the count asks again one spread later
    assert goes(c, KEY, 20) == 16
    assert backend.counted(c, KEY) == 0
    held = c.acquire(KEY, 1)
    assert (held.reason, held.wait, held.retry_at) == (
        WaitReason.PACING, approx(backend, GateConfig().spread), None)
    c.learn(KEY, low_quota(8, 1.0, limit=20), None)
    assert backend.counted(c, KEY) == 0  # 8 left, 20 in flight: each counted once


def test_a_slot_that_falls_due_once_the_count_is_used_up_waits_for_the_reset(
    backend: Backend,
) -> None:
    c = backend.one()
    no_limit = {"ratelimit-reset": "0.4"}  # without a limit, in-flight requests count against
    c.learn(KEY, seen(200, {"ratelimit-remaining": "2", **no_limit}), None)  # low: 0.2 s apart
    assert c.acquire(KEY, 1).wait == 0  # in flight
    assert c.acquire(KEY, 1).wait == approx(backend, 0.2)
    c.learn(KEY, seen(200, {"ratelimit-remaining": "1", **no_limit}), None)  # 1 in flight: 0
    backend.sleep(0.2)
    late = c.acquire(KEY, 1)  # back for its slot, which the count no longer allows
    assert (late.reason, late.wait) == (WaitReason.PACING, approx(backend, 0.2))
    assert late.retry_at == approx(backend, backend.clock.wall() + 0.2)


def test_a_gate_that_opens_before_the_counts_reset_names_the_reset(backend: Backend) -> None:
    c = backend.one()
    # Retry-After closes the gate for 0.3 s, but no quota is left until the reset 1 s away
    c.learn(KEY, seen(429, {"retry-after-ms": "300", "ratelimit-remaining": "0",
                            "ratelimit-limit": "20", "ratelimit-reset": "1"}), None)
    permit = c.acquire(KEY, 1)
    assert permit.reason is WaitReason.GATE
    assert permit.wait == approx(backend, 1.0)
    assert permit.retry_at == approx(backend, backend.clock.wall() + 1.0)


def test_a_paced_wait_the_count_does_not_hold_names_no_reset(backend: Backend) -> None:
    c = backend.one()
    c.learn(KEY, low_quota(2, 1.0), None)  # low: 0.5 s apart, 2 left
    c.acquire(KEY, 1)
    permit = c.acquire(KEY, 1)
    assert (permit.reason, permit.retry_at) == (WaitReason.PACING, None)


def test_an_operation_that_cannot_wait_for_the_counts_reset_ends_with_retry_at(
    backend: Backend,
) -> None:
    c = backend.one()
    # A reset 5 s away, ten times the deadline: on Redis's real clock a loaded machine's lag
    # between these lines never brings the slot within the deadline.
    c.learn(KEY, low_quota(5, 5.0, limit=20), None)  # not low: the count alone holds
    assert goes(c, KEY, 6) == 5  # the sixth is held for the reset
    reset_at = backend.clock.wall() + 5.0
    provider = ScriptedProvider([OK], backend.clock)
    retrier = Retrier(policy=Policy(deadline=0.5), clock=backend.clock, coordinator=c, key=KEY)
    outcome = retrier.call(provider)  # its slot is a spread after the reset
    assert (outcome.reason, outcome.attempts, provider.count) == (Reason.RATE_LIMITED, 0, 0)
    assert outcome.retry_at == approx(backend, reset_at)


@pytest.mark.parametrize(("died", "expected"), [(False, 6 - 2), (True, 6)])
def test_requests_in_flight_are_taken_off_the_count(
    backend: Backend, monkeypatch: pytest.MonkeyPatch, died: bool, expected: int,
) -> None:
    for module in ("_memory", "_redis_calls"):
        monkeypatch.setattr(f"retrybudget.coordination.{module}.FLIGHT_TTL", 0.1)
    c = answered(backend.one())
    leases = [c.acquire(KEY, 1).lease for _ in range(3)]  # sent blind
    if died:
        backend.sleep(0.15)  # their holders never answered: they no longer count
    c.learn(KEY, low_quota(6, 1.0, limit=20), leases[0])  # answered; two still in flight
    assert backend.counted(c, KEY) == expected
    assert goes(c, KEY, 10) == expected


@pytest.mark.parametrize(("cap", "ttl"), [
    (None, FLIGHT_TTL), (ConcurrencyConfig(limit=50, lease_ttl=5.0), 5.0)])
def test_a_dead_holders_requests_stop_counting_within_half_a_minute(
    backend: Backend, cap: ConcurrencyConfig | None, ttl: float,
) -> None:
    """A holder SIGKILLed with requests in flight never answers: they count for the flight
    TTL (the concurrency cap's ``lease_ttl`` when one is set), within 30 s whatever the
    policy, as a dead worker's queue leases lapse."""
    assert FLIGHT_TTL <= 30.0
    c = answered(backend.one(CoordinationConfig(concurrency=cap)))
    for _ in range(3):
        assert c.acquire(KEY, 1).lease  # their holder dies: never given back
    lives = backend.lease_lives(c, KEY)
    assert len(lives) == 3
    assert all(ttl - 1.0 < life <= ttl for life in lives), lives


@pytest.mark.parametrize(("pacing", "cap", "leased"), [
    (PacingConfig(), None, True),
    (None, ConcurrencyConfig(), True),
    (None, None, False),
])
def test_a_request_holds_a_lease_while_pacing_or_a_cap_is_on(
    backend: Backend, pacing: PacingConfig | None, cap: ConcurrencyConfig | None, leased: bool,
) -> None:
    c = backend.one(CoordinationConfig(pacing=pacing, concurrency=cap))
    assert bool(c.acquire(KEY, 1).lease) is leased


# Concurrency ------------------------------------------------------------------------------------


def test_the_concurrency_cap_holds_and_leases_come_back(backend: Backend) -> None:
    cap = ConcurrencyConfig(limit=2, poll=0.05)
    a, b = backend.workers(CoordinationConfig(concurrency=cap), n=2)
    answered(a)
    first, second = a.acquire(KEY, 1), b.acquire(KEY, 1)
    assert first.lease
    assert second.lease
    assert first.lease != second.lease
    busy = a.acquire(KEY, 1)
    assert (busy.reason, busy.wait) == (WaitReason.CONCURRENCY, 0.05)
    b.learn(KEY, seen(200), second.lease)
    assert a.acquire(KEY, 1).lease


def test_a_dead_holders_lease_expires(backend: Backend) -> None:
    c = backend.one(CoordinationConfig(concurrency=ConcurrencyConfig(limit=1, lease_ttl=0.1)))
    assert c.acquire(KEY, 1).lease  # never given back
    assert c.acquire(KEY, 1).reason is WaitReason.CONCURRENCY
    backend.sleep(0.15)
    assert c.acquire(KEY, 1).lease


def test_operations_share_the_cap_through_the_retrier(backend: Backend) -> None:
    c = backend.one(CoordinationConfig(concurrency=ConcurrencyConfig(limit=1)))
    retrier = Retrier(clock=backend.clock, coordinator=c, key=KEY)
    for _ in range(3):
        assert retrier.call(ScriptedProvider([OK], backend.clock)).reason is Reason.OK
    assert c.acquire(KEY, 1).lease  # every lease came back


# The retry budget -------------------------------------------------------------------------------


def test_retries_are_earned_by_healthy_operations(backend: Backend) -> None:
    budget = RetryBudgetConfig(ratio=0.5, min_retries_per_sec=0.0, ttl=60)
    c = answered(backend.one(CoordinationConfig(retry_budget=budget, breaker=None)))
    assert c.spend_retry(KEY) is False  # nothing earned yet
    for _ in range(4):
        assert c.acquire(KEY, 1).wait == 0  # requests that go earn nothing by themselves
    assert c.spend_retry(KEY) is False
    for reason in (Reason.OK, Reason.NOT_FOUND, Reason.OK, Reason.REJECTED):
        c.finish(KEY, ended(reason), False)  # the provider answered: each earns half a retry
    for reason in (Reason.EXHAUSTED, Reason.CIRCUIT_OPEN):
        c.finish(KEY, ended(reason), False)  # a failure or a refusal earns nothing
    assert [c.spend_retry(KEY) for _ in range(3)] == [True, True, False]
    stats = c.stats()
    assert (stats.retries_allowed, stats.retries_refused) == (2, 3)


def test_in_an_outage_only_the_floor_is_spent(backend: Backend) -> None:
    """16 concurrent operations meet a hard outage: the default budget grants the floor (3
    retries per 10 s) and no more, because no operation ends healthy."""
    c = answered(backend.one())
    for _ in range(16):
        assert c.admit(KEY).allowed
        assert c.acquire(KEY, 1).wait == 0
    assert sum(c.spend_retry(KEY) for _ in range(16)) == 3


def test_the_floor_allows_a_few_retries_on_a_quiet_key(backend: Backend) -> None:
    budget = RetryBudgetConfig(ratio=0.0, min_retries_per_sec=2.0, ttl=1.0)
    c = backend.one(CoordinationConfig(retry_budget=budget))
    assert [c.spend_retry(KEY) for _ in range(3)] == [True, True, False]


def test_spent_retries_leave_the_window(backend: Backend) -> None:
    budget = RetryBudgetConfig(ratio=0.0, min_retries_per_sec=4.0, ttl=0.3)
    c = backend.one(CoordinationConfig(retry_budget=budget))
    assert c.spend_retry(KEY) is True
    assert c.spend_retry(KEY) is False
    backend.sleep(0.35)
    assert c.spend_retry(KEY) is True


def test_a_refused_retry_ends_the_operation_with_retry_budget(backend: Backend) -> None:
    budget = RetryBudgetConfig(ratio=0.0, min_retries_per_sec=0.0)
    c = backend.one(CoordinationConfig(retry_budget=budget))
    provider = ScriptedProvider([{"status": 503}, OK], backend.clock)
    outcome = Retrier(clock=backend.clock, coordinator=c, key=KEY).call(provider)
    assert (outcome.reason, outcome.attempts) == (Reason.RETRY_BUDGET, 1)
    assert c.stats().retries_refused == 1


def test_a_dry_retry_budget_still_lets_a_rate_limited_operation_come_back(backend: Backend) -> None:
    budget = RetryBudgetConfig(ratio=0.0, min_retries_per_sec=0.0)
    c = backend.one(CoordinationConfig(retry_budget=budget))
    provider = ScriptedProvider([{"status": 429, "headers": {"retry-after": "1"}}, {"status": 200}],
                                backend.clock)
    outcome = Retrier(clock=backend.clock, coordinator=c, key=KEY,
                      policy=Policy(deadline=30)).call(provider)
    assert (outcome.reason, outcome.attempts) == (Reason.OK, 2)
    assert c.stats().retries_refused == 0


# The breaker ------------------------------------------------------------------------------------


def breaker(**changes: object) -> CoordinationConfig:
    values: dict[str, object] = {"consecutive_failures": 2, "cool_down": 0.2, "probe_ttl": 0.3}
    values.update(changes)
    return CoordinationConfig(breaker=BreakerConfig(**values))  # type: ignore[arg-type]


def test_failed_operations_open_the_breaker(backend: Backend) -> None:
    a, b = backend.workers(breaker(), n=2)
    a.finish(KEY, ended(Reason.EXHAUSTED, 3), False)
    assert b.admit(KEY).allowed
    a.finish(KEY, ended(Reason.EXHAUSTED, 3), False)
    refused = b.admit(KEY)
    assert not refused.allowed
    assert refused.retry_at == approx(backend, backend.clock.wall() + 0.2)
    assert a.stats().breaker_opened == 1


def test_an_open_breaker_refuses_with_zero_attempts(backend: Backend) -> None:
    c = backend.one(breaker(consecutive_failures=1))
    c.finish(KEY, ended(Reason.UNEXPECTED), False)
    provider = ScriptedProvider([OK], backend.clock)
    outcome = Retrier(clock=backend.clock, coordinator=c, key=KEY).call(provider)
    assert (outcome.reason, outcome.attempts, provider.count) == (Reason.CIRCUIT_OPEN, 0, 0)


def test_a_success_resets_the_run_of_failures(backend: Backend) -> None:
    c = backend.one(breaker(failure_ratio=None))
    for reason in (Reason.EXHAUSTED, Reason.OK, Reason.EXHAUSTED):
        c.finish(KEY, ended(reason), False)
    assert c.admit(KEY).allowed


@pytest.mark.parametrize("reason", [Reason.RATE_LIMITED, Reason.NOT_FOUND, Reason.REJECTED,
                                    Reason.RETRY_BUDGET, Reason.NOT_RETRIED,
                                    Reason.CIRCUIT_OPEN])
def test_what_is_not_a_health_failure_never_opens_it(backend: Backend, reason: Reason) -> None:
    c = backend.one(breaker(consecutive_failures=1))
    for _ in range(5):
        c.finish(KEY, ended(reason), False)
    c.finish(KEY, ended(Reason.DEADLINE, attempts=0), False)  # never reached the provider
    assert c.admit(KEY).allowed


@pytest.mark.parametrize("step", [{"status": 503}, {"delay_s": 1}, {"reset": True}],
                         ids=["503", "timeout", "reset"])
def test_operations_the_budget_stops_after_a_transient_failure_open_it(
    backend: Backend, step: dict[str, object],
) -> None:
    budget = RetryBudgetConfig(ratio=0.0, min_retries_per_sec=0.0)
    c = backend.one(breaker().replace(retry_budget=budget))
    retrier = Retrier(policy=Policy(attempt_timeout=0.05), clock=backend.clock, coordinator=c,
                      key=KEY)
    for _ in range(2):
        assert c.admit(KEY).allowed
        outcome = retrier.call(ScriptedProvider([step, OK], backend.clock))
        assert (outcome.reason, outcome.attempts) == (Reason.RETRY_BUDGET, 1)
    assert not c.admit(KEY).allowed


@pytest.mark.parametrize(("attempts", "last", "opens"), [
    (1, Kind.TRANSIENT, True),
    (2, Kind.RATE_LIMITED, False),
    (0, None, False),
])
def test_a_retry_budget_end_counts_only_after_a_transient_failure(
    backend: Backend, attempts: int, last: Kind | None, opens: bool,
) -> None:
    c = backend.one(breaker())
    for _ in range(2):
        c.finish(KEY, ended(Reason.RETRY_BUDGET, attempts, last), False)
    assert c.admit(KEY).allowed is not opens


def test_an_exhausted_retry_loop_is_one_failure(backend: Backend) -> None:
    c = backend.one(breaker(consecutive_failures=2).replace(retry_budget=None))
    provider = ScriptedProvider([{"status": 503}], backend.clock)
    retrier = Retrier(policy=Policy(max_attempts=3, deadline=10), clock=backend.clock,
                      coordinator=c, key=KEY)
    assert retrier.call(provider).reason is Reason.EXHAUSTED
    assert provider.count == 3
    assert c.admit(KEY).allowed  # 3 attempts, 1 failure: still closed
    assert retrier.call(provider).reason is Reason.EXHAUSTED
    assert not c.admit(KEY).allowed


def test_the_failure_ratio_over_the_window_opens_it(backend: Backend) -> None:
    c = backend.one(breaker(consecutive_failures=100, failure_ratio=0.5, window=6,
                            min_operations=6))
    for i in range(5):
        c.finish(KEY, ended(Reason.EXHAUSTED if i % 2 else Reason.OK), False)
    assert c.admit(KEY).allowed  # 2 of 5: too few operations yet
    c.finish(KEY, ended(Reason.EXHAUSTED), False)
    assert not c.admit(KEY).allowed  # 3 of 6


def test_half_open_admits_exactly_one_probe(backend: Backend) -> None:
    workers = backend.workers(breaker(consecutive_failures=1), n=3)
    workers[0].finish(KEY, ended(Reason.EXHAUSTED), False)
    backend.sleep(0.25)
    answers = [w.admit(KEY) for w in workers for _ in range(3)]
    assert [a.probe for a in answers].count(True) == 1
    assert [a.allowed for a in answers].count(True) == 1


def test_a_successful_probe_closes_the_breaker(backend: Backend) -> None:
    a, b = backend.workers(breaker(consecutive_failures=1), n=2)
    a.finish(KEY, ended(Reason.EXHAUSTED), False)
    backend.sleep(0.25)
    probe = a.admit(KEY)
    assert probe.probe
    a.finish(KEY, ended(Reason.OK), True)
    assert all(b.admit(KEY).allowed for _ in range(3))


def test_a_failed_probe_opens_it_again(backend: Backend) -> None:
    a, b = backend.workers(breaker(consecutive_failures=1), n=2)
    a.finish(KEY, ended(Reason.EXHAUSTED), False)
    backend.sleep(0.25)
    assert a.admit(KEY).probe
    a.finish(KEY, ended(Reason.EXHAUSTED), True)
    refused = b.admit(KEY)
    assert not refused.allowed
    assert refused.retry_at == approx(backend, backend.clock.wall() + 0.2)


def test_a_probe_that_never_reaches_the_provider_frees_the_probe(backend: Backend) -> None:
    a, b = backend.workers(breaker(consecutive_failures=1), n=2)
    a.finish(KEY, ended(Reason.EXHAUSTED), False)
    backend.sleep(0.25)
    assert a.admit(KEY).probe
    a.finish(KEY, ended(Reason.RATE_LIMITED, attempts=0), True)
    assert b.admit(KEY).probe


def test_a_probe_whose_holder_died_lapses(backend: Backend) -> None:
    a, b = backend.workers(breaker(consecutive_failures=1, probe_ttl=0.15), n=2)
    a.finish(KEY, ended(Reason.EXHAUSTED), False)
    backend.sleep(0.25)
    assert a.admit(KEY).probe  # and never finishes
    assert not b.admit(KEY).allowed
    backend.sleep(0.2)
    assert b.admit(KEY).probe


def test_a_probe_operation_through_the_retrier_closes_it(backend: Backend) -> None:
    c = backend.one(breaker(consecutive_failures=1))
    c.finish(KEY, ended(Reason.EXHAUSTED), False)
    backend.sleep(0.25)
    retrier = Retrier(clock=backend.clock, coordinator=c, key=KEY)
    assert retrier.call(ScriptedProvider([OK], backend.clock)).reason is Reason.OK
    assert c.stats().probes == 1
    assert c.admit(KEY).allowed


def test_half_open_admits_one_probe_among_many_threads(backend: Backend) -> None:
    workers = backend.workers(breaker(consecutive_failures=1), n=4)
    workers[0].finish(KEY, ended(Reason.EXHAUSTED), False)
    backend.sleep(0.25)
    probes: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(16)

    def ask(i: int) -> None:
        start.wait(10)
        admission = workers[i % 4].admit(KEY)
        with lock:
            probes.append(admission.probe)

    run_threads(16, ask)
    assert probes.count(True) == 1


@pytest.mark.parametrize(("probe_ends", "entered"), [
    (Reason.OK, ["closed"]),
    (Reason.EXHAUSTED, ["open"]),
    (Reason.NOT_RETRIED, []),  # neutral: the probe is freed, the breaker stays half-open
])
def test_each_breaker_transition_is_reported_to_the_events(
    backend: Backend, probe_ends: Reason, entered: list[str],
) -> None:
    events = Recorder()
    c = backend.one(breaker(), events=[events])
    c.finish(KEY, ended(Reason.EXHAUSTED, 3), False)
    assert events.seen == []
    c.finish(KEY, ended(Reason.EXHAUSTED, 3), False)
    assert events.seen == [(KEY, "open")]
    assert not c.admit(KEY).allowed  # still open: nothing new
    backend.sleep(0.25)
    assert c.admit(KEY).probe
    assert not c.admit(KEY).allowed  # the probe is out: nothing new
    c.finish(KEY, ended(probe_ends), True)
    assert [state for _, state in events.seen] == ["open", "half_open", *entered]


def test_events_that_raise_change_no_answer(backend: Backend) -> None:
    class Broken:
        def breaker_transition(self, key: str, state: str) -> None:
            raise RuntimeError(state)

    c = backend.one(breaker(consecutive_failures=1), events=[Broken()])
    c.finish(KEY, ended(Reason.EXHAUSTED), False)
    assert not c.admit(KEY).allowed
    assert c.stats().breaker_opened == 1


def test_the_breaker_can_be_switched_off(backend: Backend) -> None:
    c = backend.one(CoordinationConfig(breaker=None))
    for _ in range(10):
        c.finish(KEY, ended(Reason.EXHAUSTED), False)
    assert c.admit(KEY).allowed


# Async ------------------------------------------------------------------------------------------


async def test_the_async_methods_share_the_same_state(backend: Backend) -> None:
    a, b = backend.workers(breaker(consecutive_failures=1), n=2)
    await a.alearn(KEY, throttled(300), None)
    permit = await b.aacquire(KEY, 1)
    assert (permit.reason, permit.wait) == (WaitReason.GATE, approx(backend, 0.3))
    await a.afinish(KEY, ended(Reason.EXHAUSTED), False)
    assert not (await b.aadmit(KEY)).allowed
    assert isinstance(await b.aspend_retry(KEY), bool)


async def test_the_async_methods_report_transitions(backend: Backend) -> None:
    events = Recorder()
    c = backend.one(breaker(consecutive_failures=1), events=[events])
    await c.afinish(KEY, ended(Reason.EXHAUSTED), False)
    backend.sleep(0.25)
    assert (await c.aadmit(KEY)).probe
    await c.afinish(KEY, ended(Reason.OK), True)
    assert events.seen == [(KEY, "open"), (KEY, "half_open"), (KEY, "closed")]


async def test_an_async_operation_waits_at_the_gate(backend: Backend) -> None:
    a, b = backend.workers(n=2)
    a.learn(KEY, throttled(200), None)

    async def fetch() -> str:
        return "ok"

    outcome = await Retrier(policy=Policy(deadline=5), clock=backend.clock, coordinator=b,
                            key=KEY).acall(fetch)
    assert outcome.reason is Reason.OK
    assert outcome.waits[0].seconds == approx(backend, 0.2)
