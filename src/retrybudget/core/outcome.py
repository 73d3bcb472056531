"""Outcome reasons, wait records, the per-operation result and the errors it raises.

An operation ends in exactly one :class:`Reason`. Its :class:`Outcome` carries the
per-operation counters: one logical operation, the attempts it made, every wait with its
reason and source, and ``retry_at`` when the provider named a time to come back. A failed
outcome raises (:meth:`Outcome.unwrap`) the :class:`RetryBudgetError` of its reason; the
hierarchy lives here, beside the outcome it carries, and :mod:`retrybudget.errors` is its
public home (the tree is drawn there).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ._values import fast_init
from .classify import OK_DETAIL, Classified, Kind, ResponseSeen, classify
from .policy import Policy
from .reasons import Reason, WaitReason

__all__ = [
    "ERRORS",
    "AttemptRecord",
    "CircuitOpen",
    "DeadlineExceeded",
    "FirstAttempt",
    "InvalidPayload",
    "NotFound",
    "NotRetried",
    "Outcome",
    "RateLimited",
    "Reason",
    "Rejected",
    "RetriesExhausted",
    "RetryBudgetError",
    "RetryBudgetRefused",
    "UnexpectedResponse",
    "Wait",
    "WaitReason",
    "describe",
    "error_for",
    "first_ok",
    "operation_id",
]

T = TypeVar("T")


@fast_init
@dataclass(frozen=True, slots=True)
class Wait:
    """One wait paid out of the operation's deadline.

    Attributes:
        seconds: how long.
        reason: what it was for.
        source: the header that asked for it (``"retry-after"``…) or ``"policy"`` / ``"coordinator"``.
        attempt: the number of the attempt that preceded it (0 before the first attempt).
    """

    seconds: float
    reason: WaitReason
    source: str
    attempt: int


@fast_init
@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """What one attempt saw and what was decided after it.

    Attributes:
        number: 1 for the first attempt.
        started: seconds since the operation started.
        elapsed: how long the attempt took.
        status: the HTTP status, or None when no response came.
        error: the error class name, or None when a response came.
        kind: the classification.
        decision: ``"retry"`` or ``"stop"``.
        detail: a short human reason for the classification and decision.
        evidence: the rate-limit and retry headers that drove the decision.
        timeout: the timeout the attempt was given (clipped to the deadline), or None.
        sent: whether the request may have reached the provider (False: a connect failure).
    """

    number: int
    started: float
    elapsed: float
    status: int | None
    error: str | None
    kind: Kind
    decision: str
    detail: str
    evidence: tuple[tuple[str, str], ...] = ()
    timeout: float | None = None
    sent: bool = True


@fast_init
@dataclass(frozen=True, slots=True)
class Outcome(Generic[T]):
    """The result of one logical operation.

    ``value`` is set only when ``reason`` is :attr:`Reason.OK`: a failed operation never
    carries a value. ``last`` is the last result the provider gave (a response for a 404,
    say), for inspection, never to be read as success.

    Attributes:
        reason: why it ended.
        operation_id: this operation's id.
        attempts: outbound attempts made (0 when the breaker or gate refused at once).
        waits: every wait, in order.
        elapsed: seconds from start to end, waits included.
        retry_at: wall-clock epoch seconds when the provider said to come back, if it did.
        value: the result, only when ``reason`` is ok.
        last: the last result seen, whatever the reason.
        error: the last exception seen, if the last attempt raised.
        history: per-attempt records.
        detail: a short human explanation.
        conflicts: evidence that disagreed, for review.
        key: the provider key the operation was coordinated under.
        method: the request method, when known.
        job_id: the caller's fixture or job id, when given.
        policy: the policy the operation ran under.
        payload: for the HTTP integrations, what the payload validator returned for the
            final 2xx (the parsed payload, so nobody validates twice), only when ``reason``
            is ok and a validator ran; None otherwise (a callable's result is ``value``).
    """

    reason: Reason
    operation_id: str
    attempts: int
    waits: tuple[Wait, ...]
    elapsed: float
    retry_at: float | None = None
    value: T | None = field(default=None, repr=False)
    last: object | None = field(default=None, repr=False)
    error: BaseException | None = field(default=None, repr=False)
    history: tuple[AttemptRecord, ...] = ()
    detail: str = ""
    conflicts: tuple[str, ...] = ()
    key: str = ""
    method: str | None = None
    job_id: str | None = None
    policy: Policy | None = field(default=None, repr=False, compare=False)
    payload: object | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """True only for :attr:`Reason.OK`."""
        return self.reason is Reason.OK

    @property
    def logical_operations(self) -> int:
        """Always 1: an outcome is one logical operation, however many attempts it made."""
        return 1

    @property
    def retries(self) -> int:
        """Attempts beyond the first."""
        return max(0, self.attempts - 1)

    @property
    def waited(self) -> float:
        """Total seconds spent waiting."""
        return sum(w.seconds for w in self.waits)

    def unwrap(self) -> T:
        """Return the value of an ok outcome, or raise the matching :class:`RetryBudgetError`."""
        if self.reason is Reason.OK:
            return self.value  # type: ignore[return-value]
        raise error_for(self)

    def stats(self) -> dict[str, object]:
        """The per-operation counters as plain JSON-ready data."""
        return _stats(self.operation_id, self.job_id, self.policy, self.key, self.method,
                      self.attempts, self.retries, self.reason, self.retry_at, self.elapsed,
                      self.waits, self.detail)


class _FirstOk(Outcome[T]):
    """An :class:`Outcome` of an operation that succeeded at its first attempt, built lazily.

    The first-attempt fast path knows such an outcome from a handful of values (a
    :class:`FirstAttempt`); this holds them and works out each field when it is read, its
    one :class:`AttemptRecord` included (and, for a 2xx whose headers were not read yet, its
    classification). It reads as an ``Outcome`` in every way: the same fields and values,
    equal to the ``Outcome`` the generic flow builds, the same ``repr``, and
    ``dataclasses.replace``, ``copy`` and ``pickle`` give a plain ``Outcome``. Built with
    :func:`first_ok` only.
    """

    __slots__ = ("_at", "_seen")

    _at: FirstAttempt
    _seen: Classified

    reason = Reason.OK
    attempts = 1
    waits = ()
    retry_at = None
    error = None

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:  # replace() makes an Outcome
        return Outcome(*args, **kwargs)

    def _classified(self) -> Classified:
        """The first attempt's classification (an unread 2xx's worked out once, when read)."""
        at = self._at
        seen = at.seen
        if seen is not None:
            return seen
        try:
            return self._seen
        except AttributeError:
            found = classify(at.policy.profile, ResponseSeen(at.status, at.read(at.headers)),
                             at.wall)
            _set_seen(self, found)
            return found

    @property
    def operation_id(self) -> str:
        return operation_id(self._at.prefix, self._at.number)

    @property
    def elapsed(self) -> float:
        return self._at.ended - self._at.started

    @property
    def value(self) -> T | None:
        value: T | None = self._at.value
        return value

    @property
    def last(self) -> object | None:
        last: object | None = self._at.value
        return last

    @property
    def payload(self) -> object | None:
        payload: object | None = self._at.payload
        return payload

    @property
    def history(self) -> tuple[AttemptRecord, ...]:
        at = self._at
        seen = self._classified()
        return (AttemptRecord(
            number=1, started=at.attempt_started - at.started,
            elapsed=at.attempt_ended - at.attempt_started, status=seen.status, error=None,
            kind=seen.kind, decision="stop", detail=seen.detail, evidence=seen.rate.evidence,
            timeout=at.timeout, sent=seen.sent,
        ),)

    @property
    def detail(self) -> str:
        seen = self._at.seen
        return OK_DETAIL if seen is None else seen.detail

    @property
    def conflicts(self) -> tuple[str, ...]:
        return self._classified().conflicts

    @property
    def key(self) -> str:
        return self._at.key

    @property
    def method(self) -> str | None:
        return self._at.method

    @property
    def job_id(self) -> str | None:
        return self._at.job_id

    @property
    def policy(self) -> Policy | None:
        return self._at.policy

    def stats(self) -> dict[str, object]:
        """The per-operation counters as plain JSON-ready data (straight from the readings)."""
        at = self._at
        return _stats(operation_id(at.prefix, at.number), at.job_id, at.policy, at.key,
                      at.method, 1, 0, Reason.OK, None, at.ended - at.started, (), self.detail)

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, f) for f in _COMPARED)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Outcome):
            return NotImplemented
        return self._fields() == tuple(getattr(other, f) for f in _COMPARED)

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return Outcome.__repr__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Outcome, tuple(getattr(self, f.name) for f in dataclasses.fields(self)))


def _stats(operation_id: str, job_id: str | None, policy: Policy | None, key: str,
           method: str | None, attempts: int, retries: int, reason: Reason,
           retry_at: float | None,
           elapsed: float, waits: tuple[Wait, ...], detail: str) -> dict[str, object]:
    """:meth:`Outcome.stats` of an outcome with these fields (most operations never waited:
    their ``waits`` is a new empty list without a comprehension run)."""
    return {
        "operation_id": operation_id,
        "job_id": job_id,
        "policy": None if policy is None else policy.name,
        "key": key,
        "method": method,
        "logical_operations": 1,
        "attempts": attempts,
        "retries": retries,
        "outcome": reason._value_,  # the member's value, without the enum property's lookup
        "retry_at": retry_at,
        "elapsed": round(elapsed, 6),
        "waits": [
            {
                "seconds": round(w.seconds, 6),
                "reason": w.reason.value,
                "source": w.source,
                "after_attempt": w.attempt,
            }
            for w in waits
        ] if waits else [],
        "detail": detail,
    }


_FirstOk.__name__ = _FirstOk.__qualname__ = Outcome.__qualname__  # its repr is an Outcome's
_COMPARED = tuple(f.name for f in dataclasses.fields(Outcome) if f.compare)


class FirstAttempt:
    """What a first-attempt success is built from, by name (:func:`first_ok`).

    Whoever makes the first attempt fills it as the flow would read it: the operation id's
    ``prefix`` and ``number``; the flow's four monotonic readings (``started``,
    ``attempt_started``, ``attempt_ended``, ``ended``); the attempt's ``timeout``; the
    ``value`` returned; its classification ``seen`` (of kind ``ok``, with the decision's
    detail, no retry time), or None for a 2xx read as ``ok`` before its headers are; the
    request's ``method``, ``key`` and ``job_id``; the ``policy`` and the validator's
    ``payload``.

    A 2xx read as ``ok`` before its headers (``seen`` None) keeps its ``status``, the
    reader of the classifier's headers (``read``), what it reads them from (``headers``, a
    snapshot of the response's) and the ``wall`` time it came: any 2xx whose body nobody
    reads classifies as ``ok`` with detail :data:`OK_DETAIL` under a profile that names no
    2xx among its failures (see :func:`~retrybudget.core.classify.ok_unread`); its headers
    add only evidence (the rate limits, any conflict), worked out by :func:`classify` when
    first read.
    """

    __slots__ = ("attempt_ended", "attempt_started", "ended", "headers", "job_id", "key",
                 "method", "number", "payload", "policy", "prefix", "read", "seen", "started",
                 "status", "timeout", "value", "wall")

    prefix: str
    number: int
    started: float
    attempt_started: float
    attempt_ended: float
    ended: float
    timeout: float | None
    value: Any
    seen: Classified | None
    method: str | None
    key: str
    job_id: str | None
    policy: Policy
    payload: Any
    status: int
    read: Callable[[Any], tuple[tuple[str, str], ...]]
    headers: Any
    wall: float


_new = object.__new__
_set_at = vars(_FirstOk)["_at"].__set__
_set_seen = vars(_FirstOk)["_seen"].__set__


def operation_id(prefix: str, number: int) -> str:
    """The operation id of the ``number``-th operation under an id ``prefix``."""
    return f"{prefix}{number:06x}"


def first_ok(at: FirstAttempt) -> Outcome[Any]:
    """The outcome of a first-attempt success, its fields worked out when read."""
    outcome: Outcome[Any] = _new(_FirstOk)
    _set_at(outcome, at)
    return outcome


# The errors a failed outcome raises ------------------------------------------------------


class RetryBudgetError(Exception):
    """An operation ended without success.

    Attributes:
        reason: the outcome reason.
        operation_id: the operation's id.
        attempts: outbound attempts made.
        retry_at: wall-clock epoch seconds when the provider said to come back, or None.
        outcome: the full :class:`Outcome` (None after unpickling).
    """

    reason: Reason = Reason.UNEXPECTED

    def __init__(
        self,
        message: str,
        *,
        reason: Reason | None = None,
        operation_id: str = "",
        attempts: int = 0,
        retry_at: float | None = None,
        outcome: Outcome[Any] | None = None,
    ) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason
        self.operation_id = operation_id
        self.attempts = attempts
        self.retry_at = retry_at
        self.outcome = outcome

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (type(self), str(self), self.reason.value, self.operation_id, self.attempts,
             self.retry_at),
        )


def _rebuild(
    cls: type[RetryBudgetError],
    message: str,
    reason: str,
    operation_id: str,
    attempts: int,
    retry_at: float | None,
) -> RetryBudgetError:
    return cls(message, reason=Reason(reason), operation_id=operation_id, attempts=attempts,
               retry_at=retry_at)


class RateLimited(RetryBudgetError):
    """The provider throttles: come back at ``retry_at``."""

    reason = Reason.RATE_LIMITED


class RetriesExhausted(RetryBudgetError):
    """Transient failures used every attempt."""

    reason = Reason.EXHAUSTED


class DeadlineExceeded(RetryBudgetError):
    """The deadline left no room for another attempt or wait."""

    reason = Reason.DEADLINE


class CircuitOpen(RetryBudgetError):
    """The circuit breaker refused the operation: no attempt was made."""

    reason = Reason.CIRCUIT_OPEN


class RetryBudgetRefused(RetryBudgetError):
    """The shared retry budget refused a retry."""

    reason = Reason.RETRY_BUDGET


class Rejected(RetryBudgetError):
    """The provider rejected the request (400/401/403…): not retried."""

    reason = Reason.REJECTED


class NotFound(RetryBudgetError):
    """A reachable, missing record (404): not retried."""

    reason = Reason.NOT_FOUND


class UnexpectedResponse(RetryBudgetError):
    """A status outside the contract, or an error the library does not know: not retried."""

    reason = Reason.UNEXPECTED


class InvalidPayload(RetryBudgetError):
    """A 2xx whose payload failed validation, or a protocol error: not a success, not retried."""

    reason = Reason.INVALID_PAYLOAD


class NotRetried(RetryBudgetError):
    """A write failed transiently and was not replayed."""

    reason = Reason.NOT_RETRIED


ERRORS: dict[Reason, type[RetryBudgetError]] = {
    cls.reason: cls
    for cls in (RateLimited, RetriesExhausted, DeadlineExceeded, CircuitOpen, RetryBudgetRefused,
                Rejected, NotFound, UnexpectedResponse, InvalidPayload, NotRetried)
}
"""The exception class of each failed reason."""

for _cls in (RetryBudgetError, *ERRORS.values()):
    _cls.__module__ = "retrybudget.errors"  # their public home: tracebacks and pickles name it


def describe(outcome: Outcome[Any]) -> str:
    """A one-line, secret-free description of a failed outcome."""
    parts = [f"{outcome.reason.value}: {outcome.detail or 'operation failed'}",
             f"operation {outcome.operation_id}", f"{outcome.attempts} attempt(s)"]
    if outcome.key:
        parts.append(f"key {outcome.key}")
    if outcome.retry_at is not None:
        parts.append(f"retry_at {outcome.retry_at:.3f}")
    return "; ".join(parts)


def error_for(
    outcome: Outcome[Any], base: dict[Reason, type[RetryBudgetError]] | None = None
) -> RetryBudgetError:
    """The exception matching a failed outcome (an ok outcome is a programming error).

    Args:
        outcome: a failed outcome.
        base: a replacement table of exception classes (integrations pass subclasses that
            also derive from their library's exceptions).
    """
    if outcome.reason is Reason.OK:
        raise ValueError("an ok outcome is not an error")
    cls = (base or ERRORS)[outcome.reason]
    err = cls(
        describe(outcome), reason=outcome.reason, operation_id=outcome.operation_id,
        attempts=outcome.attempts, retry_at=outcome.retry_at, outcome=outcome,
    )
    # The original error stays on ``err.outcome.error``; it is not chained, because a foreign
    # error's message may quote a URL with its secrets and chained tracebacks get logged.
    err.__suppress_context__ = True
    return err
