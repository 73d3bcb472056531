"""The durable state of a fetch job: its operations in a :mod:`retrybudget.queue` queue.

By default the queue is the ``--state`` SQLite file (one process per file); with
``--queue redis://…`` it is a :class:`~retrybudget.queue.RedisQueue` that fetch processes
on many machines drain together.

The guarantee (docs/cli.md, "Durability"): whenever the process stops, even by SIGKILL,
the next run over the same state loses no operation and the results file holds no
duplicate line. It rests on three rules:

1. **The queue is the truth; the results file is derived from it.** An outcome is recorded
   in the queue (with its line) *before* its line is appended to the results file. At the
   start and the end of every run the results file is rewritten from the queue's recorded
   operations (to a temporary file, then renamed over it), so a line lost or torn by a crash
   comes back, and no line is written twice.
2. **Work is leased.** A worker leases one due operation at a time. With the SQLite state a
   lease still held when a run starts belonged to a run that died: it goes back to pending
   and runs again (a GET is safe to repeat; its result was never recorded). With Redis a
   lease lapses after its visibility timeout and another worker takes it over. A recorded
   operation is never run again, except as below.
3. **Rate-limited work waits in the queue, not in a person's calendar.** An operation that
   ends ``rate_limited`` (or with another transient reason) is deferred to its ``retry_at``
   (plus a little jitter) and run then by the same job; after too many deferrals it is
   dead-lettered. ``--retry-failed`` re-opens failed and dead-lettered operations before
   the results file is rewritten, so their old line is gone before a new one is appended.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .._clock import SYSTEM_CLOCK, Clock
from .._cmdline import CliError
from .._files import APPLICATION_ID
from ..core.outcome import Outcome
from ..queue import JobQueue, Lease, QueueConfig, QueueError, SqliteQueue, drain, open_queue
from ._inputs import Op

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no cross-process lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["SCHEMA_VERSION", "TABLES", "JobState", "Reopened"]

SCHEMA_VERSION = "2"
"""The state file's schema version (stored in its ``meta`` table)."""

TABLES = ("meta", "runs", "queue_ops")
"""The tables of a state file; a file holding any other is not a state file."""

_SCHEMA = f"""
PRAGMA application_id = {APPLICATION_ID};
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (run INTEGER PRIMARY KEY AUTOINCREMENT, started REAL NOT NULL,
                                 pid INTEGER NOT NULL);
"""


@dataclass(frozen=True, slots=True)
class Reopened:
    """What a run found when it opened the state.

    Attributes:
        orphans: operations leased by a run that died (back to pending).
        rate_limited: deferred operations whose ``retry_at`` has passed (due now).
        failed: failed and dead-lettered operations re-opened by ``--retry-failed``.
        waiting: deferred operations whose ``retry_at`` is still ahead (the run waits).
        next_retry_at: the earliest such ``retry_at``, or None.
    """

    orphans: int = 0
    rate_limited: int = 0
    failed: int = 0
    waiting: int = 0
    next_retry_at: float | None = None


class JobState:
    """A fetch job's queue and results file; thread-safe.

    Args:
        path: the SQLite state file (created with its directory if missing); unused with
            ``queue``.
        input_name: the input file the job reads; a state belongs to one input.
        queue: a ``redis://`` URL to share the job with other processes, or None.
        job: the job's name in that queue.
        config: the queue's leases, deferrals and deadline.
        clock: where time comes from.
    """

    def __init__(self, path: str | Path, input_name: str, *, queue: str | None = None,
                 job: str = "fetch", config: QueueConfig | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._lock_file: IO[bytes] | None = None
        self._results: IO[str] | None = None
        self._results_path: Path | None = None
        self._lines: dict[str, dict[str, Any]] = {}
        self._run = 1
        self._db: sqlite3.Connection | None = None
        if queue is not None:
            try:
                self.queue: JobQueue = open_queue(queue, job, config, clock=clock)
            except QueueError as exc:
                raise CliError(f"--queue {exc}") from None
            return
        existed = self.path.exists() and self.path.stat().st_size > 0
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._take_lock()
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                       timeout=10.0)
        except (OSError, sqlite3.Error) as exc:
            self._release_lock()
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise CliError(f"{self.path}: cannot open the state: {why}") from None
        try:
            if existed:  # read only until the file is known to be this job's state
                self._check_meta(input_name)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            if not existed:
                self._db.executescript(_SCHEMA)
                self._db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                     [("schema", SCHEMA_VERSION), ("input", input_name)])
            self.queue = SqliteQueue(self.path, config, clock=clock, connection=self._db)
        except (sqlite3.DatabaseError, QueueError) as exc:
            self.close()
            raise CliError(f"{self.path}: not a retrybudget state file ({exc})") from None
        except BaseException:
            self.close()
            raise

    # set-up ----------------------------------------------------------------------------------

    def _take_lock(self) -> None:
        handle = open(self.path.with_name(self.path.name + ".lock"), "ab")  # noqa: SIM115 - held
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                raise CliError(f"{self.path}: in use by another fetch process (one process per "
                               "state file; share a job across processes with --queue)"
                               ) from None
        self._lock_file = handle

    def _release_lock(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()  # closing releases the flock
            self._lock_file = None

    def _check_meta(self, input_name: str) -> None:
        assert self._db is not None  # noqa: S101 - only the SQLite state has meta
        try:
            rows = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.OperationalError:
            raise CliError(f"{self.path}: not a retrybudget state file (no meta table)") from None
        if rows.get("schema") != SCHEMA_VERSION:
            raise CliError(f"{self.path}: state schema {rows.get('schema')!r} is not "
                           f"{SCHEMA_VERSION!r}; use another --state")
        if rows.get("input") != input_name:
            raise CliError(f"{self.path}: this state belongs to input {rows.get('input')!r}, not "
                           f"{input_name!r}; pass another --state (or delete it to start over)")

    def sync(self, ops: Sequence[Op], *, pid: int, now: float) -> None:
        """Enqueue the input's new operations and start a run (nothing changes on a mismatch).

        Raises:
            CliError: an id already in the state now names a different URL, or is gone from
                the input.
        """
        known = {op.op_id: op.payload.get("fingerprint") for op in self.queue.operations()}
        for op in ops:
            old = known.get(op.id)
            if old is not None and old != op.fingerprint:
                raise CliError(f"{self._where}: operation {op.id!r} (input line {op.line}) now "
                               "names a different URL than when the job was made; pass another "
                               f"{self._option} to start a new job")
        missing = sorted(set(known) - {op.id for op in ops})
        if missing:
            raise CliError(f"{self._where}: {len(missing)} operation(s) of this job are no "
                           f"longer in the input (first: {missing[0]!r}); pass another "
                           f"{self._option} to start a new job")
        for op in ops:
            if op.id not in known:
                self.queue.enqueue(op.id, {"line": op.line, "url": op.safe_url,
                                           "fingerprint": op.fingerprint})
        if self._db is not None:
            with self._lock:
                cursor = self._db.execute("INSERT INTO runs (started, pid) VALUES (?, ?)",
                                          (now, pid))
                self._run = int(cursor.lastrowid or 1)
        elif callable(begin := getattr(self.queue, "begin_run", None)):
            self._run = int(begin())  # a Redis job: each process's run numbered apart

    @property
    def _where(self) -> str:
        return str(self.path) if self._db is not None else "--queue"

    @property
    def _option(self) -> str:
        return "--state" if self._db is not None else "--job"

    def reopen(self, now: float, *, retry_failed: bool) -> Reopened:
        """Release a dead run's leases, re-open failures (optionally) and count the deferred."""
        orphans = self.queue.release_leases()
        failed = self.queue.requeue(failed=True) if retry_failed else 0
        deferred = [op.not_before for op in self.queue.operations() if op.status == "deferred"]
        ahead = [at for at in deferred if at > now]
        return Reopened(orphans, len(deferred) - len(ahead), failed, len(ahead),
                        min(ahead) if ahead else None)

    # results ---------------------------------------------------------------------------------

    def open_results(self, path: str | Path) -> int:
        """Rewrite the results file from the queue, then keep it open to append; lines written."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(line, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
                 for line in self.results()]
        temporary = target.with_name(target.name + f".{os.getpid()}.tmp")
        with open(temporary, "w", encoding="utf-8") as out:
            for line in lines:
                out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())
        with self._lock:
            if self._results is not None:
                self._results.close()
            os.replace(temporary, target)
            self._results = open(target, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
            self._results_path = target
        return len(lines)

    # work ------------------------------------------------------------------------------------

    def work(self, worker: str, run: Callable[[Lease], tuple[Outcome[Any], dict[str, Any]]],
             stop: threading.Event, on_result: Callable[[dict[str, Any]], None]) -> None:
        """Lease and run operations until the job is drained (waiting for deferred ones)."""

        def handle(lease: Lease) -> tuple[Outcome[Any], Mapping[str, Any]]:
            outcome, line = run(lease)
            with self._lock:
                self._lines[lease.token] = line
            return outcome, line

        def recorded(lease: Lease, decision: Any) -> None:
            with self._lock:
                line = self._lines.pop(lease.token, None)
                if decision is None or not decision.final or line is None:
                    return
                if self._results is not None:  # after the record: a crash here is repaired
                    self._results.write(json.dumps(line, ensure_ascii=False,
                                                   separators=(",", ":"), allow_nan=False) + "\n")
                    self._results.flush()
            on_result(line)

        drain(self.queue, handle, worker=worker, stop=stop, on_decision=recorded)

    def counts(self) -> dict[str, int]:
        """Operations by status, and recorded ones by outcome (``done:<reason>``)."""
        out = dict(self.queue.counts())
        recorded = [op.result for op in self.queue.export() if op.result is not None]
        out["done"] = len(recorded)
        for record in recorded:
            key = f"done:{record['outcome']}"
            out[key] = out.get(key, 0) + 1
        return out

    def results(self) -> list[dict[str, Any]]:
        """Every recorded result line, in the order they were recorded."""
        return [dict(op.result["result"]) for op in self.queue.export()
                if op.result is not None and op.result.get("result") is not None]

    @property
    def run(self) -> int:
        """This run's number (1 for the first run over the state)."""
        return self._run

    def close(self) -> None:
        """Rewrite and close the results file, close the queue and the lock (safe twice)."""
        with contextlib.suppress(Exception):  # the lines appended so far stay as they are
            if self._results is not None and self._results_path is not None:
                self.open_results(self._results_path)  # every worker's lines, in order
        with self._lock:
            if self._results is not None:
                self._results.close()
                self._results = None
        if hasattr(self, "queue"):
            self.queue.close()
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
        self._release_lock()
