"""The policy's rules, exactly: its validation boundaries, the backoff formula, the presets.

Each value a caller can set is checked at its edges (the largest accepted, the smallest
refused), the backoff delay is pinned to the formula on exact samples, and the two presets
are pinned field by field, so a one-character change to ``core/policy.py`` fails here
(``docs/mutation.md``).
"""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from retrybudget import Backoff, Jitter, Policy, get_profile
from retrybudget.core.policy import (
    PRESETS,
    PolicyError,
    RateLimitMode,
    background,
    interactive,
    seconds,
)

# seconds(): the one duration rule ---------------------------------------------------------


def test_durations_are_float_seconds_from_numbers_and_timedeltas() -> None:
    assert seconds(2, "d") == 2.0
    assert isinstance(seconds(2, "d"), float)
    assert seconds(0, "d") == 0.0
    assert seconds(timedelta(milliseconds=1500), "d") == 1.5
    assert seconds(None, "d", allow_none=True) is None


@pytest.mark.parametrize("value", [-1e-9, -1, math.nan, math.inf, -math.inf])
def test_a_negative_or_non_finite_duration_is_refused(value: float) -> None:
    with pytest.raises(PolicyError, match=r"^d must be a finite, non-negative duration"):
        seconds(value, "d")


@pytest.mark.parametrize(("value", "kind"), [(True, "bool"), ("1", "str"), ([1], "list")])
def test_a_duration_that_is_not_a_number_is_refused(value: object, kind: str) -> None:
    with pytest.raises(PolicyError, match=rf"^d must be seconds \(float\) or a timedelta, got {kind}$"):
        seconds(value, "d")  # type: ignore[arg-type]


def test_a_missing_duration_is_refused_unless_allowed() -> None:
    with pytest.raises(PolicyError, match=r"^d is required$"):
        seconds(None, "d")


# Backoff --------------------------------------------------------------------------------


def test_backoff_defaults() -> None:
    b = Backoff()
    assert (b.base, b.cap, b.multiplier, b.jitter) == (0.1, 5.0, 2.0, Jitter.FULL)


@pytest.mark.parametrize("multiplier", [1, 1.0, 100, 100.0])
def test_a_multiplier_from_1_to_100_is_accepted(multiplier: float) -> None:
    b = Backoff(multiplier=multiplier)
    assert b.multiplier == float(multiplier)
    assert isinstance(b.multiplier, float)


@pytest.mark.parametrize("multiplier", [0.999, 100.001, True, "2"])
def test_a_multiplier_outside_1_to_100_or_not_a_number_is_refused(multiplier: object) -> None:
    with pytest.raises(PolicyError, match=r"^backoff.multiplier must be"):
        Backoff(multiplier=multiplier)  # type: ignore[arg-type]


def test_a_jitter_name_is_read_and_an_unknown_one_refused() -> None:
    assert Backoff(jitter="equal").jitter is Jitter.EQUAL  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match=r"^unknown jitter 'gaussian'$"):
        Backoff(jitter="gaussian")  # type: ignore[arg-type]


def test_backoff_base_and_cap_are_durations() -> None:
    with pytest.raises(PolicyError, match=r"^backoff.base must be"):
        Backoff(base=-1)
    with pytest.raises(PolicyError, match=r"^backoff.cap must be"):
        Backoff(cap=-1)
    assert Backoff(base=timedelta(seconds=2), cap=timedelta(seconds=9)).cap == 9.0


def test_backoff_without_jitter_is_base_times_multiplier_to_the_retry_capped() -> None:
    b = Backoff(base=0.5, cap=6.0, multiplier=3.0, jitter=Jitter.NONE)
    assert [b.delay(n, 0.99) for n in range(5)] == [0.5, 1.5, 4.5, 6.0, 6.0]
    assert b.delay(-3, 0.5) == 0.5  # a negative retry counts as the first
    # the exponent stops at 64: no overflow for a huge retry number
    huge = Backoff(base=1e-300, cap=1e300, multiplier=100.0, jitter=Jitter.NONE)
    assert huge.delay(65, 0.0) == huge.delay(64, 0.0) == 1e-300 * 100.0**64


def test_full_jitter_is_the_sample_share_of_the_capped_delay() -> None:
    b = Backoff(base=2.0, cap=8.0, multiplier=2.0, jitter=Jitter.FULL)
    assert [b.delay(1, u) for u in (0.0, 0.25, 0.5)] == [0.0, 1.0, 2.0]
    assert b.delay(5, 0.5) == 4.0
    assert b.delay(0, 1.5) == 2.0
    assert b.delay(0, -1.0) == 0.0


def test_equal_jitter_is_half_the_delay_plus_the_sample_share_of_the_other_half() -> None:
    b = Backoff(base=2.0, cap=8.0, multiplier=2.0, jitter=Jitter.EQUAL)
    assert [b.delay(1, u) for u in (0.0, 0.5, 0.75)] == [2.0, 3.0, 3.5]
    assert b.delay(0, 2.0) == 2.0
    assert b.delay(0, -2.0) == 1.0


# Policy -----------------------------------------------------------------------------------


def test_policy_defaults() -> None:
    p = Policy()
    assert (p.name, p.max_attempts, p.deadline, p.rate_limit, p.max_server_wait) == (
        "default", 3, 10.0, RateLimitMode.WAIT, None)
    assert (p.min_attempt_time, p.attempt_timeout, p.retry_writes_with_key, p.validator) == (
        0.01, None, False, None)
    assert p.idempotent_methods == frozenset({"GET", "HEAD", "OPTIONS"})
    assert p.profile is get_profile("generic")


@pytest.mark.parametrize("attempts", [1, 100])
def test_max_attempts_from_1_to_100_is_accepted(attempts: int) -> None:
    assert Policy(max_attempts=attempts).max_attempts == attempts


@pytest.mark.parametrize(("attempts", "message"), [
    (0, "^max_attempts must be between 1 and 100, got 0$"),
    (101, "^max_attempts must be between 1 and 100, got 101$"),
    (True, "^max_attempts must be an integer$"),
    (2.0, "^max_attempts must be an integer$"),
])
def test_max_attempts_outside_1_to_100_or_not_an_integer_is_refused(attempts: object,
                                                                     message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        Policy(max_attempts=attempts)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["", None])
def test_a_policy_needs_a_name(name: object) -> None:
    with pytest.raises(PolicyError, match=r"^a policy needs a non-empty name$"):
        Policy(name=name)  # type: ignore[arg-type]


def test_the_deadline_is_positive_seconds_or_none() -> None:
    assert Policy(deadline=None).deadline is None
    assert Policy(deadline=timedelta(minutes=2)).deadline == 120.0
    assert Policy(deadline=1e-9).deadline == 1e-9
    with pytest.raises(PolicyError, match=r"^deadline must be positive$"):
        Policy(deadline=0)
    with pytest.raises(PolicyError, match=r"^deadline must be a finite"):
        Policy(deadline=-1)


def test_the_other_durations_are_normalised_and_checked_by_name() -> None:
    p = Policy(max_server_wait=timedelta(seconds=3), min_attempt_time=1, attempt_timeout=2)
    assert (p.max_server_wait, p.min_attempt_time, p.attempt_timeout) == (3.0, 1.0, 2.0)
    assert isinstance(p.min_attempt_time, float)
    assert isinstance(p.attempt_timeout, float)
    for name in ("max_server_wait", "min_attempt_time", "attempt_timeout"):
        with pytest.raises(PolicyError, match=rf"^{name} must be a finite"):
            Policy(**{name: -1})
    with pytest.raises(PolicyError, match=r"^min_attempt_time is required$"):
        Policy(min_attempt_time=None)  # type: ignore[arg-type]


def test_the_backoff_must_be_a_backoff() -> None:
    with pytest.raises(PolicyError, match=r"^backoff must be a Backoff$"):
        Policy(backoff={"base": 1})  # type: ignore[arg-type]


def test_the_rate_limit_mode_is_read_by_name_and_an_unknown_one_refused() -> None:
    assert Policy(rate_limit="fail_fast").rate_limit is RateLimitMode.FAIL_FAST  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match=r"^rate_limit must be 'wait' or 'fail_fast', got 'x'$"):
        Policy(rate_limit="x")  # type: ignore[arg-type]


def test_idempotent_methods_are_upper_cased_names() -> None:
    assert Policy(idempotent_methods=["get", "Put"]).idempotent_methods == {"GET", "PUT"}
    with pytest.raises(PolicyError, match=r"^idempotent_methods must be a collection"):
        Policy(idempotent_methods="GET")  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match=r"^idempotent_methods: 'GET/1' is not an HTTP method$"):
        Policy(idempotent_methods=["GET/1"])


def test_retry_writes_with_key_is_a_bool_and_the_validator_callable() -> None:
    with pytest.raises(PolicyError, match=r"^retry_writes_with_key must be a bool$"):
        Policy(retry_writes_with_key=1)  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match=r"^validator must be callable$"):
        Policy(validator="json")  # type: ignore[arg-type]


def test_a_profile_is_looked_up_by_name_and_an_unknown_one_is_a_policy_error() -> None:
    assert Policy(profile="github").profile is get_profile("github")  # type: ignore[arg-type]
    with pytest.raises(PolicyError, match="no-such-provider"):  # the lookup's own words
        Policy(profile="no-such-provider")  # type: ignore[arg-type]


def test_replace_validates_the_copy() -> None:
    p = Policy(name="a")
    assert p.replace(max_attempts=5) == Policy(name="a", max_attempts=5)
    with pytest.raises(PolicyError):
        p.replace(max_attempts=0)


@pytest.mark.parametrize(("method", "key", "writes", "sent", "allowed"), [
    ("POST", False, False, False, True),  # never sent: safe for any method
    ("GET", False, False, True, True),
    ("get", False, False, True, True),  # the method's case does not matter
    (None, False, False, True, True),  # a plain callable counts as a GET
    ("POST", False, False, True, False),
    ("POST", True, False, True, False),  # a key alone is not enough
    ("POST", False, True, True, False),  # nor is the permission alone
    ("POST", True, True, True, True),
])
def test_may_retry(method: str | None, key: bool, writes: bool, sent: bool,
                   allowed: bool) -> None:
    policy = Policy(retry_writes_with_key=writes)
    assert policy.may_retry(method, has_idempotency_key=key, sent=sent) is allowed


# The presets -------------------------------------------------------------------------------


def test_the_interactive_preset_is_pinned() -> None:
    p = interactive()
    assert (p.name, p.max_attempts, p.deadline, p.rate_limit, p.max_server_wait) == (
        "interactive", 3, 2.0, RateLimitMode.FAIL_FAST, 1.0)
    assert p.backoff == Backoff(base=0.05, cap=0.25, multiplier=2.0, jitter=Jitter.EQUAL)
    assert p.profile is get_profile("generic")
    changed = interactive(max_attempts=2, profile="github")
    assert (changed.max_attempts, changed.profile.name, changed.deadline) == (2, "github", 2.0)


def test_the_background_preset_is_pinned() -> None:
    p = background()
    assert (p.name, p.max_attempts, p.deadline, p.rate_limit, p.max_server_wait) == (
        "background", 5, 900.0, RateLimitMode.WAIT, None)
    assert p.backoff == Backoff(base=1.0, cap=60.0, multiplier=2.0, jitter=Jitter.FULL)
    assert p.profile == get_profile("auto")
    assert background("github").profile is get_profile("github")
    changed = background("stripe", deadline=60)
    assert (changed.profile.name, changed.deadline, changed.max_attempts) == ("stripe", 60.0, 5)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_preset_is_the_policy_of_its_name(name: str) -> None:
    policy = PRESETS[name]()
    assert policy.name == name
    assert policy == {"interactive": interactive(), "background": background(),
                      "default": Policy()}[name]
