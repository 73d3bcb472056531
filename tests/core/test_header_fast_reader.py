"""The fast header reader returns exactly what the general reader returns.

:func:`~retrybudget.core.headers.parse_rate_limit_headers` reads a common header set (one
vendor quota family with integer values, a ``Date``, unrelated headers) from what the set was
once found to say, and leaves everything else to the general reader. The property compares
the two for every built-in profile's header dialect, at times around the resets and with the
provider's clock skewed, over header sets the fast reader takes and ones it must refuse.
"""

from __future__ import annotations

import email.utils
import math
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrybudget.core import headers as headers_module
from retrybudget.core.headers import (
    MAX_CLOCK_SKEW,
    MAX_HINT_SECONDS,
    NO_RATE_LIMIT_INFO,
    RateLimitInfo,
    _fast,
    _read,
    normalize_headers,
    parse_rate_limit_headers,
)
from retrybudget.core.profiles import PROFILES
from tests.support.strategies import WALL0, assert_reached, header_pairs, reached, tried

PROP = "test_the_fast_reader_agrees_with_the_general_one"
RULES = sorted({p.header_rules for p in PROFILES.values()}, key=repr)
general = _read._parse_general  # the reader the fast one must agree with

counts = st.integers(0, 6000).map(str)
resets = st.one_of(
    st.sampled_from([str(int(WALL0 + MAX_HINT_SECONDS) + 500), "4102444800"]),  # clamped
    st.integers(-100, 4000).map(lambda d: str(int(WALL0) + d)),  # an epoch near now
    st.integers(0, 4000).map(str),  # a delta
    st.sampled_from([str(int(WALL0 + MAX_HINT_SECONDS) + 500), "4102444800"]),  # clamped
)


@st.composite
def github_like(draw: st.DrawFn) -> list[tuple[str, str]]:
    """A GitHub 200 (some of its five quota headers, in any order) among unrelated headers."""
    pairs = [("x-ratelimit-limit", draw(st.sampled_from(["5000", "5000", "60"]))),
             ("x-ratelimit-remaining", draw(counts)),
             ("x-ratelimit-used", draw(counts)),
             ("x-ratelimit-resource", draw(st.sampled_from(["core", "core", "search", "a,b", ""])))]
    pairs = draw(st.permutations(pairs))[: draw(st.integers(0, 4))]
    if draw(st.integers(0, 3)):
        pairs.insert(draw(st.integers(0, len(pairs))), ("x-ratelimit-reset", draw(resets)))
    extra = draw(st.lists(st.sampled_from([("content-type", "application/json"),
                                           ("etag", 'W/"abc"'), ("x-github-request-id", "1:2"),
                                           ("x-ratelimit-reset", "5"), ("retry-after", "3")]),
                          max_size=draw(st.sampled_from([0, 0, 2]))))
    return pairs + extra


# 1,000 by default: at 300 the rarer branches below were reached fewer times than
# test_the_fast_reader_reached_its_checks asks in about one run of six (about 1.5 s here).
@settings(max_examples=int(os.environ.get("RB_PROPERTY_EXAMPLES", "1000")))
@given(
    pairs=st.one_of(github_like(), github_like(), github_like(), header_pairs()),
    date=st.one_of(st.none(), st.integers(-int(MAX_CLOCK_SKEW), int(MAX_CLOCK_SKEW)),
                   st.integers(-2 * int(MAX_CLOCK_SKEW), 2 * int(MAX_CLOCK_SKEW)),
                   st.just("not a date"), st.none(),
                   # a Date near our clock: within its one-second resolution (no skew) or not
                   st.tuples(st.just("near"), st.integers(-2, 1)),
                   st.tuples(st.just("near"), st.integers(-1, 0))),
    now=st.floats(WALL0 - 200, WALL0 + 200, allow_nan=False),
    rules=st.sampled_from(RULES),
    twice=st.booleans(),
)
def test_the_fast_reader_agrees_with_the_general_one(
    pairs: list[tuple[str, str]], date: int | str | tuple[str, int] | None, now: float,
    rules: headers_module.HeaderRules, twice: bool,
) -> None:
    tried(PROP)
    near = None
    if isinstance(date, tuple):  # the whole second of our clock, moved by -2..+1 s
        near = math.floor(now) + date[1] - now
        text = email.utils.formatdate(math.floor(now) + date[1], usegmt=True)
        pairs = [("date", text), *pairs]
    elif date is not None:
        text = date if isinstance(date, str) else email.utils.formatdate(WALL0 + date, usegmt=True)
        pairs = [("date", text), *pairs]
    headers = normalize_headers(pairs)
    if twice:  # read from the remembered header set the second time
        parse_rate_limit_headers(headers, now - 7.0, rules)
    expected = general(headers, now, rules)
    assert parse_rate_limit_headers(headers, now, rules) == expected
    fast = _fast._read_simple(headers, now, rules)
    if fast is not None:
        assert fast == expected
        if fast is NO_RATE_LIMIT_INFO:
            reached(PROP, "nothing to read")
        else:
            reached(PROP, "read fast")
            if any(name == "x-ratelimit-reset" for name, _ in headers) and fast.notes:
                reached(PROP, "a clamped reset read fast")
            elif fast.reset is not None and fast.reset.delay > 0:
                reached(PROP, "a reset within the clamp read fast")
            if any(name == "date" for name, _ in headers):
                reached(PROP, "read fast against the provider's clock")
            if near is not None and fast.reset is not None:
                reached(PROP, "a Date under a second off read fast" if abs(near) < 1
                        else "a Date a second or more off read fast")
    else:
        reached(PROP, "left to the general reader")


def test_the_fast_reader_reached_its_checks() -> None:
    assert_reached(PROP, ("nothing to read", "read fast", "read fast against the provider's clock",
                          "left to the general reader"))
    assert_reached(PROP, ("a clamped reset read fast", "a reset within the clamp read fast"),
                   minimum=5)
    assert_reached(PROP, ("a Date under a second off read fast",
                          "a Date a second or more off read fast"), minimum=5)


def test_the_remembered_sets_and_names_are_bounded() -> None:
    rules = headers_module.HeaderRules()
    for i in range(3 * _fast._CACHE_MAX):
        headers = (("x-ratelimit-limit", "10"), (f"x-unrelated-{i}", "1"))
        assert parse_rate_limit_headers(headers, WALL0, rules).limit == 10
    assert len(rules.plans) <= _fast._CACHE_MAX
    assert len(rules.roles) <= _fast._CACHE_MAX


def test_fast_construction_gives_frozen_values_of_their_own_class() -> None:
    import copy
    import dataclasses
    import pickle

    from retrybudget.core._values import fast_init

    info = RateLimitInfo(limit=5, remaining=4, evidence=(("x-ratelimit-limit", "5"),))
    assert type(info) is RateLimitInfo
    assert info == dataclasses.replace(info) == copy.copy(info)
    assert pickle.loads(pickle.dumps(info)) == info  # noqa: S301 - our own bytes
    assert (info.limit, info.remaining, info.reset, info.notes) == (5, 4, None, ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.limit = 6  # type: ignore[misc]

    @fast_init
    @dataclasses.dataclass(frozen=True, slots=True)
    class Base:
        a: int
        b: str = "b"

    @fast_init
    @dataclasses.dataclass(frozen=True, slots=True)
    class Derived(Base):  # not its own layout: filled through the slot descriptors
        c: int = 3

    class Plain(Base):  # a subclass fast_init never saw runs the base's __init__
        pass

    assert (type(Base(1)), Base(1).b) == (Base, "b")
    assert (type(Derived(1, "x")), Derived(1, "x").c) == (Derived, 3)
    assert type(Plain(2)) is Plain
    assert Plain(2).a == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        Plain(2).a = 3  # type: ignore[misc]
