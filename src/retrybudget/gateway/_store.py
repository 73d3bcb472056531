"""The gateway's stored facts in SQLite: confirmed availabilities and reservations.

Two tables:

- ``rentals``: the last availability the provider confirmed for each rental, with the
  gateway's time of confirmation and its source. Written only after a payload validated.
- ``reservations``: one row per idempotency key, stored as its SHA-256 (:func:`key_digest`:
  the caller's key is a credential of sorts, never written in clear). ``pending`` while the provider call is
  in flight (with a lease), ``confirmed`` once the provider confirmed it (with the answer
  to replay), ``unconfirmed`` after any other result. Only ``confirmed`` is a committed
  reservation; a CHECK constraint refuses a confirmed row without the provider's id.

Every statement runs on a small thread pool, one connection per thread (WAL journal), so
the event loop never waits on the disk. Time comes in as arguments from the app's clock.
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import json
import os
import secrets
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from .._files import APPLICATION_ID, check_own_database

__all__ = ["TABLES", "Claim", "ClaimKind", "FactStore", "StoredFact", "key_digest"]

T = TypeVar("T")

TABLES = ("rentals", "reservations")
"""The tables of a gateway database; a file holding any other is not the gateway's."""

_SCHEMA = f"""
PRAGMA application_id = {APPLICATION_ID};
CREATE TABLE IF NOT EXISTS rentals (
    rental_id TEXT PRIMARY KEY,
    available INTEGER NOT NULL CHECK (available IN (0, 1)),
    confirmed_at REAL NOT NULL,
    provider_checked_at REAL,
    source TEXT NOT NULL,
    operation_id TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS reservations (
    idempotency_key TEXT PRIMARY KEY,
    rental_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'confirmed', 'unconfirmed')),
    claim TEXT,
    lease_until REAL,
    forwarded INTEGER NOT NULL DEFAULT 0,
    last_outcome TEXT,
    reservation_id TEXT,
    response_status INTEGER,
    response_body TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    CHECK (state != 'confirmed' OR (reservation_id IS NOT NULL AND response_body IS NOT NULL))
);
"""


def key_digest(key: str) -> str:
    """The SHA-256 (hex) of an idempotency key: what the store keeps, never the key."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class StoredFact:
    """The last availability the provider confirmed for a rental.

    Attributes:
        rental_id: the rental.
        available: what the provider said then.
        confirmed_at: the gateway's wall-clock time of the confirmation (epoch seconds).
        provider_checked_at: the provider's own timestamp, if it gave one.
        source: where it came from (the provider URL of the lookup, redacted).
        operation_id: the lookup that confirmed it.
    """

    rental_id: str
    available: bool
    confirmed_at: float
    provider_checked_at: float | None
    source: str
    operation_id: str


class ClaimKind(str, enum.Enum):
    """What a reservation request may do with its idempotency key."""

    FORWARD = "forward"
    """The key is ours now (new, or after an unconfirmed result): send it to the provider."""
    REPLAY = "replay"
    """The provider confirmed this key before: answer with the stored result."""
    IN_PROGRESS = "in_progress"
    """Another request holds the key right now."""
    CONFLICT = "conflict"
    """The key was used for another rental or another body."""


@dataclass(frozen=True, slots=True)
class Claim:
    """The answer to :meth:`FactStore.claim_reservation`.

    Attributes:
        kind: what to do.
        token: the claim to pass back when the result is known (FORWARD).
        forwarded: how many times this key has been forwarded, this time included (FORWARD).
        status: the stored status (REPLAY).
        body: the stored body (REPLAY).
        lease_until: when the holder's lease ends (IN_PROGRESS).
    """

    kind: ClaimKind
    token: str = ""
    forwarded: int = 0
    status: int = 0
    body: dict[str, Any] | None = None
    lease_until: float = 0.0


class FactStore:
    """SQLite storage on a thread pool, one connection per pool thread.

    The schema is created when the store is made (in the calling thread). The coroutine
    methods run their statements on the pool, so the event loop never waits on the disk.

    Args:
        path: the database file.
        threads: pool threads (and so connections) at most.

    Raises:
        ValueError: ``path`` is another application's file (not SQLite, or holding tables
            that are not the gateway's); it is left unchanged.
    """

    def __init__(self, path: str | os.PathLike[str], *, threads: int = 4) -> None:
        self.path = os.fspath(path)
        check_own_database(self.path, self.path, "a gateway database", TABLES)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="gateway-db")
        setup = self._connect()
        try:
            setup.executescript(_SCHEMA)
        finally:
            setup.close()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=5.0, isolation_level=None,
                               check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA busy_timeout=5000")
        return conn

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, partial(self._call, fn, *args))

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return fn(self._connection(), *args)

    def close(self) -> None:
        """Wait for running statements, then close every connection."""
        self._pool.shutdown(wait=True)
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()

    # availability -------------------------------------------------------------------

    async def record_availability(self, fact: StoredFact) -> None:
        """Store a confirmed availability (an older confirmation never replaces a newer one)."""
        await self._run(_record_availability, fact)

    async def stored_fact(self, rental_id: str) -> StoredFact | None:
        """The last confirmed availability of ``rental_id``, or None."""
        return await self._run(_stored_fact, rental_id)

    async def ping(self) -> None:
        """Run one trivial statement (for health checks)."""
        await self._run(_ping)

    # reservations -------------------------------------------------------------------

    async def claim_reservation(self, key: str, rental_id: str, fingerprint: str, now: float,
                                lease_until: float) -> Claim:
        """Take ``key`` for a provider call, or say why not (see :class:`ClaimKind`)."""
        return await self._run(_claim, key_digest(key), rental_id, fingerprint, now, lease_until)

    async def confirm_reservation(self, key: str, reservation_id: str, status: int,
                                  body: dict[str, Any], now: float) -> None:
        """Commit the reservation the provider confirmed under ``key``."""
        await self._run(_confirm, key_digest(key), reservation_id, status, body, now)

    async def release_reservation(self, key: str, token: str, outcome: str, now: float) -> None:
        """Record a result that is not a confirmation; the key may be forwarded again."""
        await self._run(_release, key_digest(key), token, outcome, now)


# The statements, each run in a pool thread on that thread's connection ------------------------


def _ping(conn: sqlite3.Connection) -> None:
    conn.execute("SELECT 1").fetchone()


def _record_availability(conn: sqlite3.Connection, fact: StoredFact) -> None:
    conn.execute(
        """INSERT INTO rentals (rental_id, available, confirmed_at, provider_checked_at, source,
                                operation_id)
           VALUES (?, ?, ?, ?, ?, ?)
           ON CONFLICT (rental_id) DO UPDATE SET
               available = excluded.available, confirmed_at = excluded.confirmed_at,
               provider_checked_at = excluded.provider_checked_at, source = excluded.source,
               operation_id = excluded.operation_id
           WHERE excluded.confirmed_at >= rentals.confirmed_at""",
        (fact.rental_id, int(fact.available), fact.confirmed_at, fact.provider_checked_at,
         fact.source, fact.operation_id),
    )


def _stored_fact(conn: sqlite3.Connection, rental_id: str) -> StoredFact | None:
    row = conn.execute(
        """SELECT rental_id, available, confirmed_at, provider_checked_at, source, operation_id
           FROM rentals WHERE rental_id = ?""",
        (rental_id,),
    ).fetchone()
    if row is None:
        return None
    return StoredFact(row[0], bool(row[1]), row[2], row[3], row[4], row[5])


def _claim(conn: sqlite3.Connection, key: str, rental_id: str, fingerprint: str, now: float,
           lease_until: float) -> Claim:
    token = secrets.token_hex(8)
    conn.execute("BEGIN IMMEDIATE")
    try:
        row = conn.execute(
            """SELECT fingerprint, state, lease_until, response_status, response_body, forwarded
               FROM reservations WHERE idempotency_key = ?""",
            (key,),
        ).fetchone()
        if row is None:
            conn.execute(
                """INSERT INTO reservations (idempotency_key, rental_id, fingerprint, state, claim,
                                             lease_until, forwarded, created_at, updated_at)
                   VALUES (?, ?, ?, 'pending', ?, ?, 1, ?, ?)""",
                (key, rental_id, fingerprint, token, lease_until, now, now),
            )
            claim = Claim(ClaimKind.FORWARD, token=token, forwarded=1)
        elif row[0] != fingerprint:
            claim = Claim(ClaimKind.CONFLICT)
        elif row[1] == "confirmed":
            claim = Claim(ClaimKind.REPLAY, status=row[3], body=json.loads(row[4]))
        elif row[1] == "pending" and row[2] is not None and row[2] > now:
            claim = Claim(ClaimKind.IN_PROGRESS, lease_until=row[2])
        else:
            conn.execute(
                """UPDATE reservations SET state = 'pending', claim = ?, lease_until = ?,
                       forwarded = forwarded + 1, updated_at = ?
                   WHERE idempotency_key = ?""",
                (token, lease_until, now, key),
            )
            claim = Claim(ClaimKind.FORWARD, token=token, forwarded=row[5] + 1)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return claim


def _confirm(conn: sqlite3.Connection, key: str, reservation_id: str, status: int,
             body: dict[str, Any], now: float) -> None:
    # A confirmation is committed whoever holds the claim: the provider made the reservation.
    conn.execute(
        """UPDATE reservations SET state = 'confirmed', claim = NULL, lease_until = NULL,
               last_outcome = 'ok', reservation_id = ?, response_status = ?, response_body = ?,
               updated_at = ?
           WHERE idempotency_key = ? AND state != 'confirmed'""",
        (reservation_id, status, json.dumps(body, separators=(",", ":")), now, key),
    )


def _release(conn: sqlite3.Connection, key: str, token: str, outcome: str, now: float) -> None:
    conn.execute(
        """UPDATE reservations SET state = 'unconfirmed', claim = NULL, lease_until = NULL,
               last_outcome = ?, updated_at = ?
           WHERE idempotency_key = ? AND claim = ? AND state = 'pending'""",
        (outcome, now, key, token),
    )
