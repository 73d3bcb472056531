"""The SQLite queue: the embedded default, safe for several processes on one host.

One table, WAL journal, every change one ``BEGIN IMMEDIATE`` transaction, so processes
sharing the file serialise on SQLite's own lock. A lease is a row ``leased`` with a token
and an expiry; a due row is ``pending`` or ``deferred`` whose ``not_before`` has passed, or
``leased`` whose lease lapsed (its worker died). Completion is one ``UPDATE ... WHERE token
= ?``: a stale lease changes no row.
"""

from __future__ import annotations

import contextlib
import json
import random
import sqlite3
import threading
import uuid
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from .._clock import SYSTEM_CLOCK, Clock
from .._files import APPLICATION_ID, check_own_database
from ._base import STATUSES, HeldLease, JobQueue, Lease, Operation, QueueError, check_id, check_payload, dumps
from ._decide import Action, Decision, QueueConfig

__all__ = ["SqliteQueue"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS queue_ops (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    payload TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'leased', 'deferred', 'done', 'dead')),
    deferrals INTEGER NOT NULL DEFAULT 0,
    leases INTEGER NOT NULL DEFAULT 0,
    enqueued_at REAL NOT NULL,
    not_before REAL NOT NULL,
    token TEXT,
    worker TEXT,
    expires_at REAL,
    history TEXT NOT NULL DEFAULT '[]',
    result TEXT,
    done_seq INTEGER
);
CREATE INDEX IF NOT EXISTS queue_due ON queue_ops (status, not_before, seq);
CREATE INDEX IF NOT EXISTS queue_done ON queue_ops (done_seq);
"""

_COLUMNS = "id, status, payload, deferrals, leases, enqueued_at, not_before, history, result"


class SqliteQueue(JobQueue):
    """A :class:`JobQueue` in one SQLite file (thread-safe; several processes may share it).

    Args:
        path: the database file (created with its directory if missing); ``":memory:"``
            for a private in-memory queue.
        config: leases, deferrals, deadline and jitter.
        clock: where time comes from.
        random: draws the jitter of deferrals.
        connection: an open connection to use instead of opening ``path`` (its owner
            closes it).

    Raises:
        QueueError: the file cannot be opened, or is not a queue (another application's
            database is refused unchanged, never given the queue's table).
    """

    def __init__(self, path: str | Path = ":memory:", config: QueueConfig | None = None, *,
                 clock: Clock = SYSTEM_CLOCK, random: random.Random | None = None,
                 connection: sqlite3.Connection | None = None) -> None:
        super().__init__(config, clock=clock, random=random)
        self.path = str(path)
        self._lock = threading.RLock()
        self._own = connection is None
        try:
            if connection is None:
                if self.path != ":memory:":
                    check_own_database(self.path, self.path, "a queue", None, required="queue_ops")
                    Path(self.path).parent.mkdir(parents=True, exist_ok=True)
                connection = sqlite3.connect(self.path, isolation_level=None,
                                             check_same_thread=False, timeout=30.0)
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute("PRAGMA synchronous=NORMAL")
            self._db = connection
            if self._db.execute("SELECT 1 FROM sqlite_master").fetchone() is None:  # a new file
                self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            self._db.executescript(_SCHEMA)
        except ValueError as exc:
            raise QueueError(str(exc)) from None
        except (OSError, sqlite3.Error) as exc:
            raise QueueError(f"{self.path}: cannot open the queue ({exc})") from None

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def enqueue(self, op_id: str, payload: Mapping[str, Any] | None = None, *,
                at: float | None = None) -> bool:
        """Add an operation (due at ``at``, default now); False if the id is already queued."""
        check_id(op_id)
        data = check_payload(payload)
        now = self.clock.wall()
        due = now if at is None else float(at)
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT OR IGNORE INTO queue_ops (id, payload, status, enqueued_at, not_before) "
                "VALUES (?, ?, ?, ?, ?)", (op_id, data, "pending" if due <= now else "deferred",
                                           now, due))
            return cursor.rowcount == 1

    def lease(self, worker: str) -> Lease | None:
        """Lease the next due operation (lapsed leases first, then in due order), or None."""
        now = self.clock.wall()
        token = uuid.uuid4().hex
        expires = now + self.config.visibility_timeout
        with self._transaction() as db:
            row = db.execute(
                "SELECT seq, id, payload, deferrals, leases, enqueued_at, not_before FROM queue_ops "
                "WHERE (status IN ('pending', 'deferred') AND not_before <= ?) "
                "OR (status = 'leased' AND expires_at <= ?) "
                "ORDER BY status != 'leased', not_before, seq LIMIT 1", (now, now)).fetchone()
            if row is None:
                return None
            seq, op_id, payload, deferrals, leases, enqueued_at, not_before = row
            db.execute("UPDATE queue_ops SET status = 'leased', token = ?, worker = ?, "
                       "expires_at = ?, leases = leases + 1 WHERE seq = ?",
                       (token, worker, expires, seq))
        return Lease(op_id, token, json.loads(payload), deferrals, leases + 1, enqueued_at,
                     not_before, now, expires, worker)

    def _store(self, lease: Lease, decision: Decision, entry: dict[str, Any],
               record: dict[str, Any] | None) -> bool:
        with self._transaction() as db:
            row = db.execute("SELECT history FROM queue_ops WHERE id = ? AND status = 'leased' "
                             "AND token = ?", (lease.op_id, lease.token)).fetchone()
            if row is None:
                return False
            history = dumps([*json.loads(row[0]), entry])
            if decision.action is Action.DEFER:
                assert decision.at is not None  # noqa: S101 - a deferral always has a time
                db.execute("UPDATE queue_ops SET status = 'deferred', not_before = ?, "
                           "deferrals = deferrals + 1, token = NULL, worker = NULL, "
                           "expires_at = NULL, history = ? WHERE id = ?",
                           (decision.at, history, lease.op_id))
            else:
                (done_seq,) = db.execute("SELECT COALESCE(MAX(done_seq), 0) + 1 FROM queue_ops"
                                         ).fetchone()
                status = "done" if decision.action is Action.COMPLETE else "dead"
                db.execute("UPDATE queue_ops SET status = ?, token = NULL, expires_at = NULL, "
                           "history = ?, result = ?, done_seq = ? WHERE id = ?",
                           (status, history, dumps(record), done_seq, lease.op_id))
            return True

    def requeue(self, op_id: str | None = None, *, failed: bool = False) -> int:
        """Return dead-lettered (with ``failed``, also failed) operations to pending."""
        now = self.clock.wall()
        where = ("(status = 'dead' OR (status = 'done' AND json_extract(result, '$.ok') = 0))"
                 if failed else "status = 'dead'")
        args: tuple[str, ...] = ()
        if op_id is not None:
            where, args = where + " AND id = ?", (check_id(op_id),)
        with self._transaction() as db:
            return db.execute(f"UPDATE queue_ops SET status = 'pending', not_before = ?, "  # noqa: S608
                              f"deferrals = 0, enqueued_at = ?, result = NULL, done_seq = NULL "
                              f"WHERE {where}", (now, now, *args)).rowcount

    def release_leases(self) -> int:
        """Return every leased operation to pending at once; how many."""
        with self._transaction() as db:
            return db.execute("UPDATE queue_ops SET status = 'pending', token = NULL, "
                              "worker = NULL, expires_at = NULL WHERE status = 'leased'").rowcount

    def renew(self, lease: Lease) -> bool:
        """Extend ``lease`` by the visibility timeout from now; False when it is not current."""
        expires = self.clock.wall() + self.config.visibility_timeout
        try:
            with self._transaction() as db:
                return db.execute("UPDATE queue_ops SET expires_at = ? WHERE id = ? AND "
                                  "status = 'leased' AND token = ?",
                                  (expires, lease.op_id, lease.token)).rowcount == 1
        except sqlite3.Error as exc:
            raise QueueError(f"{self.path}: cannot renew a lease ({exc})") from None

    def held(self) -> list[HeldLease]:
        """Every current lease, in lease order."""
        with self._lock:
            rows = self._db.execute("SELECT id, worker, expires_at FROM queue_ops WHERE "
                                    "status = 'leased' ORDER BY seq").fetchall()
        return [HeldLease(op_id, worker or "", float(expires or 0.0))
                for op_id, worker, expires in rows]

    def release(self, workers: Collection[str]) -> int:
        """Return the operations ``workers`` hold to pending; how many."""
        names = sorted(set(workers))
        if not names:
            return 0
        marks = ", ".join("?" * len(names))
        with self._transaction() as db:
            return db.execute("UPDATE queue_ops SET status = 'pending', token = NULL, "  # noqa: S608
                              f"worker = NULL, expires_at = NULL WHERE status = 'leased' AND "
                              f"worker IN ({marks})", names).rowcount

    def counts(self) -> dict[str, int]:
        """Operations by status (zeros included)."""
        with self._lock:
            rows = self._db.execute("SELECT status, COUNT(*) FROM queue_ops GROUP BY status"
                                    ).fetchall()
        out = dict.fromkeys(STATUSES, 0)
        out.update({status: int(n) for status, n in rows})
        return out

    @staticmethod
    def _operation(row: tuple[Any, ...]) -> Operation:
        op_id, status, payload, deferrals, leases, enqueued_at, not_before, history, result = row
        return Operation(op_id, status, json.loads(payload), deferrals, leases, enqueued_at,
                         not_before, tuple(json.loads(history)),
                         None if result is None else json.loads(result))

    def get(self, op_id: str) -> Operation | None:
        """One operation, or None."""
        with self._lock:
            row = self._db.execute(f"SELECT {_COLUMNS} FROM queue_ops WHERE id = ?",  # noqa: S608
                                   (op_id,)).fetchone()
        return None if row is None else self._operation(row)

    def export(self) -> Iterator[Operation]:
        """Every recorded operation (done or dead), in recording order."""
        with self._lock:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM queue_ops WHERE status IN "  # noqa: S608
                                    "('done', 'dead') ORDER BY done_seq").fetchall()
        return iter([self._operation(row) for row in rows])

    def operations(self) -> list[Operation]:
        """Every operation, in enqueue order."""
        with self._lock:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM queue_ops ORDER BY seq"  # noqa: S608
                                    ).fetchall()
        return [self._operation(row) for row in rows]

    def next_due(self) -> float | None:
        """The earliest ``not_before`` of a deferred operation, or None."""
        with self._lock:
            (due,) = self._db.execute("SELECT MIN(not_before) FROM queue_ops WHERE status = "
                                      "'deferred'").fetchone()
        return None if due is None else float(due)

    def close(self) -> None:
        """Close the connection, if this queue opened it."""
        if self._own:
            with self._lock, contextlib.suppress(sqlite3.Error):
                self._db.close()
