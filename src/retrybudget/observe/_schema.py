"""The audit record schema (a JSON Schema document) and a small checker for it.

The schema is versioned: every record names it in its ``schema`` field
(``"retrybudget.audit/1"``). A change that removes or retypes a field makes a new
version; readers check the version before they trust the fields. The checker
implements the part of JSON Schema the document uses (``type``, ``enum``, ``const``,
``properties``, ``required``, ``additionalProperties: false``, ``items``,
``minItems``, ``maxItems``, ``minimum``, ``minLength``), so checking needs no
third-party package.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.classify import Kind
from ..core.outcome import Reason, WaitReason
from ..core.policy import RateLimitMode

__all__ = ["AUDIT_SCHEMA", "AUDIT_SCHEMA_ID", "validate_audit_record"]

AUDIT_SCHEMA_ID = "retrybudget.audit/1"
"""The ``schema`` field of every version-1 audit record."""


def _nullable(kind: str, **more: Any) -> dict[str, Any]:
    return {"type": [kind, "null"], **more}


_SECONDS = {"type": "number", "minimum": 0}

_WAIT: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["seconds", "reason", "source", "after_attempt"],
    "properties": {
        "seconds": _SECONDS,
        "reason": {"enum": [r.value for r in WaitReason]},
        "source": {"type": "string"},
        "after_attempt": {"type": "integer", "minimum": 0},
    },
}

_ATTEMPT: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": [
        "number", "started", "elapsed", "timeout", "sent", "status", "error", "classification",
        "decision", "detail", "wait", "wait_reason", "wait_source", "evidence",
    ],
    "properties": {
        "number": {"type": "integer", "minimum": 1},
        "started": _SECONDS,
        "elapsed": _SECONDS,
        "timeout": _nullable("number", minimum=0),
        "sent": {"type": "boolean"},
        "status": _nullable("integer"),
        "error": _nullable("string"),
        "classification": {"enum": [k.value for k in Kind]},
        "decision": {"enum": ["retry", "stop"]},
        "detail": {"type": "string"},
        "wait": _nullable("number", minimum=0),
        "wait_reason": {"enum": [*(r.value for r in WaitReason), None]},
        "wait_source": _nullable("string"),
        "evidence": {
            "type": "array",
            "items": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2},
        },
    },
}

_POLICY: dict[str, Any] = {
    "type": ["object", "null"],
    "additionalProperties": False,
    "required": [
        "name", "max_attempts", "deadline", "rate_limit", "profile", "idempotent_methods",
        "retry_writes_with_key",
    ],
    "properties": {
        "name": _nullable("string"),
        "max_attempts": _nullable("integer", minimum=1),
        "deadline": _nullable("number", minimum=0),
        "rate_limit": {"enum": [*(m.value for m in RateLimitMode), None]},
        "profile": _nullable("string"),
        "idempotent_methods": {"type": ["array", "null"], "items": {"type": "string"}},
        "retry_writes_with_key": _nullable("boolean"),
    },
}

AUDIT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "retrybudget audit record, version 1",
    "type": "object",
    "additionalProperties": False,
    "required": [
        "schema", "operation_id", "job_id", "method", "url", "key", "idempotency_key", "policy",
        "recorded_at", "started_at", "history", "waits", "outcome", "detail", "retry_at",
        "attempts", "logical_operations", "elapsed", "conflicts", "has_value",
        "reviewer_decision",
    ],
    "properties": {
        "schema": {"const": AUDIT_SCHEMA_ID},
        "operation_id": {"type": "string", "minLength": 1},
        "job_id": _nullable("string"),
        "method": _nullable("string"),
        "url": _nullable("string"),
        "key": {"type": "string"},
        "idempotency_key": {"type": "boolean"},
        "policy": _POLICY,
        "recorded_at": _nullable("number"),
        "started_at": _nullable("number"),
        "history": {"type": "array", "items": _ATTEMPT},
        "waits": {"type": "array", "items": _WAIT},
        "outcome": {"enum": [r.value for r in Reason]},
        "detail": {"type": "string"},
        "retry_at": _nullable("number"),
        "attempts": {"type": "integer", "minimum": 0},
        "logical_operations": {"const": 1},
        "elapsed": _SECONDS,
        "conflicts": {"type": "array", "items": {"type": "string"}},
        "has_value": {"type": "boolean"},
        "reviewer_decision": {"type": ["null", "string", "object"]},
    },
}
"""Version 1 of the audit record, as a JSON Schema (draft 2020-12) document."""


def _is_type(value: object, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, (list, tuple))
    if kind == "object":
        return isinstance(value, Mapping)
    return False


def _check(value: object, schema: Mapping[str, Any], path: str, out: list[str]) -> None:
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is_type(value, k) for k in names):
            out.append(f"{path}: expected {' or '.join(names)}, got {type(value).__name__}")
            return
    if "const" in schema and value != schema["const"]:
        out.append(f"{path}: must be {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: {value!r} is not one of {schema['enum']!r}")
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if "minimum" in schema and number and value < schema["minimum"]:
        out.append(f"{path}: {value!r} is below {schema['minimum']}")
    if "minLength" in schema and isinstance(value, str) and len(value) < schema["minLength"]:
        out.append(f"{path}: shorter than {schema['minLength']}")
    if isinstance(value, Mapping):
        _check_object(value, schema, path, out)
    elif isinstance(value, Sequence) and not isinstance(value, str):
        if "minItems" in schema and len(value) < schema["minItems"]:
            out.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            out.append(f"{path}: more than {schema['maxItems']} items")
        if "items" in schema:
            for i, item in enumerate(value):
                _check(item, schema["items"], f"{path}[{i}]", out)


def _check_object(
    value: Mapping[Any, Any], schema: Mapping[str, Any], path: str, out: list[str]
) -> None:
    properties: Mapping[str, Any] = schema.get("properties", {})
    out.extend(f"{path}.{name}: required" for name in schema.get("required", ())
               if name not in value)
    if schema.get("additionalProperties") is False:
        out.extend(f"{path}.{name}: not allowed" for name in value if name not in properties)
    for name, sub in properties.items():
        if name in value:
            _check(value[name], sub, f"{path}.{name}", out)


def validate_audit_record(record: object) -> list[str]:
    """Check one record against :data:`AUDIT_SCHEMA`.

    Returns:
        What is wrong, one message per problem, each naming its field (``$.history[0].status:
        expected integer or null, got str``); empty when the record is valid.
    """
    problems: list[str] = []
    _check(record, AUDIT_SCHEMA, "$", problems)
    return problems
