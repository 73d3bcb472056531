"""The queue's interface, its records, and the worker loop every backend shares.

A backend stores; :meth:`JobQueue.complete` asks :func:`~retrybudget.queue._decide.decide`
what an outcome means and hands the backend the decision to store in one atomic step,
conditional on the lease still being the caller's. A lease that expired and was taken by
another worker is stale: completing it records nothing (and says so), which is how an
outcome is recorded exactly once.
"""

from __future__ import annotations

import abc
import contextlib
import json
import random
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .._clock import SYSTEM_CLOCK, Clock
from ..core.outcome import Reason
from ._decide import Decision, QueueConfig, decide
from ._keeper import Holder, Lease, LeaseKeeper, holder_state

__all__ = ["STATUSES", "Handler", "HeldLease", "JobQueue", "Lease", "Operation", "OutcomeLike",
           "QueueError", "check_id", "check_payload", "drain", "dumps"]

STATUSES = ("pending", "leased", "deferred", "done", "dead")
"""Where an operation can be: waiting, held by a worker, waiting for its time, recorded, or
dead-lettered (recorded, and back to pending only by :meth:`JobQueue.requeue`)."""


class QueueError(Exception):
    """A queue was used wrongly (a bad id or payload) or its store cannot be used."""


class OutcomeLike(Protocol):
    """What :meth:`JobQueue.complete` reads from an outcome (an :class:`Outcome` has both)."""

    @property
    def reason(self) -> Reason:
        """Why the operation ended."""
        ...

    @property
    def retry_at(self) -> float | None:
        """When the provider said to come back, if it did."""
        ...


@dataclass(frozen=True, slots=True)
class HeldLease:
    """A lease as the queue stores it (what :meth:`JobQueue.held` returns).

    Attributes:
        op_id: the leased operation.
        worker: its holder's name (``host-pid-n`` for a ``fetch`` worker).
        expires_at: when it lapses unless renewed (epoch seconds, the holder's clock).
    """

    op_id: str
    worker: str
    expires_at: float

    def holder(self) -> Holder:
        """Whether the holder is a live process of this host, a gone one, or unknown here."""
        return holder_state(self.worker)


@dataclass(frozen=True, slots=True)
class Operation:
    """An operation as stored (what :meth:`JobQueue.get` and :meth:`JobQueue.export` return).

    Attributes:
        op_id: its stable id.
        status: one of :data:`STATUSES`.
        payload: what was enqueued.
        deferrals: deferrals so far.
        leases: leases so far.
        enqueued_at: when it was enqueued.
        not_before: when it is (or was) due.
        history: one entry per outcome reported for it (time, worker, reason, action).
        result: the final record (``outcome``, ``ok``, the caller's ``result``) once recorded.
    """

    op_id: str
    status: str
    payload: Mapping[str, Any]
    deferrals: int
    leases: int
    enqueued_at: float
    not_before: float
    history: tuple[Mapping[str, Any], ...] = ()
    result: Mapping[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return {"id": self.op_id, "status": self.status, "payload": dict(self.payload),
                "deferrals": self.deferrals, "leases": self.leases,
                "enqueued_at": self.enqueued_at, "not_before": self.not_before,
                "history": [dict(h) for h in self.history],
                "result": None if self.result is None else dict(self.result)}


def dumps(value: object) -> str:
    """Compact JSON (the one encoding every backend stores)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def check_id(op_id: object) -> str:
    """An operation id: a non-empty string of at most 200 printable characters."""
    if not isinstance(op_id, str) or not op_id or len(op_id) > 200 or not op_id.isprintable():
        raise QueueError(f"an operation id is a non-empty printable string of at most 200 "
                         f"characters, not {op_id!r}")
    return op_id


def check_payload(payload: Mapping[str, Any] | None) -> str:
    """The payload as JSON (a mapping of JSON data)."""
    if payload is None:
        return "{}"
    if not isinstance(payload, Mapping):
        raise QueueError(f"a payload is a mapping, not {type(payload).__name__}")
    try:
        return dumps(dict(payload))
    except (TypeError, ValueError) as exc:
        raise QueueError(f"a payload must be JSON data ({exc})") from None


class JobQueue(abc.ABC):
    """A durable queue of logical operations (the interface both backends implement).

    Args:
        config: leases, deferrals, deadline and jitter.
        clock: where time comes from (its wall clock: instants are epoch seconds).
        random: draws the jitter of deferrals.
    """

    def __init__(self, config: QueueConfig | None = None, *, clock: Clock = SYSTEM_CLOCK,
                 random: random.Random | None = None) -> None:
        self.config = config if config is not None else QueueConfig()
        self.clock = clock
        self._random = random if random is not None else _random_source()
        self._random_lock = threading.Lock()
        self._idle = threading.Lock()
        """Held by the one :func:`drain` loop of this handle that waits for due work."""
        self._keeper = LeaseKeeper(self.renew, self.config.visibility_timeout / 3,
                                   errors=(QueueError,))

    # what a backend implements ----------------------------------------------------------------

    @abc.abstractmethod
    def enqueue(self, op_id: str, payload: Mapping[str, Any] | None = None, *,
                at: float | None = None) -> bool:
        """Add an operation (due at ``at``, default now); False if the id is already queued."""

    @abc.abstractmethod
    def lease(self, worker: str) -> Lease | None:
        """Lease the next due operation for ``config.visibility_timeout``; None when none is due."""

    @abc.abstractmethod
    def _store(self, lease: Lease, decision: Decision, entry: dict[str, Any],
               record: dict[str, Any] | None) -> bool:
        """Store a decision atomically if ``lease`` is still current; False when it is stale."""

    @abc.abstractmethod
    def requeue(self, op_id: str | None = None, *, failed: bool = False) -> int:
        """Return dead-lettered operations (one, or all) to pending; how many moved.

        With ``failed``, operations that completed as failures go back too (a person decided
        to try them again); a success is never re-run."""

    @abc.abstractmethod
    def release_leases(self) -> int:
        """Return every leased operation to pending at once; how many (for the only owner of
        a queue restarting after a crash, who knows no lease is alive)."""

    @abc.abstractmethod
    def renew(self, lease: Lease) -> bool:
        """Extend ``lease`` by ``config.visibility_timeout`` from now; False when it is no
        longer the holder's (it lapsed and another worker took it, or it was released)."""

    @abc.abstractmethod
    def held(self) -> list[HeldLease]:
        """Every current lease: its operation, holder and expiry."""

    @abc.abstractmethod
    def release(self, workers: Collection[str]) -> int:
        """Return the operations these workers hold to pending at once; how many (for a
        person, or a process, who knows those workers are dead)."""

    @abc.abstractmethod
    def counts(self) -> dict[str, int]:
        """Operations by status (every status of :data:`STATUSES`, zeros included)."""

    @abc.abstractmethod
    def get(self, op_id: str) -> Operation | None:
        """One operation, or None."""

    @abc.abstractmethod
    def export(self) -> Iterator[Operation]:
        """Every operation whose outcome is recorded (done or dead), in recording order."""

    @abc.abstractmethod
    def operations(self) -> list[Operation]:
        """Every operation, in enqueue order."""

    @abc.abstractmethod
    def next_due(self) -> float | None:
        """The earliest instant a deferred operation becomes due, or None."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection (safe to call twice)."""

    # shared -----------------------------------------------------------------------------------

    def complete(self, lease: Lease, outcome: OutcomeLike,
                 result: Mapping[str, Any] | None = None) -> Decision | None:
        """Report the outcome of a leased operation; the decision stored, or None if stale.

        The decision (:func:`~retrybudget.queue.decide`) completes, defers or dead-letters
        the operation. ``result`` (JSON data) is kept with a final outcome. None means the
        lease lapsed and another worker holds or finished the operation: nothing was stored.
        """
        now = self.clock.wall()
        with self._random_lock:
            fraction = self._random.random()
        decision = decide(outcome.reason, outcome.retry_at, now=now, deferrals=lease.deferrals,
                          enqueued_at=lease.enqueued_at, config=self.config, jitter=fraction)
        entry = {"at": round(now, 6), "worker": lease.worker, "lease": lease.leases,
                 "leased_at": round(lease.leased_at, 6), "due": lease.not_before,
                 "outcome": decision.reason.value, "retry_at": outcome.retry_at,
                 "action": decision.action.value, "not_before": decision.at}
        record = None
        if decision.final:
            record = {"id": lease.op_id, "outcome": decision.reason.value, "ok": decision.ok,
                      "action": decision.action.value, "why": decision.why,
                      "retry_at": outcome.retry_at, "recorded_at": round(now, 6),
                      "result": None if result is None else dict(result)}
            check_payload(record)
        return decision if self._store(lease, decision, entry, record) else None

    def keep(self, lease: Lease) -> contextlib.AbstractContextManager[None]:
        """Renew ``lease`` while the block runs (every third of the visibility timeout), so
        an operation that outlasts the timeout keeps its lease and only a dead worker's
        lapses; :func:`drain` keeps every lease it runs."""
        return self._keeper.holding(lease)

    def dead_holders(self) -> list[str]:
        """The workers holding leases that are processes of this host no longer running
        (pass them to :meth:`release`)."""
        return sorted({h.worker for h in self.held() if h.holder() is Holder.DEAD})

    def pending(self) -> int:
        """Operations not yet recorded (pending, leased or deferred)."""
        c = self.counts()
        return c["pending"] + c["leased"] + c["deferred"]

    def __enter__(self) -> JobQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _random_source() -> random.Random:
    return random.Random()


Handler = Callable[[Lease], tuple[OutcomeLike, Mapping[str, Any] | None]]
"""Runs one leased operation: its outcome and the result data to keep with it."""


def drain(
    queue: JobQueue,
    handler: Handler,
    *,
    worker: str,
    poll: float = 0.05,
    stop: threading.Event | None = None,
    on_decision: Callable[[Lease, Decision | None], None] | None = None,
) -> int:
    """Run operations until none is left unrecorded (or ``stop`` is set); how many ran.

    A deferred operation is waited for: the loop sleeps (on the queue's clock) until the
    earliest ``not_before``, at most ``poll`` seconds at a time, so it starts at its
    ``retry_at`` rather than when a person reruns the job. While one is deferred the loop
    does not count the queue (it is not drained yet); with none deferred, operations leased
    by other workers keep it polling (one may lapse, or be deferred).

    Of the loops sharing one queue handle (threads of one process), only one waits and
    polls at a time; the others wait behind it and ask the queue only when it has leased
    something, so an idle process asks the queue once per wake-up, not once per thread,
    and a burst of due operations is taken one lease after another.
    """
    ran = 0
    while stop is None or not stop.is_set():
        lease = queue.lease(worker)
        if lease is None:
            lease = _wait_for_work(queue, worker, poll, stop)
            if lease is None:
                return ran
        with queue.keep(lease):
            outcome, result = handler(lease)
            decision = queue.complete(lease, outcome, result)
        ran += 1
        if on_decision is not None:
            on_decision(lease, decision)
    return ran


def _wait_for_work(queue: JobQueue, worker: str, poll: float,
                   stop: threading.Event | None) -> Lease | None:
    """Wait, as this handle's one idle loop, for an operation to lease; None once the queue
    is drained or ``stop`` is set."""
    while not queue._idle.acquire(timeout=max(poll, 0.001)):
        if stop is not None and stop.is_set():
            return None
    try:
        while stop is None or not stop.is_set():
            lease = queue.lease(worker)
            if lease is not None:
                return lease
            due = queue.next_due()
            if due is None and queue.pending() == 0:
                return None
            wait = poll if due is None else min(poll, max(0.0, due - queue.clock.wall()))
            queue.clock.sleep(max(wait, 0.001))
        return None
    finally:
        queue._idle.release()
