"""The durable state of a fetch job: one SQLite row per operation.

The guarantee (docs/cli.md, "Durability"): whenever the process stops, even by SIGKILL,
the next run over the same state loses no operation and the results file holds no
duplicate line. It rests on three rules:

1. **The state is the truth; the results file is derived from it.** A result is committed
   to the state (``status = 'done'``, with its line) *before* its line is appended to the
   results file. At the start of every run the results file is rewritten from the state
   (to a temporary file, then renamed over it), so a line lost or torn by a crash comes
   back, and no line is written twice.
2. **Work is claimed in transactions.** A worker claims one pending row at a time
   (``pending -> claimed``). A row still ``claimed`` when a run starts belonged to a run
   that died: it goes back to ``pending`` and runs again (a GET is safe to repeat; its
   result was never recorded). A ``done`` row is never run again, except as below.
3. **Re-opened rows leave the results file first.** Operations that ended ``rate_limited``
   whose ``retry_at`` has passed (and, with ``--retry-failed``, every failed operation)
   return to ``pending`` in the same transaction, before the results file is rewritten,
   so their old line is gone before a new one can be appended.

One process works on a state file at a time (an exclusive lock beside it); workers in
many processes or machines share the *provider* through ``--redis`` instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ._errors import CliError
from ._inputs import Op

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no cross-process lock
    fcntl = None  # type: ignore[assignment]

__all__ = ["SCHEMA_VERSION", "JobState", "Reopened"]

SCHEMA_VERSION = "1"
"""The state file's schema version (stored in its ``meta`` table)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ops (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    line INTEGER NOT NULL,
    url TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'claimed', 'done')),
    reason TEXT,
    retry_at REAL,
    runs INTEGER NOT NULL DEFAULT 0,
    claimed_by INTEGER,
    done_seq INTEGER,
    result TEXT
);
CREATE INDEX IF NOT EXISTS ops_status ON ops (status, seq);
CREATE INDEX IF NOT EXISTS ops_done ON ops (done_seq);
CREATE TABLE IF NOT EXISTS runs (run INTEGER PRIMARY KEY AUTOINCREMENT, started REAL NOT NULL,
                                 pid INTEGER NOT NULL);
"""


@dataclass(frozen=True, slots=True)
class Reopened:
    """What a run found when it opened the state.

    Attributes:
        orphans: rows claimed by a run that died (back to pending).
        rate_limited: rate-limited rows whose ``retry_at`` has passed (back to pending).
        failed: failed rows re-opened by ``--retry-failed``.
        waiting: rate-limited rows whose ``retry_at`` is still ahead (left done).
        next_retry_at: the earliest such ``retry_at``, or None.
    """

    orphans: int = 0
    rate_limited: int = 0
    failed: int = 0
    waiting: int = 0
    next_retry_at: float | None = None


class JobState:
    """A fetch job's SQLite state; thread-safe (one connection behind a lock).

    Args:
        path: the state file (created with its directory if missing).
        input_name: the input file the job reads; a state belongs to one input.
    """

    def __init__(self, path: str | Path, input_name: str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._lock_file: IO[bytes] | None = None
        self._results: IO[str] | None = None
        self._run = 0
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
                with self._transaction() as db:
                    db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                   [("schema", SCHEMA_VERSION), ("input", input_name)])
        except sqlite3.DatabaseError as exc:
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
                               "state file; share the provider across processes with --redis)"
                               ) from None
        self._lock_file = handle

    def _release_lock(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()  # closing releases the flock
            self._lock_file = None

    def _check_meta(self, input_name: str) -> None:
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

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction under the lock; rolled back on any error."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def sync(self, ops: Sequence[Op], *, pid: int, now: float) -> None:
        """Add the input's new operations and start a run (nothing changes on a mismatch).

        Raises:
            CliError: an id already in the state now names a different URL, or is gone from
                the input.
        """
        with self._transaction() as db:
            known = dict(db.execute("SELECT id, fingerprint FROM ops").fetchall())
            fresh = []
            for op in ops:
                old = known.get(op.id)
                if old is None:
                    fresh.append((op.id, op.line, op.safe_url, op.fingerprint))
                elif old != op.fingerprint:
                    raise CliError(f"{self.path}: operation {op.id!r} (input line {op.line}) now "
                                   "names a different URL than when the state was made; pass "
                                   "another --state to start a new job")
            missing = sorted(set(known) - {op.id for op in ops})
            if missing:
                raise CliError(f"{self.path}: {len(missing)} operation(s) of this state are no "
                               f"longer in the input (first: {missing[0]!r}); pass another --state "
                               "to start a new job")
            db.executemany("INSERT INTO ops (id, line, url, fingerprint) VALUES (?, ?, ?, ?)", fresh)
            cursor = db.execute("INSERT INTO runs (started, pid) VALUES (?, ?)", (now, pid))
            self._run = int(cursor.lastrowid or 0)

    def reopen(self, now: float, *, retry_failed: bool) -> Reopened:
        """Return orphaned, due rate-limited and (optionally) failed rows to pending."""
        with self._transaction() as db:
            orphans = db.execute("UPDATE ops SET status = 'pending', claimed_by = NULL "
                                 "WHERE status = 'claimed'").rowcount
            due = db.execute("UPDATE ops SET status = 'pending' WHERE status = 'done' AND "
                             "reason = 'rate_limited' AND COALESCE(retry_at, 0) <= ?",
                             (now,)).rowcount
            failed = 0
            if retry_failed:
                failed = db.execute("UPDATE ops SET status = 'pending' WHERE status = 'done' "
                                    "AND reason != 'ok'").rowcount
            waiting, next_at = db.execute(
                "SELECT COUNT(*), MIN(retry_at) FROM ops WHERE status = 'done' AND "
                "reason = 'rate_limited'").fetchone()
        return Reopened(orphans, due, failed, int(waiting), next_at)

    # results ---------------------------------------------------------------------------------

    def open_results(self, path: str | Path) -> int:
        """Rewrite the results file from the state, then keep it open to append; lines written."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(target.name + ".tmp")
        with self._lock:
            rows = self._db.execute("SELECT result FROM ops WHERE status = 'done' "
                                    "ORDER BY done_seq").fetchall()
        with open(temporary, "w", encoding="utf-8") as out:
            for (line,) in rows:
                out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
        self._results = open(target, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        return len(rows)

    # work ------------------------------------------------------------------------------------

    def claim(self) -> str | None:
        """Claim the next pending operation (in input order); its id, or None when none is left."""
        with self._transaction() as db:
            row = db.execute("SELECT seq, id FROM ops WHERE status = 'pending' ORDER BY seq LIMIT 1"
                             ).fetchone()
            if row is None:
                return None
            db.execute("UPDATE ops SET status = 'claimed', claimed_by = ?, runs = runs + 1 "
                       "WHERE seq = ?", (self._run, row[0]))
            return str(row[1])

    def complete(self, op_id: str, result: dict[str, Any]) -> None:
        """Record an operation's result, then append its line to the results file."""
        line = json.dumps(result, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        with self._transaction() as db:
            (done_seq,) = db.execute("SELECT COALESCE(MAX(done_seq), 0) + 1 FROM ops").fetchone()
            db.execute("UPDATE ops SET status = 'done', reason = ?, retry_at = ?, result = ?, "
                       "done_seq = ?, claimed_by = NULL WHERE id = ? AND status = 'claimed'",
                       (result["outcome"], result.get("retry_at"), line, done_seq, op_id))
        with self._lock:  # after the commit: a crash here is repaired by open_results()
            if self._results is not None:
                self._results.write(line + "\n")
                self._results.flush()

    def counts(self) -> dict[str, int]:
        """Rows by status, and done rows by outcome reason (``done:<reason>``)."""
        with self._lock:
            rows = self._db.execute("SELECT status, reason, COUNT(*) FROM ops GROUP BY status, reason"
                                    ).fetchall()
        out: dict[str, int] = {}
        for status, reason, n in rows:
            out[status] = out.get(status, 0) + n
            if status == "done":
                out[f"done:{reason}"] = n
        return out

    def results(self) -> list[dict[str, Any]]:
        """Every recorded result, in the order they were recorded."""
        with self._lock:
            rows = self._db.execute("SELECT result FROM ops WHERE status = 'done' ORDER BY done_seq"
                                    ).fetchall()
        return [json.loads(line) for (line,) in rows]

    @property
    def run(self) -> int:
        """This run's number (1 for the first run over the state)."""
        return self._run

    def close(self) -> None:
        """Close the results file, the database and the lock (safe to call twice)."""
        with self._lock:
            if self._results is not None:
                self._results.close()
                self._results = None
            with contextlib.suppress(sqlite3.Error, AttributeError):
                self._db.close()
        self._release_lock()
