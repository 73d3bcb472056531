"""Audit records: one JSON object per logical operation, written without secrets.

:func:`audit_record` builds a record (schema ``retrybudget.audit/1``, see
``docs/audit.md``) from an :class:`~retrybudget.Outcome`; :class:`AuditHook` does it for
every operation a :class:`~retrybudget.Retrier` runs and hands the record to its sinks:

- :class:`JsonlAuditSink`: one line per record in a file that many threads and
  processes may append to at once;
- :class:`LoggingAuditSink`: a stdlib log record with the record in ``extra``;
- :class:`CallbackAuditSink`: any callable.

Every sink passes every string through :func:`~retrybudget.observe.redact_text` (with the
secret values it was given) before it writes anything. :func:`load_audit` reads a JSONL
file back, naming the line of anything malformed or truncated.
"""

from __future__ import annotations

import json
import logging
import math
import os
import select
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .._clock import SYSTEM_CLOCK, Clock
from ..core.actions import RequestInfo
from ..core.headers import EVIDENCE_HEADERS, EVIDENCE_PREFIXES
from ..core.outcome import AttemptRecord, Outcome, Wait, WaitReason
from ..core.policy import Policy
from ._hooks import Hook, notify
from ._redact import is_secret_header, redact_text, redact_url, scrub
from ._schema import AUDIT_SCHEMA_ID, validate_audit_record

try:  # POSIX only; elsewhere appends rely on O_APPEND alone
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

_PIPE_BUF: int = getattr(select, "PIPE_BUF", 512)
"""Lines up to this many bytes are appended under a shared lock, longer ones an exclusive one."""

_COORDINATOR_REASONS = frozenset({WaitReason.GATE, WaitReason.PACING, WaitReason.CONCURRENCY})


def _policy_fields(policy: Policy | str | None) -> dict[str, Any] | None:
    if policy is None:
        return None
    if isinstance(policy, str):
        return {"name": policy, "max_attempts": None, "deadline": None, "rate_limit": None,
                "profile": None, "idempotent_methods": None, "retry_writes_with_key": None}
    return {
        "name": policy.name,
        "max_attempts": policy.max_attempts,
        "deadline": policy.deadline,
        "rate_limit": policy.rate_limit.value,
        "profile": policy.profile.name,
        "idempotent_methods": sorted(policy.idempotent_methods),
        "retry_writes_with_key": policy.retry_writes_with_key,
    }


def _is_evidence(name: str) -> bool:
    n = name.lower()
    return (n in EVIDENCE_HEADERS or n.startswith(EVIDENCE_PREFIXES)) and not is_secret_header(n)


def _wait_after(record: AttemptRecord, waits: tuple[Wait, ...]) -> Wait | None:
    """The wait the decision after ``record`` took (coordinator waits are listed on their own)."""
    if record.decision != "retry":
        return None
    return next((w for w in waits if w.attempt == record.number
                 and w.reason not in _COORDINATOR_REASONS), None)


def _attempt(record: AttemptRecord, waits: tuple[Wait, ...]) -> dict[str, Any]:
    wait = _wait_after(record, waits)
    return {
        "number": record.number,
        "started": round(record.started, 6),
        "elapsed": round(record.elapsed, 6),
        "timeout": None if record.timeout is None else round(record.timeout, 6),
        "sent": record.sent,
        "status": record.status,
        "error": record.error,
        "classification": record.kind.value,
        "decision": record.decision,
        "detail": redact_text(record.detail),
        "wait": None if wait is None else round(wait.seconds, 6),
        "wait_reason": None if wait is None else wait.reason.value,
        "wait_source": None if wait is None else wait.source,
        "evidence": [[name, redact_text(value)] for name, value in record.evidence
                     if _is_evidence(name)],
    }


def audit_record(
    outcome: Outcome[Any],
    request: RequestInfo | None = None,
    *,
    policy: Policy | str | None = None,
    recorded_at: float | None = None,
) -> dict[str, Any]:
    """The audit record of one operation (schema ``retrybudget.audit/1``).

    Args:
        outcome: the operation's outcome.
        request: what the operation was; its URL is redacted again here, so a raw URL
            cannot leak. Without it, key, method and job id come from the outcome.
        policy: the policy in force (its name and limits), or just its name.
        recorded_at: wall-clock epoch seconds of recording; ``started_at`` is derived from it.

    Returns:
        A JSON-ready dict; ``reviewer_decision`` is None for a reviewer to fill in.
    """
    req = request or RequestInfo(method=outcome.method, key=outcome.key, job_id=outcome.job_id)
    return {
        "schema": AUDIT_SCHEMA_ID,
        "operation_id": outcome.operation_id,
        "job_id": outcome.job_id if outcome.job_id is not None else req.job_id,
        "method": outcome.method if outcome.method is not None else req.method,
        "url": None if req.url is None else redact_url(req.url),
        "key": outcome.key or req.key,
        "idempotency_key": req.has_idempotency_key,
        "policy": _policy_fields(policy),
        "recorded_at": recorded_at,
        "started_at": None if recorded_at is None else round(recorded_at - outcome.elapsed, 6),
        "history": [_attempt(r, outcome.waits) for r in outcome.history],
        "waits": [{"seconds": round(w.seconds, 6), "reason": w.reason.value, "source": w.source,
                   "after_attempt": w.attempt} for w in outcome.waits],
        "outcome": outcome.reason.value,
        "detail": redact_text(outcome.detail),
        "retry_at": outcome.retry_at,
        "attempts": outcome.attempts,
        "logical_operations": outcome.logical_operations,
        "elapsed": round(outcome.elapsed, 6),
        "conflicts": [redact_text(c) for c in outcome.conflicts],
        "has_value": outcome.value is not None,
        "reviewer_decision": None,
    }


class AuditSink(Protocol):
    """Where audit records go."""

    def write(self, record: Mapping[str, Any]) -> None:
        """Write one record."""


class AuditHook(Hook):
    """A hook that writes an audit record for every operation to each of its sinks.

    A sink that raises is logged and skipped; the others still get the record and the
    operation's outcome is unchanged.

    Args:
        sinks: where records go.
        policy: the policy the retrier runs under (or its name), recorded in ``policy``.
        clock: stamps ``recorded_at`` and ``started_at``; None leaves them null.
    """

    def __init__(
        self,
        *sinks: AuditSink,
        policy: Policy | str | None = None,
        clock: Clock | None = SYSTEM_CLOCK,
    ) -> None:
        self.sinks = sinks
        self.policy = policy
        self.clock = clock

    def on_outcome(self, outcome: Outcome[Any], request: RequestInfo) -> None:
        """Build the operation's record and write it to every sink."""
        recorded_at = None if self.clock is None else self.clock.wall()
        policy = self.policy if self.policy is not None else outcome.policy
        record = audit_record(outcome, request, policy=policy, recorded_at=recorded_at)
        notify(self.sinks, "write", record)


class _ScrubbingSink:
    """What every sink shares: the last line of defence against secrets."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = tuple(secrets)

    def prepare(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """The record with :func:`redact_text` applied to every string in it."""
        cleaned = scrub(record, self.secrets)
        if not isinstance(cleaned, dict):  # pragma: no cover - scrub keeps mappings as dicts
            raise TypeError("an audit record is a mapping")
        return cleaned

    def dumps(self, prepared: Mapping[str, Any]) -> str:
        """A prepared record as one line of JSON (no newline); strict JSON, no NaN."""
        return json.dumps(prepared, ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                          default=lambda value: redact_text(str(value), self.secrets))


class JsonlAuditSink(_ScrubbingSink):
    """Appends one JSON line per record to a file; safe for many threads and processes.

    The file is opened with ``O_APPEND`` and each record is written as one complete line.
    Writers in one process take turns; across processes each line is written under an
    ``flock``: shared for a line up to ``PIPE_BUF`` bytes (a single ``os.write`` that
    ``O_APPEND`` keeps whole), exclusive for a longer one (which the kernel may split), so no
    line is ever interleaved with another. A forked child reopens the file on first write.

    Args:
        path: the file (created if missing, mode ``0o600``).
        secrets: secret values to scrub from every string (last line of defence).
    """

    def __init__(self, path: str | os.PathLike[str], *, secrets: Iterable[str] = ()) -> None:
        super().__init__(secrets)
        self.path = Path(path)
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._pid = os.getpid()

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record as one line."""
        data = (self.dumps(self.prepare(record)) + "\n").encode("utf-8")
        if self._pid != os.getpid():  # forked: the parent's lock and file description are not ours
            self._lock, self._fd, self._pid = threading.Lock(), None, os.getpid()
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                                   0o600)
            fd = self._fd
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_SH if len(data) <= _PIPE_BUF else fcntl.LOCK_EX)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the file (the next write reopens it)."""
        with self._lock:
            if self._fd is not None and self._pid == os.getpid():
                os.close(self._fd)
            self._fd = None

    def __enter__(self) -> JsonlAuditSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JsonlAuditSink({str(self.path)!r})"


class LoggingAuditSink(_ScrubbingSink):
    """Logs each record through :mod:`logging`: the JSON line as the message, the record in ``extra``.

    A structured formatter finds the record as ``record.audit`` (a dict).

    Args:
        logger: the logger or its name (default ``"retrybudget.audit"``).
        level: the level to log at.
        secrets: secret values to scrub from every string (last line of defence).
    """

    def __init__(
        self,
        logger: logging.Logger | str | None = None,
        *,
        level: int = logging.INFO,
        secrets: Iterable[str] = (),
    ) -> None:
        super().__init__(secrets)
        if not isinstance(logger, logging.Logger):
            logger = logging.getLogger(logger or "retrybudget.audit")
        self.logger = logger
        self.level = level

    def write(self, record: Mapping[str, Any]) -> None:
        """Log one record."""
        if not self.logger.isEnabledFor(self.level):
            return
        prepared = self.prepare(record)
        self.logger.log(self.level, "retrybudget audit %s", self.dumps(prepared),
                        extra={"audit": prepared})


class CallbackAuditSink(_ScrubbingSink):
    """Hands each (scrubbed) record to a callable: a queue's ``put``, a list's ``append``…

    Args:
        callback: called with each record, a fresh dict.
        secrets: secret values to scrub from every string (last line of defence).
    """

    def __init__(self, callback: Callable[[dict[str, Any]], object], *,
                 secrets: Iterable[str] = ()) -> None:
        super().__init__(secrets)
        self.callback = callback

    def write(self, record: Mapping[str, Any]) -> None:
        """Pass one record on."""
        self.callback(self.prepare(record))


# Reading back ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line of an audit file that is not a valid record: its number (1-based) and why."""

    line: int
    reason: str


class AuditFileError(ValueError):
    """An audit file holds a line that is not a valid record.

    Attributes:
        path: the file.
        line: the 1-based line number.
        reason: what is wrong with it.
    """

    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}: line {line}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.line, self.reason))


@dataclass(frozen=True, slots=True)
class AuditLog:
    """What :func:`load_audit` read.

    Attributes:
        path: the file (for a merged log, the files joined by ", ").
        records: the valid records, in file order (merged: in recording order).
        lines: the line number of each record in its file (same order).
        bad_lines: the lines skipped, each with its reason (only with ``skip_bad``).
        files: for a merged log, the file of each record (same order); empty otherwise.
        duplicates: for a merged log, how many records were in more than one file.
    """

    path: str
    records: tuple[dict[str, Any], ...]
    lines: tuple[int, ...]
    bad_lines: tuple[BadLine, ...] = ()
    files: tuple[str, ...] = ()
    duplicates: int = 0


def _parse_line(raw: bytes, last: bool) -> tuple[dict[str, Any] | None, str]:
    """A record, or None and why not."""
    truncated = last and not raw.endswith(b"\n")
    try:
        value = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not UTF-8"
    except json.JSONDecodeError as exc:
        if truncated:
            return None, f"truncated record (the file ends inside it: {exc.msg})"
        return None, f"invalid JSON: {exc.msg} at column {exc.colno}"
    problems = validate_audit_record(value)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return None, f"not a {AUDIT_SCHEMA_ID} record: {problems[0]}{more}"
    assert isinstance(value, dict)  # noqa: S101 - validated as an object above
    return value, ""


def load_audit(path: str | os.PathLike[str], *, skip_bad: bool = False) -> AuditLog:
    """Read a JSONL audit file.

    Blank lines are ignored. Every other line must be one complete record matching the
    schema.

    Args:
        path: the file.
        skip_bad: skip lines that are not valid records and list them in
            :attr:`AuditLog.bad_lines` (every valid line is still read) instead of raising.

    Raises:
        AuditFileError: naming the first line that is malformed, truncated or not a record
            (unless ``skip_bad``).
        OSError: when the file cannot be read.
    """
    name = os.fspath(path)
    records: list[dict[str, Any]] = []
    lines: list[int] = []
    bad: list[BadLine] = []
    with open(name, "rb") as fh:
        raw = fh.readline()
        number = 0
        while raw:
            number += 1
            following = fh.readline()
            if raw.strip():
                record, why = _parse_line(raw, last=not following)
                if record is not None:
                    records.append(record)
                    lines.append(number)
                elif skip_bad:
                    bad.append(BadLine(number, why))
                else:
                    raise AuditFileError(name, number, why)
            raw = following
    return AuditLog(name, tuple(records), tuple(lines), tuple(bad))


def merge_audits(logs: Sequence[AuditLog]) -> AuditLog:
    """One job's audit from several files (each worker process writes its own).

    The records of every log, ordered by ``recorded_at`` (a record without one after those
    with one, in the order given), and a record found in more than one file (the same
    record, byte for byte as JSON) kept once: the first. Each record keeps its line number
    in its own file, and :attr:`AuditLog.files` names that file.
    """
    if len(logs) == 1:
        return logs[0]
    seen: set[str] = set()
    kept: list[tuple[dict[str, Any], int, str]] = []
    duplicates = 0
    for log in logs:
        for record, line in zip(log.records, log.lines, strict=True):
            key = json.dumps(record, sort_keys=True, separators=(",", ":"), default=str)
            if key in seen:
                duplicates += 1
                continue
            seen.add(key)
            kept.append((record, line, log.path))
    kept.sort(key=lambda item: _recorded(item[0]))
    return AuditLog(", ".join(log.path for log in logs), tuple(r for r, _, _ in kept),
                    tuple(n for _, n, _ in kept),
                    tuple(bad for log in logs for bad in log.bad_lines),
                    tuple(f for _, _, f in kept), duplicates)


def _recorded(record: Mapping[str, Any]) -> tuple[int, float]:
    """Sort key: records with a recording time first, by that time (the sort is stable)."""
    at = record.get("recorded_at")
    if isinstance(at, (int, float)) and not isinstance(at, bool) and math.isfinite(at):
        return (0, float(at))
    return (1, 0.0)

