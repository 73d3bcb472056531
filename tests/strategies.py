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


def assert_reached(prop: str, checks: tuple[str, ...], minimum: int = 20) -> None:
    """Fail unless every check of ``prop`` ran at least ``minimum`` times (in a short run of
    fewer than 200 examples, at least once per 30); skip when ``prop`` did not run in this
    session."""
    import pytest

    examples = REACHED[f"{prop}:examples"]
    if examples == 0:
        pytest.skip(f"{prop} did not run in this session")
    needed = minimum if examples >= 200 else max(1, examples // 30)
    counts = {c: REACHED[f"{prop}:{c}"] for c in checks}
    assert all(n >= needed for n in counts.values()), (prop, examples, needed, counts)


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


@st.composite
def durations(draw: st.DrawFn) -> str:
    """Go duration strings as OpenAI sends them: ``6m0s``, ``1s``, ``20ms``, ``1h2m3.5s``."""
    h, m = draw(st.integers(0, 3)), draw(st.integers(0, 59))
    sec = draw(st.one_of(st.integers(0, 59).map(str),
                         st.floats(0, 59.999, allow_nan=False).map(lambda f: f"{f:.3f}")))
    if draw(st.booleans()):
        return f"{draw(st.integers(0, 999))}ms"
    return (f"{h}h" if h else "") + (f"{m}m" if h or m else "") + f"{sec}s"


@st.composite
def rfc3339(draw: st.DrawFn) -> str:
    """RFC 3339 timestamps as Anthropic sends them, UTC or with an offset, maybe fractional."""
    at = dt.datetime.fromtimestamp(WALL0 + draw(st.integers(-10, 100_000)), dt.timezone.utc)
    hours = draw(st.integers(-12, 12))
    at = at.astimezone(dt.timezone(dt.timedelta(hours=hours)))
    text = at.strftime("%Y-%m-%dT%H:%M:%S")
    if draw(st.booleans()):
        text += "." + str(draw(st.integers(0, 999_999))).zfill(6)
    zone = "Z" if hours == 0 and draw(st.booleans()) else at.strftime("%z")
    return text + (zone if zone == "Z" else f"{zone[:3]}:{zone[3:]}")


def _ietf_item(name: str, r: int, t: int) -> str:
    return f'"{name}";r={r};t={t}'


@st.composite
def header_family(draw: st.DrawFn) -> list[tuple[str, str]]:
    """The headers of one provider family, with values in that family's grammar."""
    family = draw(st.sampled_from([
        "retry-after", "retry-after-date", "retry-after-ms", "github", "x", "discord", "openai",
        "anthropic", "ietf-split", "ietf-dictionary", "ietf-list", "shopify",
    ]))
    event(f"family: {family}")
    remaining = draw(st.one_of(st.just("0"), counts))
    if family == "retry-after":
        return [("Retry-After", draw(st.one_of(whole_seconds, fraction_seconds)))]
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
        kind = draw(st.sampled_from(["requests", "tokens"]))
        return [(f"x-ratelimit-limit-{kind}", "10000"), (f"x-ratelimit-remaining-{kind}", remaining),
                (f"x-ratelimit-reset-{kind}", draw(durations()))]
    if family == "anthropic":
        kind = draw(st.sampled_from(["requests", "tokens", "input-tokens"]))
        return [(f"anthropic-ratelimit-{kind}-limit", "1000"),
                (f"anthropic-ratelimit-{kind}-remaining", remaining),
                (f"anthropic-ratelimit-{kind}-reset", draw(rfc3339()))]
    if family == "ietf-split":
        return [("RateLimit-Limit", "100"), ("RateLimit-Remaining", remaining),
                ("RateLimit-Reset", draw(deltas))]
    if family == "ietf-dictionary":
        return [("RateLimit", f"limit=100, remaining={remaining}, reset={draw(deltas)}")]
    if family == "ietf-list":
        items = draw(st.lists(st.tuples(st.sampled_from(["default", "burst", "daily"]),
                                        st.integers(0, 100), st.integers(0, 100_000)),
                              min_size=1, max_size=3))
        return [("RateLimit", ", ".join(_ietf_item(*i) for i in items)),
                ("RateLimit-Policy", '"default";q=100;w=60')]
    return [("X-Shopify-Shop-Api-Call-Limit", f"{draw(st.integers(0, 40))}/40")]


@st.composite
def header_pairs(draw: st.DrawFn) -> list[tuple[str, str]]:
    """One response's rate-limit headers: one to three families, sometimes with a broken,
    repeated or unrelated header, so the parser's notes and conflicts are reached too."""
    pairs = [p for _ in range(draw(st.integers(1, 3))) for p in draw(header_family())]
    twist = draw(st.sampled_from(["none"] * 5 + ["garbage", "duplicate", "unrelated"]))
    event(f"twist: {twist}")
    if twist == "garbage":
        i = draw(st.integers(0, len(pairs) - 1))
        pairs[i] = (pairs[i][0], draw(st.text(max_size=20)))
    elif twist == "duplicate":
        name = draw(st.sampled_from([n for n, _ in pairs]))
        pairs.append((name, draw(st.one_of(whole_seconds, epochs, st.text(max_size=8)))))
    elif twist == "unrelated":
        pairs.append(("Content-Type", "application/json"))
    return pairs

STATUSES = st.one_of(
    st.sampled_from([200, 201, 204, 302, 400, 401, 403, 404, 408, 409, 422, 429, 500, 502, 503,
                     504, 529]),
    st.integers(min_value=100, max_value=599),
)

garbage = st.text(max_size=30)


@st.composite
def retry_after_values(draw: st.DrawFn) -> str:
    """Retry-After values in every form, valid and not."""
    kind = draw(st.sampled_from(["int", "float", "date", "neg", "huge", "garbage", "past"]))
    if kind == "int":
        return str(draw(st.integers(0, 100_000)))
    if kind == "float":
        return f"{draw(st.floats(0, 1000, allow_nan=False)):.3f}"
    if kind == "date":
        return email.utils.formatdate(WALL0 + draw(st.integers(-100, 100_000)), usegmt=True)
    if kind == "past":
        return email.utils.formatdate(WALL0 - draw(st.integers(1, 10**6)), usegmt=True)
    if kind == "neg":
        return str(-draw(st.integers(1, 10**6)))
    if kind == "huge":
        return "9" * draw(st.integers(12, 400))
    return draw(garbage)


@st.composite
def header_sets(draw: st.DrawFn) -> dict[str, str]:
    """Response headers: rate-limit evidence in many forms, sometimes conflicting or broken.

    Half the time the provider families' grammars (:func:`header_pairs`); else a few
    headers chosen independently, valid or not.
    """
    if draw(st.booleans()):
        return dict(draw(header_pairs()))
    headers: dict[str, str] = {}
    if draw(st.booleans()):
        headers["Retry-After"] = draw(retry_after_values())
    if draw(st.booleans()):
        headers["x-ratelimit-remaining"] = draw(
            st.one_of(st.sampled_from(["0", "1", "4999"]), garbage)
        )
    if draw(st.booleans()):
        headers["x-ratelimit-reset"] = draw(st.one_of(
            st.integers(-10, 10**5).map(lambda d: str(int(WALL0) + d)),
            st.integers(0, 10**5).map(str),
            garbage,
        ))
    if draw(st.booleans()):
        headers["retry-after-ms"] = draw(st.one_of(st.integers(-5, 10**7).map(str), garbage))
    if draw(st.booleans()):
        headers["RateLimit"] = draw(st.one_of(
            st.builds(lambda r, t: f'"default";r={r};t={t}', st.integers(0, 100), st.integers(0, 10**4)),
            garbage,
        ))
    return headers


@st.composite
def steps(draw: st.DrawFn) -> dict[str, Any]:
    """One scripted provider step: a response, a reset, a refused connection or a slow answer."""
    kind = draw(st.sampled_from(["response"] * 6 + ["reset", "refused"]))
    if kind != "response":
        return {kind: True, "delay_s": 0.0}
    status = draw(STATUSES)
    body = draw(st.sampled_from([
        '{"available": true}', '{"message": "You have exceeded a secondary rate limit"}',
        '{"message": "Resource not accessible by integration"}', "<html>maintenance</html>", "[]",
    ]))
    return {
        "status": status,
        "headers": draw(header_sets()),
        "body_text": body,
        "delay_s": draw(st.one_of(st.just(0.0), st.floats(0, 5, allow_nan=False))),
    }


scripts = st.lists(steps(), min_size=1, max_size=8)


@st.composite
def policies(draw: st.DrawFn) -> Policy:
    """Policies across the whole range of budgets and rules."""
    return Policy(
        name="generated",
        max_attempts=draw(st.integers(1, 6)),
        deadline=draw(st.one_of(st.none(), st.floats(0.05, 120, allow_nan=False))),
        backoff=Backoff(
            base=draw(st.floats(0, 5, allow_nan=False)),
            cap=draw(st.floats(0, 30, allow_nan=False)),
            multiplier=draw(st.floats(1, 4, allow_nan=False)),
            jitter=draw(st.sampled_from(list(Jitter))),
        ),
        rate_limit=draw(st.sampled_from(["wait", "fail_fast"])),
        max_server_wait=draw(st.one_of(st.none(), st.floats(0, 600, allow_nan=False))),
        retry_writes_with_key=draw(st.booleans()),
        profile=draw(st.sampled_from(["generic", "github", "openai", "anthropic", "stripe"])),
    )


methods = st.sampled_from(["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "POST", "PATCH"])


@st.composite
def wait_policies(draw: st.DrawFn) -> Policy:
    """Policies that wait for rate limits with room to do it: ``wait`` mode, a deadline far
    off (or none), no server-wait cap, and attempts to spare."""
    return Policy(
        name="generated-wait",
        max_attempts=draw(st.integers(2, 6)),
        deadline=draw(st.one_of(st.none(), st.floats(10_000, 10**6, allow_nan=False))),
        backoff=Backoff(base=0.5, cap=4.0, multiplier=2.0,
                        jitter=draw(st.sampled_from(list(Jitter)))),
        rate_limit="wait",
        max_server_wait=None,
        profile=draw(st.sampled_from(["generic", "github", "openai", "anthropic", "stripe"])),
    )


@st.composite
def throttle_steps(draw: st.DrawFn) -> dict[str, Any]:
    """A 429 (or GitHub's 403 with remaining 0) naming when to come back, or naming nothing."""
    hint = draw(st.sampled_from(["retry-after", "retry-after-ms", "date", "reset", "family",
                                 "none"]))
    event(f"throttle: {hint}")
    status, headers = 429, {}
    if hint == "retry-after":
        headers = {"Retry-After": draw(st.integers(0, 120).map(str))}
    elif hint == "retry-after-ms":
        headers = {"retry-after-ms": draw(st.integers(0, 120_000).map(str))}
    elif hint == "date":
        headers = {"Retry-After": email.utils.formatdate(WALL0 + draw(st.integers(0, 120)),
                                                         usegmt=True)}
    elif hint == "reset":
        status = draw(st.sampled_from([429, 403]))
        headers = {"x-ratelimit-remaining": "0",
                   "x-ratelimit-reset": str(int(WALL0) + draw(st.integers(0, 120)))}
    elif hint == "family":
        headers = dict(draw(header_pairs()))
    return {"status": status, "headers": headers, "body_text": "{}", "delay_s": 0.0}


throttled_scripts = st.tuples(
    st.lists(throttle_steps(), min_size=1, max_size=4),
    st.sampled_from([{"status": 200, "headers": {}, "body_text": '{"available": true}',
                      "delay_s": 0.0}]),
).map(lambda t: [*t[0], t[1]])
"""One to four rate limits, then a success."""
