"""The core's vocabulary: what an operation is, the actions the flow yields, their replies.

:func:`~retrybudget.core.flow.operation_flow` yields these actions and receives these
replies; the drivers perform them and the coordinators answer them. Plain values, no rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._values import fast_init
from .classify import Observation
from .outcome import Outcome, Wait, WaitReason
from .throttle import Throttle

__all__ = [
    "Acquire",
    "Action",
    "Admission",
    "Admit",
    "Attempt",
    "AttemptResult",
    "Finish",
    "Learn",
    "Permit",
    "RequestInfo",
    "Sleep",
    "SpendRetry",
]


@fast_init
@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What the operation is, for decisions, coordination and audit.

    Attributes:
        method: the HTTP method (None for a plain callable: treated as safe to repeat).
        key: the provider key workers coordinate under (host plus rate-limit bucket).
        has_idempotency_key: the request carries an idempotency key.
        url: the request URL, already redacted (never a secret).
        job_id: the caller's fixture or job id.
    """

    method: str | None = None
    key: str = "default"
    has_idempotency_key: bool = False
    url: str | None = None
    job_id: str | None = None


# Actions the flow yields --------------------------------------------------------------


@dataclass(slots=True)
class Admit:
    """Ask the breaker whether this operation may start. Reply: :class:`Admission`.

    ``max_wait`` and ``fail_fast`` are the first :class:`Acquire`'s (a backend may answer
    that one along with the admission)."""

    key: str
    max_wait: float | None = None
    fail_fast: bool = False


@dataclass(slots=True)
class Acquire:
    """Ask the gate, pacing and concurrency cap for leave to send. Reply: :class:`Permit`."""

    key: str
    attempt: int
    write_gap: float = 0.0
    """Seconds the provider asks between the starts of writes under ``key`` (the profile's
    ``write_pacing`` for a mutating request, else 0)."""
    max_wait: float | None = None
    """The longest wait the operation reserves a slot for (a ``fail_fast`` operation: what
    fits before its deadline; None: any, a waiting operation deferred to the slot when it
    stops keeps it). A coordinator reserves no slot further out: the operation stops
    instead (:func:`~retrybudget.core.decide.patience`, :func:`~retrybudget.core.decide.declines`)."""
    fail_fast: bool = False
    """The operation takes no wait behind a closed gate (``rate_limit="fail_fast"``): a
    coordinator reserves no slot behind one for it."""


@dataclass(slots=True)
class Attempt:
    """Make attempt ``number`` with ``timeout`` seconds (None: no limit). Reply: :class:`AttemptResult`."""

    number: int
    timeout: float | None


@dataclass(slots=True)
class Sleep:
    """Wait, paid out of the deadline. Reply: None."""

    wait: Wait


@dataclass(slots=True)
class Learn:
    """Report what an attempt showed about the quota (:class:`~retrybudget.core.throttle.Throttle`,
    read with the policy's profile; None if the attempt was not made) and release its lease.
    Reply: None."""

    key: str
    throttle: Throttle | None
    lease: str | None
    final: bool = False
    """True when the operation's :class:`Finish` comes next, with no wait between: a
    coordinator may send this report together with it (one round trip instead of two)."""


@dataclass(slots=True)
class SpendRetry:
    """Ask the shared retry budget for one retry after a failure. Reply: bool.

    Only retries of failures draw on the budget (:func:`draws_on_retry_budget`): a retry
    after a rate limit waits for the instant the provider named, which the coordinator's
    gate already shares with every worker, so it is no part of a retry storm.
    """

    key: str


@dataclass(slots=True)
class Finish:
    """The operation ended: record it (breaker, budget, audit, hooks). Reply: None."""

    key: str
    outcome: Outcome[object]
    probe: bool


Action = Admit | Acquire | Attempt | Sleep | Learn | SpendRetry | Finish
"""Everything the flow may ask a driver to do."""


# Replies -------------------------------------------------------------------------------


@fast_init
@dataclass(frozen=True, slots=True)
class Admission:
    """The breaker's answer: allowed, as a half-open probe, or refused until ``retry_at``."""

    allowed: bool = True
    probe: bool = False
    retry_at: float | None = None
    detail: str = ""


@fast_init
@dataclass(frozen=True, slots=True)
class Permit:
    """The coordinator's answer before an attempt.

    Attributes:
        wait: seconds to wait before asking again (0: go now).
        reason: what the wait is for (gate, pacing, concurrency).
        retry_at: wall-clock time the provider named, for a gate wait.
        lease: a concurrency lease to give back in :class:`Learn`, if one was taken.
    """

    wait: float = 0.0
    reason: WaitReason = WaitReason.GATE
    retry_at: float | None = None
    lease: str | None = None


@dataclass(slots=True)
class AttemptResult:
    """What the driver got from one attempt: the observation and the raw result or error.

    ``payload`` is what the payload validator returned for a 2xx it passed (the parsed
    payload), None when no validator ran; an ok outcome keeps it as ``Outcome.payload``.
    ``bounded``: the attempt could be ended by its timeout (the integrations and ``acall``
    cut every one; a sync plain callable only when it took its timeout, from
    ``attempt_timeout()`` or ``timeout_kwarg``). False: nothing could have cut it, and the
    next attempt must fit what is left at its length
    (:func:`~retrybudget.core.decide.attempt_needs`).
    """

    observation: Observation
    value: object = None
    error: BaseException | None = None
    payload: object = None
    bounded: bool = True
