"""Hypothesis strategies for the pure core: responses, headers, scripts and policies."""

from __future__ import annotations

import email.utils
from typing import Any

from hypothesis import strategies as st

from retrybudget import Backoff, Jitter, Policy

WALL0 = 1_800_000_000.0

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
    """Response headers: rate-limit evidence in many forms, sometimes conflicting or broken."""
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
