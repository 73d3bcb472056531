"""The pure coordination arithmetic (what both backends follow) and its configuration."""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import timedelta

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from retrybudget import PolicyError
from retrybudget.coordination import (
    BreakerConfig,
    ConcurrencyConfig,
    CoordinationConfig,
    GateConfig,
    PacingConfig,
    RetryBudgetConfig,
)
from retrybudget.coordination._logic import (
    EPSILON,
    LEARNED_CONSTANTS,
    NEVER,
    PROBE_PATIENCE,
    Breaker,
    Budget,
    Health,
    Phase,
    Schedule,
    breaker_admit,
    breaker_finish,
    budget_deposit,
    budget_withdraw,
    gate_delay,
    health,
    learn,
    moved,
    pacing_interval,
    permit_of,
    plan_slot,
    quota_hold,
    release_quota,
    rolled,
    sent,
    still_probing,
    went_now,
)
from retrybudget.core.decide import rate_limit_wait
from retrybudget.core.outcome import Reason
from retrybudget.core.profiles import GENERIC, GITHUB
from retrybudget.core.throttle import NO_THROTTLE, Throttle, throttle_of
from tests.support.coordination import classified, ended, seen
from tests.support.strategies import assert_reached, examples, reached, tried

WALL = 1_800_000_000.0
SPAN = LEARNED_CONSTANTS["SPAN"]


# Reading responses ----------------------------------------------------------------------------


def test_retry_after_wins_over_the_reset() -> None:
    facts = seen(429, {"retry-after": "5", "x-ratelimit-remaining": "0",
                       "x-ratelimit-reset": str(int(WALL) + 60)}, profile=GITHUB, wall=WALL)
    assert (facts.throttled, facts.hint, facts.remaining, facts.reset) == (True, 5.0, 0, 61.0)


def test_an_exhausted_github_quota_waits_for_the_reset_plus_slack() -> None:
    facts = seen(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(WALL) + 60)},
                 profile=GITHUB, wall=WALL)
    assert (facts.throttled, facts.hint, facts.floor) == (True, 61.0, GITHUB.rate_limit_floor)


def test_the_throttle_hint_is_the_per_operation_wait() -> None:
    """One rule: the gate's hint is the wait each operation takes (rate_limit_wait)."""
    for status, headers in [(429, {"retry-after": "7"}),
                            (429, {"x-ratelimit-reset": str(int(WALL) + 30)}),
                            (403, {"x-ratelimit-remaining": "0",
                                   "x-ratelimit-reset": str(int(WALL) + 9)})]:
        c = classified(status, headers, profile=GITHUB, wall=WALL)
        delay, _, _ = rate_limit_wait(GITHUB, c, 0)
        assert throttle_of(GITHUB, c).hint == delay


def test_a_plain_response_with_quota_headers_only_informs_pacing() -> None:
    facts = seen(200, {"x-ratelimit-remaining": "10", "x-ratelimit-limit": "5000",
                       "x-ratelimit-reset": str(int(WALL) + 600),
                       "x-ratelimit-resource": "core"}, profile=GITHUB, wall=WALL)
    assert (facts.throttled, facts.remaining, facts.limit, facts.reset, facts.bucket) == (
        False, 10, 5000, 601.0, "core")
    assert facts.informative
    assert not seen(200).informative
    assert throttle_of(GENERIC, None) == NO_THROTTLE


def test_a_rate_limit_without_a_hint_doubles_from_the_floor_and_is_capped() -> None:
    delays = []
    streak = 0
    bare = seen(429, profile=GITHUB)
    for _ in range(4):
        delay, streak = gate_delay(bare, streak, 0.0, 3600.0)
        delays.append(delay)
    assert delays == [60.0, 120.0, 240.0, 480.0]
    assert gate_delay(bare, 40, 0.0, 3600.0)[0] == 3600.0
    assert gate_delay(bare, 3, 61.0, 3600.0) == (60.0, 1)  # a quiet spell restarts
    assert gate_delay(Throttle(True, 7.5), 3, 0.0, 3600.0) == (7.5, 3)


@pytest.mark.parametrize(("reason", "attempts", "verdict"), [
    (Reason.OK, 1, Health.SUCCESS),
    (Reason.NOT_FOUND, 1, Health.SUCCESS),
    (Reason.REJECTED, 1, Health.SUCCESS),
    (Reason.RATE_LIMITED, 1, Health.SUCCESS),
    (Reason.INVALID_PAYLOAD, 1, Health.SUCCESS),
    (Reason.EXHAUSTED, 3, Health.FAILURE),
    (Reason.DEADLINE, 2, Health.FAILURE),
    (Reason.UNEXPECTED, 1, Health.FAILURE),
    (Reason.DEADLINE, 0, Health.NEUTRAL),
    (Reason.RATE_LIMITED, 0, Health.NEUTRAL),
    (Reason.CIRCUIT_OPEN, 0, Health.NEUTRAL),
    (Reason.RETRY_BUDGET, 1, Health.NEUTRAL),
    (Reason.NOT_RETRIED, 1, Health.NEUTRAL),
])
def test_what_an_outcome_tells_the_breaker(reason: Reason, attempts: int, verdict: Health) -> None:
    assert health(ended(reason, attempts)) is verdict


# Slots and pacing ------------------------------------------------------------------------------


def test_pacing_spreads_the_remaining_quota_until_the_reset() -> None:
    s = Schedule(remaining=5, limit=100, reset_at=110.0)
    assert pacing_interval(s, 100.0, PacingConfig()) == 2.0
    assert pacing_interval(s, 110.0, PacingConfig()) == 0.0  # the quota has reset
    assert pacing_interval(dataclasses.replace(s, remaining=50), 100.0, PacingConfig()) == 0.0
    assert pacing_interval(dataclasses.replace(s, remaining=0), 100.0, PacingConfig()) == 10.0
    unknown = Schedule(remaining=10, reset_at=110.0)
    assert pacing_interval(unknown, 100.0, PacingConfig(min_remaining=10)) == 1.0
    assert pacing_interval(s, 100.0, None) == 0.0


events = st.lists(
    st.tuples(
        st.floats(min_value=0.0, max_value=2.0),  # time passing
        st.one_of(st.none(), st.floats(min_value=0.0, max_value=5.0)),  # a rate limit's hint
        st.one_of(st.none(), st.integers(min_value=0, max_value=100)),  # remaining seen
    ),
    max_size=60,
)


@given(events, st.one_of(st.just(0.0), st.floats(min_value=1e-4, max_value=0.5)))
def test_reserved_slots_never_come_before_the_gate_nor_crowd_past_the_limit(steps, spread) -> None:
    gate_cfg = GateConfig(spread=spread)
    s, now, reserved = Schedule(), 1000.0, Counter[float]()
    for dt, hint, remaining in steps:
        now += dt
        if hint is not None or remaining is not None:
            facts = Throttle(throttled=hint is not None, hint=hint, remaining=remaining,
                             limit=100, reset=None if remaining is None else 3.0)
            s = learn(s, facts, now, gate_cfg)
        slot, after = plan_slot(s, now, gate_cfg, PacingConfig())
        assert slot >= now
        assert slot >= s.gate
        assert after.tail >= s.tail
        if slot > now + EPSILON:
            reserved[slot] += 1
            assert reserved[slot] <= 100  # one instant admits at most the window's quota
        s = after


quotas = st.lists(
    st.tuples(
        st.floats(min_value=0.0, max_value=2.0),  # time passing
        st.integers(min_value=1, max_value=50),  # the limit the provider names now
        st.floats(min_value=0.0, max_value=1.0),  # the share of it left
        st.floats(min_value=0.05, max_value=3.0),  # seconds to the reset
        st.integers(min_value=0, max_value=120),  # workers asking then
        st.integers(min_value=0, max_value=5),  # requests in flight then
    ),
    max_size=40,
)


@given(quotas, st.sampled_from([0.0, 0.05]))
@example(  # a reset 10 us after now: the slot at it is now, and so is the new window
    [(0.0, 1, 0.0, 1.0, 0, 0), (0.0, 1, 1.0, 1.0, 0, 0), (0.0, 1, 1.0, 1.0, 0, 0),
     (0.0, 1, 1.0, 1.0, 0, 0), (0.0, 1, 0.0, 2.00001, 0, 0), (2.0, 1, 1.0, 1.0, 1, 0)], 0.0)
def test_a_window_never_admits_more_than_its_quota(steps, spread) -> None:
    """For any sequence of learned quotas: the requests that go now never exceed the count,
    and the workers released at one instant never exceed the quota of the window open then."""
    gate_cfg, pacing = GateConfig(spread=spread), PacingConfig(threshold=0.0, min_remaining=0)
    s, now = Schedule(), 1000.0
    for dt, limit, share, reset, asks, in_flight in steps:
        now += dt
        s = rolled(s, now, in_flight)
        remaining = int(limit * share)
        s = learn(s, Throttle(throttled=remaining == 0, hint=None, remaining=remaining,
                              limit=limit, reset=reset), now, gate_cfg, in_flight)
        allowed = s.quota
        went = 0
        for _ in range(asks):
            quota_at = None
            if now < s.gate or quota_hold(s, now, pacing, in_flight, spread) is not None:
                at = max(s.gate, quota_hold(s, now, pacing, in_flight, spread) or now)
                quota_at = release_quota(s, at)
            slot, s = plan_slot(s, now, gate_cfg, pacing, in_flight)
            if slot <= now + EPSILON:
                went += 1
                s = sent(s)
            elif quota_at is not None and slot == s.release:  # released by quota at ``slot``
                assert s.released <= quota_at
            # any other slot asks again then; a claim goes only while the count allows
        assert allowed is None or now < s.gate or went <= allowed
        assert allowed is None or went <= limit


@given(st.integers(1, 50), st.integers(0, 5),
       st.lists(st.tuples(st.integers(0, 3), st.integers(0, 100)), max_size=60))
def test_a_share_counts_every_own_request_whatever_the_provider_says_is_left(
        limit, in_flight, steps) -> None:
    """A worker counting its share of a quota (``share``) never counts fewer requests of the
    window than it sent itself, so it never sends more than the share in one window; the
    provider's answers can only raise the count (the others spent more than theirs)."""
    gate_cfg, now, in_flight = GateConfig(spread=0.0), 1000.0, min(in_flight, limit)
    seen_first = Throttle(throttled=False, hint=None, remaining=limit, limit=limit, reset=30.0)
    s = learn(Schedule(), seen_first, now, gate_cfg, in_flight, share=True)
    own = in_flight  # in flight when the share was learned: they may land in this window
    for sends, left in steps:
        for _ in range(sends):
            if s.quota is not None and s.quota > 0:
                s, own = sent(s), own + 1
        remaining = min(left, limit)
        facts = Throttle(throttled=remaining == 0, hint=None, remaining=remaining,
                         limit=limit, reset=30.0)
        s = learn(s, facts, now, gate_cfg, 0, share=True)
        assert s.used is not None
        assert s.used >= max(own, limit - remaining)
        assert s.quota == max(limit - s.used, 0)
    assert own <= limit


def test_without_share_the_provider_count_corrects_the_running_one() -> None:
    """One worker alone takes the provider's word: a count above what the provider says was
    spent (requests that never reached it) comes down; a share's own count does not."""
    gate_cfg = GateConfig(spread=0.0)
    start = Throttle(throttled=False, hint=None, remaining=10, limit=10, reset=30.0)
    later = Throttle(throttled=False, hint=None, remaining=8, limit=10, reset=30.0)
    for share, used in ((False, 2), (True, 5)):
        s = learn(Schedule(), start, 1000.0, gate_cfg, share=share)
        for _ in range(5):
            s = sent(s)
        s = learn(s, later, 1000.0, gate_cfg, share=share)
        assert (s.used, s.quota) == (used, 10 - used)


@given(st.integers(0, 6), st.integers(0, 40), st.sampled_from([0.0, 0.05, 0.5]),
       st.lists(st.sampled_from(["plain", "quota", "429"]), max_size=3))
def test_a_fresh_key_lets_only_its_probes_go_before_an_answer(probes, asks, spread,
                                                              answers) -> None:
    """Before any answer, at most ``probes`` requests are in flight (with herd control on);
    the first answer, whatever it says, ends the first window for good."""
    gate_cfg, pacing = GateConfig(spread=spread), PacingConfig(probes=probes)
    s, now, in_flight = Schedule(), 1000.0, 0
    for _ in range(asks):
        slot, s = plan_slot(s, now, gate_cfg, pacing, in_flight)
        if slot <= now + EPSILON:
            in_flight += 1
            s = sent(s)
        else:
            assert slot == now + spread  # held: ask again once an answer may have come
    blind = probes == 0 or spread == 0
    assert in_flight == (asks if blind else min(asks, probes))
    for kind in answers:
        throttle = {"plain": NO_THROTTLE,
                    "quota": Throttle(remaining=5, limit=10, reset=1.0),
                    "429": Throttle(throttled=True, hint=0.0)}[kind]
        s = learn(s, throttle, now, gate_cfg, in_flight)
    if answers:
        assert s.answered
        if answers[-1] == "plain" and s.quota is None:
            assert quota_hold(s, now, pacing, in_flight + 100, spread) is None


@given(st.integers(1, 4), st.sampled_from([0.05, 0.5]),
       st.lists(st.sampled_from([0.0, 0.01, 0.3, 0.99, 1.0, 2.5]), max_size=40))
@example(1, 0.05, [0.0, 0.3, 0.99, 0.01, 0.3, 1.0])
def test_a_first_window_whose_probes_never_answer_lets_one_more_probe_go_per_patience(
        probes, spread, gaps) -> None:
    """Probes whose holders died never answer: the key holds the other requests only for
    PROBE_PATIENCE after its latest probe went, then lets exactly one more go as a probe (and
    holds for that one in turn), so a dead holder stalls no one for longer, and the first
    window is never sent blind."""
    tried("first window")
    gate_cfg, pacing = GateConfig(spread=spread), PacingConfig(probes=probes)
    s, now, in_flight = Schedule(), 1000.0, 0
    for gap in gaps:
        now += gap
        latest = s.first
        slot, s = plan_slot(s, now, gate_cfg, pacing, in_flight)
        if slot <= now + EPSILON:
            if in_flight >= probes:  # beyond the probe set: only once the patience ran out
                assert now - latest >= PROBE_PATIENCE
                reached("first window", "another probe")
            s, in_flight = sent(s, now), in_flight + 1
            if in_flight > probes:
                assert s.first == now  # the next waits for this probe in turn
        else:  # held: only while the latest probe may still answer
            assert in_flight >= probes
            assert now - s.first < PROBE_PATIENCE
            assert slot == now + spread
            reached("first window", "held")
    assert not s.answered


def test_the_first_window_property_reached_each_case() -> None:
    assert_reached("first window", ("another probe", "held"), minimum=5)


_PROBED_STEPS = st.lists(st.tuples(st.sampled_from([0.0, 0.0, 0.01, 0.01, 0.3, 0.99, 1.0]),
                                   st.sampled_from(["ask", "ask", "ask", "ask fail-fast",
                                                    "ask, deadline close", "answer", "429"])),
                         max_size=40)
"""Gaps and steps, asks and short gaps the likelier (and one probe): a key's second of probing
is reached, and its probes in flight, within a hundred examples."""


@given(st.booleans(), st.sampled_from([1, 1, 2, 4]), st.sampled_from([0.05, 0.5]), _PROBED_STEPS)
@example(True, 1, 0.05, [(0.0, "ask"), (0.0, "ask"), (0.0, "ask fail-fast"), (0.3, "answer"),
                         (0.0, "ask"), (0.0, "ask"), (0.99, "ask"), (0.0, "ask"), (0.0, "429"),
                         (0.0, "ask"), (0.0, "ask")])
@example(False, 1, 0.05, [(0.0, "ask"), (0.0, "ask"), (0.3, "ask")])
@example(True, 1, 0.05, [(0.0, "ask")] * 6)  # the simplest draws lean to off: both reached
@example(False, 1, 0.05, [(0.0, "ask")] * 6)
def test_a_key_naming_no_quota_is_probed_for_a_span_after_its_first_answer_when_opted_in(
        on, probes, spread, steps) -> None:
    """With ``probe_unknown_limit`` on, after a first answer that named no quota, a caller
    that waits goes only while fewer than ``probes`` requests are in flight, for SPAN after
    that answer and until the key's first throttle; a fail-fast caller, or one whose deadline
    leaves less than a spread, is never held so. Held, it asks again one spread later.
    Outside that, and always with the option off (the default), nothing in flight holds
    anyone (nothing is counted)."""
    tried("probed")
    gate_cfg = GateConfig(spread=spread)
    pacing = PacingConfig(probes=probes, probe_unknown_limit=on)
    start = 1000.0
    s, now, in_flight = learn(Schedule(), NO_THROTTLE, start, gate_cfg), start, 0
    for gap, step in steps:
        now += gap
        if step in ("answer", "429"):
            in_flight, answered = max(in_flight - 1, 0), min(in_flight, 1)
            throttle = Throttle(throttled=True, hint=0.0) if step == "429" else NO_THROTTLE
            s = learn(s, throttle, now, gate_cfg, in_flight, answered)
            continue
        fail_fast, close = step == "ask fail-fast", step == "ask, deadline close"
        window = now - start < SPAN and s.gate == NEVER
        probing = on and window and not fail_fast and not close
        slot, planned = plan_slot(s, now, gate_cfg, pacing, in_flight, fail_fast=fail_fast,
                                  max_wait=spread / 2 if close else None)
        if slot <= now + EPSILON:
            assert not probing or in_flight < probes
            reached("probed", "went, probing" if probing else
                    "went, option off" if not on and window and in_flight >= probes else
                    "impatient went" if (fail_fast or close) and now - start < SPAN
                    else "went, blind")
            s, in_flight = sent(planned, now), in_flight + 1
        else:
            assert probing
            assert in_flight >= probes
            assert slot == now + spread
            reached("probed", "held")
            s = planned
    assert still_probing(s, now) == (now - start < SPAN and s.gate == NEVER)


def test_the_probed_property_reached_each_case() -> None:
    assert_reached("probed", ("went, probing", "went, option off", "impatient went",
                              "went, blind", "held"), minimum=5)


_INSTANTS = st.sampled_from([-1e9, 990.0, 999.5, 1000.0, 1000.0 + EPSILON / 2, 1000.5, 1030.0])
_COUNTS = st.one_of(st.none(), st.integers(0, 6))
_SCHEDULES = st.builds(Schedule, gate=_INSTANTS, tail=_INSTANTS, herd=_INSTANTS,
                       streak=st.integers(0, 2), remaining=_COUNTS, limit=_COUNTS,
                       reset_at=st.one_of(st.none(), _INSTANTS), quota=_COUNTS, used=_COUNTS,
                       release=_INSTANTS, released=st.integers(0, 3), rolled_at=_INSTANTS,
                       window=st.one_of(st.none(), st.just(60.0)), answered=st.booleans(),
                       first=_INSTANTS)
_PAST = st.sampled_from([-1e9, 990.0, 999.5, 1000.0])
_HEALTHY = st.builds(Schedule, gate=_PAST, tail=_INSTANTS, herd=_INSTANTS, remaining=_COUNTS,
                     limit=_COUNTS, reset_at=st.one_of(st.none(), _INSTANTS),
                     quota=st.integers(0, 6), used=_COUNTS, answered=st.just(True))
"""Schedules of a key past its first window, nothing closing it: the case went_now answers."""
_PACINGS = st.one_of(st.none(), st.builds(PacingConfig, threshold=st.sampled_from([0.1, 0.9]),
                                           probes=st.integers(0, 2)))


@settings(max_examples=examples(500, cap=3000))  # one rule over a small grid of schedules
@given(st.one_of(_SCHEDULES, _HEALTHY), _PACINGS, st.sampled_from([0.0, 0.05]), st.integers(0, 3),
       st.sampled_from([0.0, 0.0, 0.5]), st.booleans())
def test_a_request_that_goes_at_once_is_planned_and_sent_in_one_step(
        s, pacing, spread, in_flight, gap, fail_fast) -> None:
    """went_now is plan_slot then sent for a request that goes at once on a key nothing holds
    (``gap``: a learned rate's spacing; a fail-fast caller's alike): the same slot (now) and
    the same schedule; a case it does not answer is left to them."""
    tried("went now")
    now, gate_cfg = 1000.0, GateConfig(spread=spread)
    went = went_now(s, now, pacing, gap)
    if quota_hold(s, now, pacing, in_flight, spread) is not None:
        return
    slot, planned = plan_slot(s, now, gate_cfg, pacing, in_flight, fail_fast=fail_fast,
                              learned_gap=gap)
    if went is None:
        reached("went now", "left to plan_slot")
        return
    assert slot == now
    assert went == sent(planned, now)
    reached("went now", "planned and sent at once")


def test_the_went_now_property_reached_each_case() -> None:
    assert_reached("went now", ("left to plan_slot", "planned and sent at once"))


# The retry budget -------------------------------------------------------------------------------


@given(st.lists(st.booleans(), max_size=200), st.sampled_from([0.0, 0.1, 0.2, 0.5, 1.0]),
       st.sampled_from([0.0, 0.5, 2.0]))
def test_retries_never_exceed_the_budget(ops, ratio, floor) -> None:
    cfg = RetryBudgetConfig(ratio=ratio, min_retries_per_sec=floor, ttl=10.0)
    b, deposits, allowed = Budget(), 0, 0
    for deposit in ops:
        if deposit:
            b = budget_deposit(b, 5.0, cfg)
            deposits += 1
        else:
            ok, b = budget_withdraw(b, 5.0, cfg)
            allowed += ok
        assert allowed <= floor * 10.0 + ratio * deposits + 1e-9


@given(st.lists(st.tuples(st.booleans(), st.sampled_from([0.0, 0.3, 1.0, 4.0, 9.9, 25.0])),
                max_size=60))
def test_a_deposit_counts_what_the_window_holds(ops) -> None:
    """A deposit into a budget whose slices are all live is counted in place: the budget is
    the one the window's slices, filtered and added to, make."""
    from retrybudget.coordination._logic._budget import _add, _live

    cfg = RetryBudgetConfig(ratio=0.5, min_retries_per_sec=0.0, ttl=10.0)
    b, now = Budget(), 100.0
    for deposit, gap in ops:
        now += gap
        if deposit:
            current, live = _live(b, now, cfg)
            expected = _add(live, current, 1, 0)
            b = budget_deposit(b, now, cfg)
            assert b == expected
        else:
            b = budget_withdraw(b, now, cfg)[1]
        assert [sl[0] for sl in b.slices] == sorted({sl[0] for sl in b.slices})


def test_deposits_and_retries_leave_the_window() -> None:
    cfg = RetryBudgetConfig(ratio=1.0, min_retries_per_sec=0.0, ttl=10.0)
    b = budget_deposit(Budget(), 0.0, cfg)
    assert budget_withdraw(b, 9.9, cfg)[0]
    assert not budget_withdraw(b, 10.0, cfg)[0]  # the deposit's slice has left the window


# The breaker ------------------------------------------------------------------------------------


@given(st.lists(st.tuples(st.floats(min_value=0.0, max_value=3.0),
                          st.sampled_from(list(Health)), st.booleans()), max_size=80))
def test_at_most_one_probe_is_out_and_only_failures_open(steps) -> None:
    cfg = BreakerConfig(consecutive_failures=2, cool_down=1.0, probe_ttl=2.0)
    b, now, probe_out_until = Breaker(), 0.0, -1.0
    for dt, verdict, ask in steps:
        now += dt
        if ask:
            answer, b = breaker_admit(b, now, cfg)
            if answer.probe:
                assert now >= probe_out_until  # no other live probe
                probe_out_until = now + cfg.probe_ttl
            continue
        probe = b.phase is Phase.HALF_OPEN and now < probe_out_until
        before = b.phase
        b, opened = breaker_finish(b, verdict, probe, now, cfg)
        if probe:
            probe_out_until = -1.0
        if opened:
            assert verdict is Health.FAILURE
            assert before is not Phase.OPEN


TRANSITIONS = {("closed", "open"), ("open", "half_open"), ("half_open", "closed"),
               ("half_open", "open")}


@given(st.lists(st.tuples(st.floats(min_value=0.0, max_value=3.0),
                          st.sampled_from(list(Health)), st.booleans()), max_size=80))
def test_each_move_is_a_breaker_transition_the_events_may_report(steps) -> None:
    cfg = BreakerConfig(consecutive_failures=2, cool_down=1.0, probe_ttl=2.0)
    b, now = Breaker(), 0.0
    for dt, verdict, ask in steps:
        now += dt
        before = b
        if ask:
            answer, b = breaker_admit(b, now, cfg)
            entered = moved(before, b)
            assert entered in (None, "half_open")
            assert entered is None or answer.probe
        else:
            b, opened = breaker_finish(b, verdict, b.phase is Phase.HALF_OPEN, now, cfg)
            entered = moved(before, b)
            assert opened is (entered == "open")
        assert entered is None or (before.phase.value, entered) in TRANSITIONS


def test_a_count_hold_names_its_reset() -> None:
    assert permit_of("pace", 1.2, 0.0, None, 1000.0).retry_at is None
    assert permit_of("pace", 1.2, 0.0, None, 1000.0, reset_in=1.0).retry_at == 1001.0
    # behind a gate, a used-up count's later reset is when the provider can take requests again
    assert permit_of("gate", 1.2, 0.5, None, 1000.0, reset_in=1.0).retry_at == 1001.0
    assert permit_of("gate", 1.2, 0.5, None, 1000.0, reset_in=0.2).retry_at == 1000.5
    assert permit_of("gate", 1.2, 0.5, None, 1000.0).retry_at == 1000.5


# Configuration ----------------------------------------------------------------------------------


def test_durations_accept_timedeltas() -> None:
    cfg = BreakerConfig(cool_down=timedelta(seconds=90))  # type: ignore[arg-type]
    assert cfg.cool_down == 90.0


@pytest.mark.parametrize("make", [
    lambda: GateConfig(spread=-1),
    lambda: GateConfig(spread=1e-6),
    lambda: GateConfig(max_gate=0),
    lambda: PacingConfig(threshold=1.5),
    lambda: PacingConfig(min_remaining=-1),
    lambda: PacingConfig(probe_unknown_limit=1),  # type: ignore[arg-type]
    lambda: ConcurrencyConfig(limit=0),
    lambda: ConcurrencyConfig(lease_ttl=float("inf")),
    lambda: RetryBudgetConfig(ratio=-0.1),
    lambda: RetryBudgetConfig(ttl=0),
    lambda: BreakerConfig(consecutive_failures=0),
    lambda: BreakerConfig(failure_ratio=float("nan")),
    lambda: BreakerConfig(cool_down=10**9),
    lambda: CoordinationConfig(gate=None),  # type: ignore[arg-type]
    lambda: CoordinationConfig(breaker=3),  # type: ignore[arg-type]
])
def test_unusable_values_are_refused(make) -> None:
    with pytest.raises(PolicyError):
        make()


def test_the_gate_has_no_profile_setting() -> None:
    assert not {"profile", "profiles"} & {f.name for f in dataclasses.fields(GateConfig)}
    assert CoordinationConfig().replace(breaker=None).breaker is None


def test_the_package_exports_its_public_names() -> None:
    from retrybudget import coordination

    public = {n for n in dir(coordination)
              if not n.startswith("_") and n not in {"TYPE_CHECKING", "annotations"}}
    assert set(coordination.__all__) == public | {"RedisCoordinator"}
    assert all(getattr(coordination, n) is not None for n in coordination.__all__)
