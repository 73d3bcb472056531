"""Profiles from data: a TOML or JSON file's tables, derived from a built-in base."""

from __future__ import annotations

from collections.abc import Mapping

from ._lookup import get_profile
from ._model import BodySignal, Profile

_STATUS_KEYS = ("rate_limited", "conditional_rate_limited", "not_found", "rejected", "transient",
                "ok")
_LIST_KEYS = ("secondary_patterns", "permission_patterns", "quota_patterns",
              "retry_hint_headers", "bucket_headers", "scope_headers", "hosts", "sources",
              "route_majors", "sdk_headers", "sdk_paths")
_SCALAR_KEYS = ("rate_limit_floor", "rate_limit_multiplier", "reset_slack", "transient_hints",
                "provider_clock", "body_limit", "zero_hint_wait", "longest_wait", "write_pacing",
                "idempotency_header", "bucket_path", "graphql_cost")
_BOOL_KEYS = frozenset({"transient_hints", "provider_clock", "graphql_cost"})
_TEXT_KEYS = frozenset({"idempotency_header", "bucket_path"})
_BODY_KEYS = frozenset({"pattern", "kind", "statuses", "delay", "unit", "methods", "source"})
PROFILE_KEYS = frozenset({"name", "base", "delay", "reset", "body", "retry_hint",
                          "bucket_header", "delay_headers", "reset_units", *_STATUS_KEYS,
                          *_LIST_KEYS, *_SCALAR_KEYS})
"""The keys a profile file (or a policy file's ``[profile]`` table) may hold."""


def _list(data: Mapping[str, object], key: str) -> list[object]:
    value = data[key]
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{key} must be a list")  # noqa: TRY004 - file content
    return list(value)


def _header_units(value: object, key: str) -> tuple[tuple[str, str], ...]:
    """``[{header = "x", unit = "ms"}, …]`` or ``[["x", "ms"], …]``."""
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{key} must be a list of {{header, unit}} tables")  # noqa: TRY004 - file content
    out: list[tuple[str, str]] = []
    for item in value:
        if isinstance(item, Mapping):
            extra = sorted(set(item) - {"header", "unit"})
            if extra or "header" not in item:
                raise ValueError(f"{key}: each entry has a header and a unit (got {sorted(item)})")
            out.append((str(item["header"]), str(item.get("unit", "seconds"))))
        elif isinstance(item, (list, tuple)) and len(item) == 2:
            out.append((str(item[0]), str(item[1])))
        else:
            raise ValueError(f"{key}: each entry is a {{header, unit}} table")
    return tuple(out)


def _body_signal(item: object) -> BodySignal:
    if not isinstance(item, Mapping):
        raise ValueError("body: each entry is a table with pattern and kind")  # noqa: TRY004 - file content
    extra = sorted(set(item) - _BODY_KEYS)
    if extra:
        raise ValueError(f"body: unknown key(s) {', '.join(extra)} "
                         f"(known: {', '.join(sorted(_BODY_KEYS))})")
    if "pattern" not in item or "kind" not in item:
        raise ValueError("body: each entry needs a pattern and a kind")
    changes: dict[str, object] = {"pattern": str(item["pattern"]), "kind": str(item["kind"])}
    for key in ("delay", "unit", "source"):
        if key in item:
            changes[key] = str(item[key])
    for key in ("statuses", "methods"):
        if key in item:
            changes[key] = frozenset(_list(item, key))
    return BodySignal(**changes)  # type: ignore[arg-type]


def profile_changes(data: Mapping[str, object]) -> dict[str, object]:
    """The :class:`Profile` fields a profile table declares (its ``name`` and ``base`` aside).

    Raises:
        ValueError: an unknown key or a value of the wrong shape, named.
    """
    extra = sorted(set(data) - PROFILE_KEYS)
    if extra:
        raise ValueError(f"unknown key(s) {', '.join(extra)} (known: {', '.join(sorted(PROFILE_KEYS))})")
    changes: dict[str, object] = {}
    for key in _STATUS_KEYS:
        if key in data:
            values = _list(data, key)
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                raise ValueError(f"{key} must be a list of status codes")
            changes[key] = frozenset(values)
    for key in _LIST_KEYS:
        if key in data:
            changes[key] = tuple(str(v) for v in _list(data, key))
    for key in _SCALAR_KEYS:
        if key in data:
            value = data[key]
            if key in _BOOL_KEYS and not isinstance(value, bool):
                raise ValueError(f"{key} must be true or false")
            if key in _TEXT_KEYS and not isinstance(value, str):
                raise ValueError(f"{key} must be text")
            if key not in _BOOL_KEYS and key not in _TEXT_KEYS and (
                    isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ValueError(f"{key} must be a number")
            changes[key] = value
    for key, field_name in (("delay", "delay_headers"), ("delay_headers", "delay_headers"),
                            ("reset", "reset_units"), ("reset_units", "reset_units")):
        if key in data:
            changes[field_name] = _header_units(data[key], key)
    if "retry_hint" in data:
        changes["retry_hint_headers"] = (str(data["retry_hint"]),)
    if "bucket_header" in data:
        changes["bucket_headers"] = (str(data["bucket_header"]),)
    if "body" in data:
        changes["body_signals"] = tuple(_body_signal(item) for item in _list(data, "body"))
    return changes


def profile_from_mapping(data: Mapping[str, object], *, default_name: str = "custom") -> Profile:
    """A profile from a table (a parsed TOML or JSON profile file), derived from its ``base``.

    Keys mirror the :class:`Profile` fields, with shorthands: ``delay`` and ``reset`` are lists
    of ``{header, unit}`` tables, ``body`` a list of body-signal tables (``pattern``, ``kind``,
    ``statuses``, ``delay``, ``unit``, ``methods``, ``source``), ``retry_hint`` and
    ``bucket_header`` one header name each. Only the keys given change the base.

    Raises:
        ValueError: an unknown key, an unknown base, or a value the profile refuses.
    """
    base = get_profile(str(data.get("base", "generic")))
    changes = profile_changes(data)
    return base.derive(str(data.get("name", default_name)), **changes)
