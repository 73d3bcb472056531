"""The acceptance cases: read them from a fixture file and build the policy each runs under."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from .._files import read_user_text
from .._fixtures import json_payload
from ..core.policy import Policy, RateLimitMode
from ..core.profiles import get_profile

__all__ = ["Case", "load_cases", "policy_for"]


@dataclass(frozen=True, slots=True)
class Case:
    """One acceptance case, with the fixture file's defaults applied."""

    id: str
    title: str
    method: str
    max_attempts: int
    deadline_s: float
    rate_limit: str
    expect_json: bool
    profile: str
    script: tuple[Mapping[str, Any], ...]
    expect: Mapping[str, Any]
    breaker: str | None = None


class _Malformed(ValueError):
    """One field of one case is unusable; the message is in the user's words."""


def _field(item: Mapping[str, Any], key: str, kind: type, default: Any = None) -> Any:
    if key not in item:
        if default is None:
            raise _Malformed(f"no {key!r}")
        return default
    value = item[key]
    wanted = {int: "a whole number", float: "a number", str: "text", bool: "true or false",
              list: "a list", dict: "an object"}[kind]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or (kind in (int, float) and isinstance(value, bool)):
        raise _Malformed(f"{key!r} must be {wanted}, got {json.dumps(value)}")
    return value


def _case(merged: Mapping[str, Any]) -> Case:
    script = _field(merged, "script", list)
    if not all(isinstance(step, dict) for step in script):
        raise _Malformed("'script' must be a list of objects")
    return Case(
        id=_field(merged, "id", str),
        title=_field(merged, "title", str, ""),
        method=_field(merged, "method", str, "GET").upper(),
        max_attempts=_field(merged, "max_attempts", int, 3),
        deadline_s=_field(merged, "deadline_s", float, 5.0),
        rate_limit=_field(merged, "rate_limit", str, "wait"),
        expect_json=_field(merged, "expect_json", bool, True),
        profile=_field(merged, "profile", str, "generic"),
        script=tuple(dict(step) for step in script),
        expect=dict(_field(merged, "expect", dict)),
        breaker=merged.get("breaker"),
    )


def load_cases(path: str | Path | None = None) -> list[Case]:
    """Read the acceptance cases (the packaged public fixtures when ``path`` is None).

    Raises:
        ValueError: naming the file (and the case and field) and what is wrong, in plain
            words, for an unreadable or malformed file.
    """
    name = str(path) if path is not None else "acceptance.json (packaged)"
    if path is None:
        text = resources.files("retrybudget.data").joinpath("acceptance.json").read_text("utf-8")
    else:
        text = read_user_text(path, name)
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{name}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("cases"), list):
        raise _Malformed(f'{name}: expected an object with a "cases" list')
    defaults = raw.get("defaults", {})
    if not isinstance(defaults, dict):
        raise _Malformed(f'{name}: "defaults" must be an object')
    cases = []
    for position, item in enumerate(raw["cases"], start=1):
        named = isinstance(item, dict) and "id" in item
        label = f"case {item['id']}" if named else f"case {position}"
        if not isinstance(item, dict):
            raise _Malformed(f"{name}: {label}: expected an object")
        try:
            cases.append(_case({**defaults, **item}))
        except _Malformed as exc:
            raise ValueError(f"{name}: {label}: {exc}") from None
    return cases


def policy_for(case: Case, base: Policy | None = None) -> Policy:
    """The policy a case runs under.

    Without ``base``: the case's own attempts, deadline and rate-limit mode. With ``base``
    (checking a user's policy): the user's budget and rules, with only the case's provider
    facts (profile and payload validator) applied.
    """
    facts = {
        "profile": get_profile(case.profile),
        "validator": json_payload if case.expect_json else None,
    }
    if base is not None:
        return base.replace(**facts)
    return Policy(
        name=f"acceptance-{case.id}",
        max_attempts=case.max_attempts,
        deadline=case.deadline_s,
        rate_limit=RateLimitMode(case.rate_limit),
        **facts,  # type: ignore[arg-type]
    )
