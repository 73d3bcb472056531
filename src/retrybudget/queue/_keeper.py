"""Leases follow their worker: a live worker renews what it holds; a dead one's leases lapse.

A lease is short (``QueueConfig.visibility_timeout``, 30 s by default) whatever an
operation's deadline: while a worker runs an operation, one thread per queue handle renews
each lease it holds every third of that timeout, so a slow operation keeps its lease and a
killed worker's leases lapse within one timeout of its last renewal.

A worker's name says where it runs (``host-pid-n``, see :func:`worker_name`), so a process on
the same host can tell a holder that is gone (:func:`holder_state`) and release its leases
at once instead of waiting for them to lapse.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Holder", "Lease", "LeaseKeeper", "holder_state", "worker_name"]


@dataclass(frozen=True, slots=True)
class Lease:
    """One worker's hold on one operation, until ``expires_at``.

    Attributes:
        op_id: the operation's stable id.
        token: this lease's identity; only its holder can complete the operation.
        payload: what was enqueued (JSON data).
        deferrals: how many times the operation was deferred before this run.
        leases: how many times it was leased, this one included.
        enqueued_at: when it was first enqueued (epoch seconds).
        not_before: the instant it became due (its ``retry_at`` for a deferred run).
        leased_at: when this lease began (epoch seconds, the queue's clock).
        expires_at: when this lease lapses (epoch seconds, the queue's clock).
        worker: the worker's name.
    """

    op_id: str
    token: str
    payload: Mapping[str, Any]
    deferrals: int
    leases: int
    enqueued_at: float
    not_before: float
    leased_at: float
    expires_at: float
    worker: str
    backend_ref: str = field(default="", repr=False)

log = logging.getLogger("retrybudget.queue")


def worker_name(number: int = 0, *, host: str | None = None, pid: int | None = None) -> str:
    """The name a worker holds leases under: ``host-pid-number``."""
    host = socket.gethostname() if host is None else host
    return f"{host}-{os.getpid() if pid is None else pid}-{number}"


class Holder(str, enum.Enum):
    """What this host can tell about a lease's holder."""

    ALIVE = "alive"
    DEAD = "dead"
    UNKNOWN = "unknown"
    """Another host's worker, or a name not of the form ``host-pid-n``."""

    def __str__(self) -> str:
        return self.value


def holder_state(name: str, *, host: str | None = None) -> Holder:
    """Whether the worker ``name`` is a live process of this host, a gone one, or unknown here."""
    parts = name.rsplit("-", 2)
    here = socket.gethostname() if host is None else host
    if len(parts) != 3 or parts[0] != here or not parts[1].isdigit() or not parts[2].isdigit():
        return Holder.UNKNOWN
    pid = int(parts[1])
    if pid <= 0:
        return Holder.UNKNOWN
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return Holder.DEAD
    except PermissionError:  # another user's live process
        return Holder.ALIVE
    return Holder.ALIVE


class LeaseKeeper:
    """Renews the leases one queue handle's workers hold, every ``every`` seconds.

    Args:
        renew: renews one lease (True while it is still the holder's).
        every: seconds between renewals (a third of the visibility timeout).
        errors: what ``renew`` raises when the store cannot be reached: logged, and the
            lease is tried again next round (it lapses if the store stays unreachable).

    The thread runs only while something is held.
    """

    def __init__(self, renew: Callable[[Lease], bool], every: float,
                 errors: tuple[type[Exception], ...] = ()) -> None:
        self._renew = renew
        self.every = every
        self._errors = errors
        self._held: dict[str, Lease] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._idle = threading.Event()
        """Never set: the thread waits on it between rounds."""

    @contextlib.contextmanager
    def holding(self, lease: Lease) -> Iterator[None]:
        """Renew ``lease`` until the block ends."""
        with self._lock:
            self._held[lease.token] = lease
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="retrybudget-lease-keeper",
                                                daemon=True)
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._held.pop(lease.token, None)

    def _run(self) -> None:
        while not self._idle.wait(self.every):
            with self._lock:
                held = list(self._held.values())
                if not held:
                    self._thread = None
                    return
            for lease in held:
                self._renew_one(lease)

    def _renew_one(self, lease: Lease) -> None:
        try:
            current = self._renew(lease)
        except self._errors as exc:
            log.warning("could not renew the lease of %s: %s", lease.op_id, exc)
            return
        if not current:
            log.warning("the lease of %s lapsed before its renewal: another worker may run it; "
                        "only one outcome is recorded", lease.op_id)
            with self._lock:
                self._held.pop(lease.token, None)
