"""The quota families: each vendor's ``*-limit``/``*-remaining``/``*-reset`` headers, Shopify's
call limit, and the IETF ``RateLimit`` headers (every draft syntax)."""

from __future__ import annotations

from dataclasses import dataclass

from .._dialect import QuotaFamily
from ..profiles import PROVIDERS
from ._model import Conflict
from ._parsers import _SHOPIFY_RE, _clamp, _note, _parse_count, _parse_name, _Parsed
from ._reader import _latest, _Quota, _Reader
from ._structured import _SF_DICT_START_RE, _is_name, _Member, _sf_parse, _sf_uint

_VENDOR_FAMILIES = (
    # the de facto x-ratelimit-* family (GitHub, Discord and many more)
    QuotaFamily("x-ratelimit-limit", "x-ratelimit-remaining",
                ("x-ratelimit-reset", "x-ratelimit-reset-after"), used="x-ratelimit-used",
                resources=("x-ratelimit-resource", "x-ratelimit-bucket")),
    *(family for profile in PROVIDERS for family in profile.quota_families),
)
"""The vendor header families, in the order their quotas are combined: the shared one, then
each built-in profile's ``quota_families`` in the order the profiles stand."""


def _family(reader: _Reader, spec: QuotaFamily) -> _Quota | None:
    if spec.names.isdisjoint(reader.groups):
        return None
    quota = _Quota(limit_src=spec.limit, remaining_src=spec.remaining)
    quota.limit = reader.pick(spec.limit, _parse_count)
    quota.remaining = reader.pick(spec.remaining, _parse_count)
    if spec.used is not None:
        quota.used = reader.pick(spec.used, _parse_count)
    quota.reset = _latest(reader.pick(name, reader.parse_reset) for name in spec.resets)
    for name in spec.resources:
        found = reader.pick(name, _parse_name)
        if quota.resource is None:
            quota.resource = found
    reader.check_limit(quota)
    return quota


def _vendor_quotas(reader: _Reader) -> list[_Quota]:
    families = [_family(reader, spec) for spec in _VENDOR_FAMILIES]
    families.append(_shopify(reader))
    return [quota for quota in families if quota is not None]


def _shopify(reader: _Reader) -> _Quota | None:
    name = "x-shopify-shop-api-call-limit"

    def parse(value: str, source: str) -> _Parsed[tuple[int, int]]:
        match = _SHOPIFY_RE.fullmatch(value.strip())
        if match is None:
            return None, _note(source, value, "not 'used/limit'")
        return (int(match.group(1)), int(match.group(2))), None

    found = reader.pick(name, parse)
    if found is None:
        return None
    used, limit = found
    if used > limit:
        reader.conflicts.append(Conflict((name,), f"{name} says {used} used of a limit of {limit}"))
    return _Quota(
        limit=limit, remaining=max(limit - used, 0), used=used, limit_src=name, remaining_src=name
    )


@dataclass(frozen=True)
class _Policy:
    name: str | None
    quota: int | None
    window: float | None


def _parse_policies(text: str) -> list[_Policy] | str:
    """``RateLimit-Policy`` items: old ``100;w=10`` or new ``"burst";q=100;w=60``; or a reason."""
    members = _sf_parse(text, dictionary=False)
    if members is None:
        return "malformed structured-field list"
    policies: list[_Policy] = []
    for _, value, params in members:
        window_param = params.get("w")
        window = _sf_uint(window_param)
        if window_param is not None and not window:
            return "w is not a positive integer"
        if "qu" in params and not isinstance(params["qu"], str):
            return "qu is not a string"
        if _is_name(value):
            quota = _sf_uint(params.get("q"))
            if quota is None:
                return "q is missing or not a non-negative integer"
            policies.append(_Policy(str(value), quota, float(window) if window else None))
        elif _sf_uint(value) is not None:
            policies.append(_Policy(None, _sf_uint(value), float(window) if window else None))
        else:
            return "a policy is neither a name nor a quota"
    return policies


def _policy_for(policies: list[_Policy], *, name: str | None, quota: int | None) -> _Policy | None:
    for policy in policies:
        if name is not None and policy.name == name:
            return policy
    if name is None:
        for policy in policies:
            if quota is not None and policy.quota == quota and policy.window is not None:
                return policy
        windowed = [policy for policy in policies if policy.window is not None]
        if windowed:
            return windowed[0]
    return policies[0] if len(policies) == 1 else None


def _ietf_list(reader: _Reader, members: list[_Member], policies: list[_Policy]) -> _Quota | str:
    """-08..-10 ``RateLimit: "name";r=50;t=30``: the most restrictive item, or a reason."""
    items: list[tuple[int, int | None, str]] = []
    for _, value, params in members:
        if not _is_name(value):
            return "an item is not a policy name"
        remaining = _sf_uint(params.get("r"))
        if remaining is None:
            return "r is missing or not a non-negative integer"
        if "t" in params and _sf_uint(params["t"]) is None:
            return "t is not a non-negative integer"
        items.append((remaining, _sf_uint(params.get("t")), str(value)))
    remaining, delay, name = min(items, key=lambda item: (item[0], -(item[1] or 0)))
    quota = _Quota(remaining=remaining, resource=name, limit_src="ratelimit-policy")
    quota.remaining_src = "ratelimit"
    if delay is not None:
        quota.reset = _clamp(float(delay), "ratelimit", reader.joined("ratelimit") or "")[0]
    policy = _policy_for(policies, name=name, quota=None)
    if policy is not None:
        quota.limit, quota.window = policy.quota, policy.window
    return quota


def _ietf_dict(reader: _Reader, members: list[_Member], policies: list[_Policy]) -> _Quota | str:
    """-07 ``RateLimit: limit=100, remaining=50, reset=5``, or a reason."""
    fields: dict[str, int] = {}
    for key, value, _ in members:
        if key in ("limit", "remaining", "reset"):
            number = _sf_uint(value)
            if number is None:
                return f"{key} is not a non-negative integer"
            fields[key] = number
    if not fields:
        return "no limit, remaining or reset member"
    quota = _Quota(
        limit=fields.get("limit"),
        remaining=fields.get("remaining"),
        limit_src="ratelimit",
        remaining_src="ratelimit",
    )
    if "reset" in fields:
        raw = reader.joined("ratelimit") or ""
        quota.reset = _clamp(float(fields["reset"]), "ratelimit", raw)[0]
    policy = _policy_for(policies, name=None, quota=quota.limit)
    if policy is not None:
        quota.window = policy.window
        if quota.limit is None:
            quota.limit, quota.limit_src = policy.quota, "ratelimit-policy"
    return quota


def _ietf_separate(reader: _Reader, policies: list[_Policy]) -> _Quota | None:
    """-01..-06 ``RateLimit-Limit`` / ``-Remaining`` / ``-Reset`` (reset = delta seconds)."""
    if not reader.has("ratelimit-limit", "ratelimit-remaining", "ratelimit-reset"):
        return None
    quota = _Quota(limit_src="ratelimit-limit", remaining_src="ratelimit-remaining")
    limit_text = reader.joined("ratelimit-limit")
    if limit_text is not None:
        members = _sf_parse(limit_text, dictionary=False)
        first = _sf_uint(members[0][1]) if members else None
        if members is None or first is None:
            reader.notes.append(_note("ratelimit-limit", limit_text, "malformed, ignored"))
        else:
            quota.limit = first
            windows = [_sf_uint(params.get("w")) for _, value, params in members if value == first]
            window = next((w for w in windows if w), None)
            quota.window = float(window) if window else None
    quota.remaining = reader.pick("ratelimit-remaining", _parse_count)
    quota.reset = reader.pick("ratelimit-reset", reader.parse_reset)
    if quota.window is None:
        policy = _policy_for(policies, name=None, quota=quota.limit)
        if policy is not None:
            quota.window = policy.window
    reader.check_limit(quota)
    return quota


def _ietf_quotas(reader: _Reader) -> list[_Quota]:
    policies: list[_Policy] = []
    policy_text = reader.joined("ratelimit-policy")
    if policy_text is not None:
        parsed = _parse_policies(policy_text)
        if isinstance(parsed, str):
            reader.notes.append(_note("ratelimit-policy", policy_text, f"{parsed}; ignored"))
        else:
            policies = parsed
    quotas: list[_Quota] = []
    separate = _ietf_separate(reader, policies)
    if separate is not None:
        quotas.append(separate)
    text = reader.joined("ratelimit")
    if text is None:
        return quotas
    dictionary = _SF_DICT_START_RE.match(text) is not None
    members = _sf_parse(text, dictionary=dictionary)
    found: _Quota | str
    if members is None:
        found = "malformed structured field"
    elif dictionary:
        found = _ietf_dict(reader, members, policies)
    else:
        found = _ietf_list(reader, members, policies)
    if isinstance(found, str):
        reader.notes.append(_note("ratelimit", text, f"{found}; ignored"))
    else:
        reader.check_limit(found)
        quotas.append(found)
    return quotas
