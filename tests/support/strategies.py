"""Hypothesis strategies for the pure core: responses, headers, scripts and policies.

Header values follow the grammars the providers document (Retry-After seconds and HTTP-date,
epoch and delta resets, Go durations, RFC 3339, the IETF RateLimit list, dictionary and split
forms), so generated responses reach the parser's checks instead of its early exit; each draw
labels its family with :func:`hypothesis.event`, so ``--hypothesis-show-statistics`` shows what
was covered. :func:`reached` counts, per property, how often a check really ran, and
:func:`assert_reached` fails a property whose check never ran.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import os
from collections import Counter
from typing import Any

from hypothesis import event
from hypothesis import strategies as st

from retrybudget import Backoff, Jitter, Policy

WALL0 = 1_800_000_000.0

# How often each property reached each of its checks (and how many examples it ran) -------

REACHED: Counter[str] = Counter()


def tried(prop: str) -> None:
    """Count one example of property ``prop``."""
    REACHED[f"{prop}:examples"] += 1


def reached(prop: str, check: str) -> None:
    """Count that ``check`` of property ``prop`` ran on this example (and say so in the
    statistics)."""
    REACHED[f"{prop}:{check}"] += 1
    event(f"reached: {check}")


def assert_reached(prop: str, checks: tuple[str, ...], minimum: int = 20, per: int = 30) -> None:
    """Fail unless every check of ``prop`` ran at least ``minimum`` times (in a short run of
    fewer than 200 examples, at least once per ``per``: a rarer check names a larger one);
    skip when ``prop`` did not run in this session."""
    import pytest

    examples = REACHED[f"{prop}:examples"]
    if examples == 0:
        pytest.skip(f"{prop} did not run in this session")
    needed = minimum if examples >= 200 else max(1, examples // per)
    counts = {c: REACHED[f"{prop}:{c}"] for c in checks}
    assert all(n >= needed for n in counts.values()), (prop, examples, needed, counts)


def examples(default: int, cap: int | None = None) -> int:
    """How many examples a property runs: ``RB_PROPERTY_EXAMPLES`` (CI sets 10,000; the
    mutation runs 30), else ``default``; never more than ``cap`` when one is given.

    A property over a small pure grammar (one parser, one decision) saturates its checks and
    its branches long before 10,000 examples; its cap says so explicitly and keeps CI's time
    for the flow property, whose input space (scripts of up to eight steps) is the largest.
    """
    count = int(os.environ.get("RB_PROPERTY_EXAMPLES", str(default)))
    return count if cap is None else min(cap, count)


# Header values in the providers' grammars ------------------------------------------------

def _label(kind: str, value: str) -> str:
    event(kind)
    return value


whole_seconds = st.integers(0, 3600).map(str)
fraction_seconds = st.floats(0, 600, allow_nan=False).map(lambda f: f"{f:.3f}")
http_dates = st.integers(-100, 100_000).map(
    lambda d: email.utils.formatdate(WALL0 + d, usegmt=True))
epochs = st.integers(-10, 100_000).map(lambda d: str(int(WALL0) + d))
fractional_epochs = st.floats(-10, 100_000, allow_nan=False).map(lambda d: f"{WALL0 + d:.3f}")
deltas = st.integers(0, 100_000).map(str)
milliseconds = st.integers(0, 10**7).map(str)
counts = st.integers(0, 10_000).map(str)


# Every strategy a composite draws from is built once, here at import: a strategy built inside
# a draw is validated and labelled again on every example, which cost more than the test body.
_booleans = st.booleans()
_hours, _minutes, _ms = st.integers(0, 3), st.integers(0, 59), st.integers(0, 999)
_duration_seconds = st.one_of(st.integers(0, 59).map(str),
                              st.floats(0, 59.999, allow_nan=False).map(lambda f: f"{f:.3f}"))


@st.composite
def _durations(draw: st.DrawFn) -> str:
    h, m = draw(_hours), draw(_minutes)
    sec = draw(_duration_seconds)
    if draw(_booleans):
        return f"{draw(_ms)}ms"
    return (f"{h}h" if h else "") + (f"{m}m" if h or m else "") + f"{sec}s"


_DURATIONS = _durations()


def durations() -> st.SearchStrategy[str]:
    """Go duration strings as OpenAI sends them: ``6m0s``, ``1s``, ``20ms``, ``1h2m3.5s``."""
    return _DURATIONS


_offsets_s, _zones, _micros = st.integers(-10, 100_000), st.integers(-12, 12), st.integers(0, 999_999)


@st.composite
def _rfc3339(draw: st.DrawFn) -> str:
    at = dt.datetime.fromtimestamp(WALL0 + draw(_offsets_s), dt.timezone.utc)
    hours = draw(_zones)
    at = at.astimezone(dt.timezone(dt.timedelta(hours=hours)))
    text = at.strftime("%Y-%m-%dT%H:%M:%S")
    if draw(_booleans):
        text += "." + str(draw(_micros)).zfill(6)
    zone = "Z" if hours == 0 and draw(_booleans) else at.strftime("%z")
    return text + (zone if zone == "Z" else f"{zone[:3]}:{zone[3:]}")


_RFC3339 = _rfc3339()


def rfc3339() -> st.SearchStrategy[str]:
    """RFC 3339 timestamps as Anthropic sends them, UTC or with an offset, maybe fractional."""
    return _RFC3339


def _ietf_item(name: str, r: int, t: int) -> str:
    return f'"{name}";r={r};t={t}'


FAMILIES = ("retry-after", "retry-after-date", "retry-after-ms", "github", "x", "discord",
            "openai", "anthropic", "ietf-split", "ietf-dictionary", "ietf-list", "shopify")
_families = st.sampled_from(FAMILIES)
_remaining = st.one_of(st.just("0"), counts)
_retry_after_seconds = st.one_of(whole_seconds, fraction_seconds)
_openai_kinds = st.sampled_from(["requests", "tokens"])
_anthropic_kinds = st.sampled_from(["requests", "tokens", "input-tokens"])
_ietf_items = st.lists(st.tuples(st.sampled_from(["default", "burst", "daily"]),
                                 st.integers(0, 100), st.integers(0, 100_000)),
                       min_size=1, max_size=3)
_shopify_used = st.integers(0, 40)


@st.composite
def _header_family(draw: st.DrawFn) -> list[tuple[str, str]]:
    family = draw(_families)
    event(f"family: {family}")
    remaining = draw(_remaining)
    if family == "retry-after":
        return [("Retry-After", draw(_retry_after_seconds))]
    if family == "retry-after-date":
        return [("Retry-After", draw(http_dates))]
    if family == "retry-after-ms":
        return [("retry-after-ms", draw(milliseconds))]
    if family == "github":
        return [("x-ratelimit-limit", "5000"), ("x-ratelimit-remaining", remaining),
                ("x-ratelimit-used", draw(counts)), ("x-ratelimit-reset", draw(epochs)),
                ("x-ratelimit-resource", "core")]
    if family == "x":
        return [("x-rate-limit-limit", "900"), ("x-rate-limit-remaining", remaining),
                ("x-rate-limit-reset", draw(epochs))]
    if family == "discord":
        return [("x-ratelimit-limit", "5"), ("x-ratelimit-remaining", remaining),
                ("x-ratelimit-reset", draw(fractional_epochs)),
                ("x-ratelimit-reset-after", draw(fraction_seconds)),
                ("x-ratelimit-bucket", "abcd1234")]
    if family == "openai":
        kind = draw(_openai_kinds)
        return [(f"x-ratelimit-limit-{kind}", "10000"), (f"x-ratelimit-remaining-{kind}", remaining),
                (f"x-ratelimit-reset-{kind}", draw(_DURATIONS))]
    if family == "anthropic":
        kind = draw(_anthropic_kinds)
        return [(f"anthropic-ratelimit-{kind}-limit", "1000"),
                (f"anthropic-ratelimit-{kind}-remaining", remaining),
                (f"anthropic-ratelimit-{kind}-reset", draw(_RFC3339))]
    if family == "ietf-split":
        return [("RateLimit-Limit", "100"), ("RateLimit-Remaining", remaining),
                ("RateLimit-Reset", draw(deltas))]
    if family == "ietf-dictionary":
        return [("RateLimit", f"limit=100, remaining={remaining}, reset={draw(deltas)}")]
    if family == "ietf-list":
        items = draw(_ietf_items)
        return [("RateLimit", ", ".join(_ietf_item(*i) for i in items)),
                ("RateLimit-Policy", '"default";q=100;w=60')]
    return [("X-Shopify-Shop-Api-Call-Limit", f"{draw(_shopify_used)}/40")]


_HEADER_FAMILY = _header_family()


def header_family() -> st.SearchStrategy[list[tuple[str, str]]]:
    """The headers of one provider family, with values in that family's grammar."""
    return _HEADER_FAMILY


_family_count = st.integers(1, 3)
_twists = st.sampled_from(["none"] * 5 + ["garbage", "duplicate", "unrelated"])
_garbage_value = st.text(max_size=20)
_duplicate_value = st.one_of(whole_seconds, epochs, st.text(max_size=8))


@st.composite
def _header_pairs(draw: st.DrawFn) -> list[tuple[str, str]]:
    pairs = [p for _ in range(draw(_family_count)) for p in draw(_HEADER_FAMILY)]
    twist = draw(_twists)
    event(f"twist: {twist}")
    if twist == "garbage":
        i = draw(st.integers(0, len(pairs) - 1))  # its bound depends on the draw above
        pairs[i] = (pairs[i][0], draw(_garbage_value))
    elif twist == "duplicate":
        name = draw(st.sampled_from([n for n, _ in pairs]))  # likewise
        pairs.append((name, draw(_duplicate_value)))
    elif twist == "unrelated":
        pairs.append(("Content-Type", "application/json"))
    return pairs


_HEADER_PAIRS = _header_pairs()


def header_pairs() -> st.SearchStrategy[list[tuple[str, str]]]:
    """One response's rate-limit headers: one to three families, sometimes with a broken,
    repeated or unrelated header, so the parser's notes and conflicts are reached too."""
    return _HEADER_PAIRS


STATUSES = st.one_of(
    st.sampled_from([200, 201, 204, 302, 400, 401, 403, 404, 408, 409, 422, 429, 500, 502, 503,
                     504, 529]),
    st.integers(min_value=100, max_value=599),
)

garbage = st.text(max_size=30)

_retry_after_kinds = st.sampled_from(["int", "float", "date", "neg", "huge", "garbage", "past"])
_ra_int, _ra_float = st.integers(0, 100_000), st.floats(0, 1000, allow_nan=False)
_ra_date, _ra_past = st.integers(-100, 100_000), st.integers(1, 10**6)
_ra_neg, _ra_huge = st.integers(1, 10**6), st.integers(12, 400)


@st.composite
def _retry_after_values(draw: st.DrawFn) -> str:
    kind = draw(_retry_after_kinds)
    if kind == "int":
        return str(draw(_ra_int))
    if kind == "float":
        return f"{draw(_ra_float):.3f}"
    if kind == "date":
        return email.utils.formatdate(WALL0 + draw(_ra_date), usegmt=True)
    if kind == "past":
        return email.utils.formatdate(WALL0 - draw(_ra_past), usegmt=True)
    if kind == "neg":
        return str(-draw(_ra_neg))
    if kind == "huge":
        return "9" * draw(_ra_huge)
    return draw(garbage)


_RETRY_AFTER_VALUES = _retry_after_values()


def retry_after_values() -> st.SearchStrategy[str]:
    """Retry-After values in every form, valid and not."""
    return _RETRY_AFTER_VALUES


_remaining_values = st.one_of(st.sampled_from(["0", "1", "4999"]), garbage)
_reset_values = st.one_of(
    st.integers(-10, 10**5).map(lambda d: str(int(WALL0) + d)),
    st.integers(0, 10**5).map(str),
    garbage,
)
_ms_values = st.one_of(st.integers(-5, 10**7).map(str), garbage)
_ratelimit_values = st.one_of(
    st.builds(lambda r, t: f'"default";r={r};t={t}', st.integers(0, 100), st.integers(0, 10**4)),
    garbage,
)


@st.composite
def _header_sets(draw: st.DrawFn) -> dict[str, str]:
    if draw(_booleans):
        return dict(draw(_HEADER_PAIRS))
    headers: dict[str, str] = {}
    if draw(_booleans):
        headers["Retry-After"] = draw(_RETRY_AFTER_VALUES)
    if draw(_booleans):
        headers["x-ratelimit-remaining"] = draw(_remaining_values)
    if draw(_booleans):
        headers["x-ratelimit-reset"] = draw(_reset_values)
    if draw(_booleans):
        headers["retry-after-ms"] = draw(_ms_values)
    if draw(_booleans):
        headers["RateLimit"] = draw(_ratelimit_values)
    return headers


_HEADER_SETS = _header_sets()


def header_sets() -> st.SearchStrategy[dict[str, str]]:
    """Response headers: rate-limit evidence in many forms, sometimes conflicting or broken.

    Half the time the provider families' grammars (:func:`header_pairs`); else a few
    headers chosen independently, valid or not.
    """
    return _HEADER_SETS


_step_kinds = st.sampled_from(["response"] * 6 + ["reset", "refused"])
_bodies = st.sampled_from([
    '{"available": true}', '{"message": "You have exceeded a secondary rate limit"}',
    '{"message": "Resource not accessible by integration"}', "<html>maintenance</html>", "[]",
])
_delays = st.one_of(st.just(0.0), st.floats(0, 5, allow_nan=False))


@st.composite
def _steps(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(_step_kinds)
    if kind != "response":
        return {kind: True, "delay_s": 0.0}
    status = draw(STATUSES)
    body = draw(_bodies)
    return {
        "status": status,
        "headers": draw(_HEADER_SETS),
        "body_text": body,
        "delay_s": draw(_delays),
    }


_STEPS = _steps()


def steps() -> st.SearchStrategy[dict[str, Any]]:
    """One scripted provider step: a response, a reset, a refused connection or a slow answer."""
    return _STEPS


scripts = st.lists(_STEPS, min_size=1, max_size=8)

_PROFILE_NAMES = st.sampled_from(["generic", "github", "openai", "anthropic", "stripe"])
_jitters = st.sampled_from(list(Jitter))
_max_attempts = st.integers(1, 6)
_deadlines = st.one_of(st.none(), st.floats(0.05, 120, allow_nan=False))
_bases, _caps = st.floats(0, 5, allow_nan=False), st.floats(0, 30, allow_nan=False)
_multipliers = st.floats(1, 4, allow_nan=False)
_rate_limit_modes = st.sampled_from(["wait", "fail_fast"])
_server_waits = st.one_of(st.none(), st.floats(0, 600, allow_nan=False))


@st.composite
def _policies(draw: st.DrawFn) -> Policy:
    return Policy(
        name="generated",
        max_attempts=draw(_max_attempts),
        deadline=draw(_deadlines),
        backoff=Backoff(
            base=draw(_bases),
            cap=draw(_caps),
            multiplier=draw(_multipliers),
            jitter=draw(_jitters),
        ),
        rate_limit=draw(_rate_limit_modes),
        max_server_wait=draw(_server_waits),
        retry_writes_with_key=draw(_booleans),
        profile=draw(_PROFILE_NAMES),
    )


_POLICIES = _policies()


def policies() -> st.SearchStrategy[Policy]:
    """Policies across the whole range of budgets and rules."""
    return _POLICIES


methods = st.sampled_from(["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "POST", "PATCH"])

_wait_attempts = st.integers(2, 6)
_far_deadlines = st.one_of(st.none(), st.floats(10_000, 10**6, allow_nan=False))


@st.composite
def _wait_policies(draw: st.DrawFn) -> Policy:
    return Policy(
        name="generated-wait",
        max_attempts=draw(_wait_attempts),
        deadline=draw(_far_deadlines),
        backoff=Backoff(base=0.5, cap=4.0, multiplier=2.0, jitter=draw(_jitters)),
        rate_limit="wait",
        max_server_wait=None,
        profile=draw(_PROFILE_NAMES),
    )


_WAIT_POLICIES = _wait_policies()


def wait_policies() -> st.SearchStrategy[Policy]:
    """Policies that wait for rate limits with room to do it: ``wait`` mode, a deadline far
    off (or none), no server-wait cap, and attempts to spare."""
    return _WAIT_POLICIES


_hints = st.sampled_from(["retry-after", "retry-after-ms", "date", "reset", "family", "none"])
_hint_seconds = st.integers(0, 120)
_hint_ms = st.integers(0, 120_000)
_reset_statuses = st.sampled_from([429, 403])


@st.composite
def _throttle_steps(draw: st.DrawFn) -> dict[str, Any]:
    hint = draw(_hints)
    event(f"throttle: {hint}")
    status, headers = 429, {}
    if hint == "retry-after":
        headers = {"Retry-After": str(draw(_hint_seconds))}
    elif hint == "retry-after-ms":
        headers = {"retry-after-ms": str(draw(_hint_ms))}
    elif hint == "date":
        headers = {"Retry-After": email.utils.formatdate(WALL0 + draw(_hint_seconds),
                                                         usegmt=True)}
    elif hint == "reset":
        status = draw(_reset_statuses)
        headers = {"x-ratelimit-remaining": "0",
                   "x-ratelimit-reset": str(int(WALL0) + draw(_hint_seconds))}
    elif hint == "family":
        headers = dict(draw(_HEADER_PAIRS))
    return {"status": status, "headers": headers, "body_text": "{}", "delay_s": 0.0}


_THROTTLE_STEPS = _throttle_steps()


def throttle_steps() -> st.SearchStrategy[dict[str, Any]]:
    """A 429 (or GitHub's 403 with remaining 0) naming when to come back, or naming nothing."""
    return _THROTTLE_STEPS


throttled_scripts = st.tuples(
    st.lists(_THROTTLE_STEPS, min_size=1, max_size=4),
    st.just({"status": 200, "headers": {}, "body_text": '{"available": true}', "delay_s": 0.0}),
).map(lambda t: [*t[0], t[1]])
"""One to four rate limits, then a success."""
