"""The audit records as the review report reads them: each record with its index and file
line (:class:`Rec`, the source every fact and finding names), the facts observed in it and the
inputs it lacks (:class:`Builder`, :func:`observe_record`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

__all__ = ["Builder", "Rec", "at", "items", "number", "observe_record"]

_COORDINATOR_REASONS = ("gate", "pacing", "concurrency")


@dataclass(frozen=True, slots=True)
class Rec:
    """One audit record: its index among the records, its file line (None when not read
    from a file) and its fields."""

    index: int
    line: int | None
    data: Mapping[str, Any]

    @property
    def op(self) -> str | None:
        """The operation id (None when absent or not a string)."""
        value = self.data.get("operation_id")
        return value if isinstance(value, str) else None

    @property
    def job(self) -> str | None:
        """The job id (None when absent or not a string)."""
        value = self.data.get("job_id")
        return value if isinstance(value, str) else None

    @property
    def outcome(self) -> str | None:
        """The outcome's reason (None when absent or not a string)."""
        value = self.data.get("outcome")
        return value if isinstance(value, str) else None

    @property
    def history(self) -> list[Mapping[str, Any]]:
        """The attempts recorded, each a mapping (anything else is left out)."""
        return [a for a in items(self.data.get("history")) if isinstance(a, Mapping)]

    def policy(self, name: str) -> Any:
        """A policy field, or None when the policy (or the field) is unknown."""
        policy = self.data.get("policy")
        return policy.get(name) if isinstance(policy, Mapping) else None

    @property
    def policy_known(self) -> bool:
        """True when the record carries the policy's limits, not just its name."""
        return self.policy("max_attempts") is not None

    def who(self) -> str:
        """The record in words: its operation, its job and its index."""
        job = f", job {self.job}" if self.job is not None else ""
        return f"operation {self.op}{job} (record {self.index})"

    def ref(self, field: str | None = None, attempt: int | None = None) -> dict[str, Any]:
        """A source naming this record (and ``field`` of ``attempt``, when given)."""
        return {"record": self.index, "line": self.line, "operation_id": self.op,
                "job_id": self.job, "attempt": attempt, "field": field}


def items(value: object) -> list[Any]:
    """A list field's items; anything else (a malformed record) has none."""
    return value if isinstance(value, list) else []


def number(value: object) -> float | None:
    """A JSON number as a float; None for anything else (a bool included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def at(epoch: object) -> str:
    """An epoch instant in words: ISO 8601 with the epoch seconds beside it."""
    seconds = number(epoch)
    if seconds is None:
        return "a time the records do not name"
    try:
        stamp = datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return f"epoch {seconds:.3f}"
    return f"{stamp} (epoch {seconds:.3f})"


class Builder:
    """Collects facts and missing inputs, each with its source."""

    def __init__(self) -> None:
        self.facts: list[dict[str, Any]] = []
        self.missing: list[dict[str, Any]] = []
        self.malformed = 0
        self._seen: set[tuple[object, ...]] = set()

    def fact(self, rec: Rec, field: str, value: object, attempt: int | None = None) -> None:
        """A fact of ``rec`` (a null one is also a missing input)."""
        self.facts.append({"source": rec.ref(field, attempt), "value": value})
        if value is None:
            self.lack(rec.ref(field, attempt), "not recorded (null)")

    def lack(self, source: dict[str, Any], reason: str, *, malformed: bool = False) -> None:
        """A missing input, once per source and reason (``malformed``: it requires review)."""
        seen = (*source.values(), reason)
        if seen not in self._seen:
            self._seen.add(seen)
            self.missing.append({"source": source, "reason": reason})
            self.malformed += malformed


_RECORD_FIELDS = ("job_id", "method", "url", "key", "idempotency_key", "outcome", "attempts",
                  "logical_operations", "elapsed", "has_value")
_POLICY_FIELDS = ("name", "max_attempts", "deadline", "rate_limit")


def observe_record(rec: Rec, out: Builder) -> None:
    """Every fact ``rec`` records (its fields, its policy, each attempt and coordinator
    wait), each with its source, into ``out``."""
    data = rec.data
    for field in _RECORD_FIELDS:
        out.fact(rec, field, data.get(field))
    for field in _POLICY_FIELDS:
        value = rec.policy(field)
        if field != "deadline" or not rec.policy_known:
            out.fact(rec, f"policy.{field}", value)
        elif value is not None:  # a known policy with a null deadline has no deadline
            out.fact(rec, "policy.deadline", value)
    if rec.outcome != "ok":
        out.fact(rec, "retry_at", data.get("retry_at"))
    for k, text in enumerate(items(data.get("conflicts"))):
        out.fact(rec, f"conflicts[{k}]", text)
    if data.get("reviewer_decision") is not None:
        out.fact(rec, "reviewer_decision", data.get("reviewer_decision"))
    for attempt in rec.history:
        n = attempt.get("number")
        attempt_number = n if isinstance(n, int) else None
        if attempt.get("status") is None and attempt.get("error") is not None:
            out.fact(rec, "error", attempt.get("error"), attempt_number)
        else:
            out.fact(rec, "status", attempt.get("status"), attempt_number)
        for field in ("started", "classification", "decision"):
            out.fact(rec, field, attempt.get(field), attempt_number)
        if attempt.get("decision") == "retry":
            for field in ("wait", "wait_reason", "wait_source"):
                out.fact(rec, field, attempt.get(field), attempt_number)
        for pair in items(attempt.get("evidence")):
            if isinstance(pair, (list, tuple)) and len(pair) == 2:
                out.fact(rec, f"evidence.{pair[0]}", pair[1], attempt_number)
    for k, wait in enumerate(items(data.get("waits"))):
        if isinstance(wait, Mapping) and wait.get("reason") in _COORDINATOR_REASONS:
            out.fact(rec, f"waits[{k}]", dict(wait))
