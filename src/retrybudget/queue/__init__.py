"""A durable queue of logical operations that defers rate-limited work to its ``retry_at``.

Enqueue an operation under a stable id, lease it for a visibility timeout, run it, and
report its :class:`~retrybudget.Outcome` with :meth:`JobQueue.complete`. One pure rule
(:func:`decide`) says what the outcome means: a provider success completes it as a success;
``rejected``, ``not_found``, ``invalid_payload``, ``unexpected`` and ``not_retried`` complete
it as a failure and it is never re-queued; ``rate_limited`` and the other transient reasons
defer it until the provider's ``retry_at`` (plus bounded jitter) with its history kept, until
the deferrals or the job deadline run out and it is dead-lettered. The final outcome is
recorded exactly once.

Two backends store it:

* :class:`SqliteQueue`: one file, several processes on one host (the embedded default);
* :class:`RedisQueue`: Redis Streams with a consumer group, for workers on many machines
  (needs the ``redis`` extra; imported on first use, like :func:`check_reachable`, whether
  a Redis URL answers a PING).

Task engines a team already runs get the same rule through :func:`handoff` and the small
adapters :mod:`retrybudget.queue.celery`, :mod:`retrybudget.queue.dramatiq` and
:mod:`retrybudget.queue.arq` (each an optional extra).

See docs/queue.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._base import STATUSES, Handler, HeldLease, JobQueue, Lease, Operation, OutcomeLike, QueueError, drain
from ._decide import FINAL_FAILURES, LATER, Action, Decision, QueueConfig, decide
from ._handoff import Handoff, Step, handoff
from ._keeper import Holder, holder_state, worker_name
from ._sqlite import SqliteQueue

if TYPE_CHECKING:
    from ._redis import RedisQueue, check_reachable

__all__ = [
    "FINAL_FAILURES",
    "LATER",
    "STATUSES",
    "Action",
    "Decision",
    "Handler",
    "Handoff",
    "HeldLease",
    "Holder",
    "JobQueue",
    "Lease",
    "Operation",
    "OutcomeLike",
    "QueueConfig",
    "QueueError",
    "RedisQueue",
    "SqliteQueue",
    "Step",
    "check_reachable",
    "decide",
    "drain",
    "handoff",
    "holder_state",
    "open_queue",
    "worker_name",
]


def __getattr__(name: str) -> object:
    if name in ("RedisQueue", "check_reachable"):  # the redis package is an optional extra
        from . import _redis  # noqa: PLC0415

        return getattr(_redis, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_queue(url: str, name: str = "default", config: QueueConfig | None = None,
               **options: object) -> JobQueue:
    """Open the queue a URL names: ``redis://``, ``rediss://`` or ``unix://`` (Redis), else
    a SQLite file path (``sqlite:///path`` or a plain path).

    Raises:
        QueueError: the URL is unusable, or Redis does not answer.
    """
    if url.startswith(("redis://", "rediss://", "unix://")):
        from ._redis import RedisQueue, check_reachable  # noqa: PLC0415

        check_reachable(url)
        return RedisQueue(url, name, config, **options)  # type: ignore[arg-type]
    path = url.removeprefix("sqlite://") if url.startswith("sqlite://") else url
    return SqliteQueue(path, config, **options)  # type: ignore[arg-type]
