"""Per-run state of the sandbox: traffic records, windows, fixtures, reservations.

Everything a run owns is keyed by its run id, so parallel runs never see each
other's scripts, quota, faults or reservations. A lock guards every change; it is
never held across an ``await``.
"""

from __future__ import annotations

import math
import random
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

from retrybudget._clock import Clock
from retrybudget._fixtures import Step
from retrybudget.sandbox._config import SandboxConfig
from retrybudget.sandbox._faults import FaultDraw, draw_fault, fault_rng, in_outage
from retrybudget.sandbox._limits import FixedWindow, WindowReading

__all__ = ["MAX_RECORDS_PER_RUN", "RequestRecord", "SandboxState", "StoredResponse"]

MAX_RECORDS_PER_RUN = 100_000
"""Requests recorded per run; later ones are counted in ``dropped`` but not listed."""


class RequestRecord:
    """One request seen by the provider (no header but the idempotency key is kept)."""

    __slots__ = (
        "arrival",
        "arrival_mono",
        "done",
        "fixture_id",
        "idempotency_key",
        "method",
        "path",
        "status",
    )

    def __init__(
        self,
        *,
        method: str,
        path: str,
        arrival: float,
        arrival_mono: float,
        idempotency_key: str | None,
        fixture_id: str | None,
    ) -> None:
        self.method = method
        self.path = path
        self.arrival = arrival
        self.arrival_mono = arrival_mono
        self.idempotency_key = idempotency_key
        self.fixture_id = fixture_id
        self.status: int | None = None
        self.done = False

    def as_json(self) -> dict[str, Any]:
        """The record as served by ``GET /_stats/{run_id}``."""
        return {
            "method": self.method,
            "path": self.path,
            "arrival": self.arrival,
            "arrival_mono": self.arrival_mono,
            "status": self.status,
            "idempotency_key": self.idempotency_key,
            "fixture_id": self.fixture_id,
        }


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """A reservation answer kept for replay under its idempotency key."""

    rental_id: int
    status: int
    body: dict[str, Any]


class _Script:
    __slots__ = ("cursor", "steps")

    def __init__(self, steps: tuple[Step, ...]) -> None:
        self.steps = steps
        self.cursor = 0

    def next_step(self) -> Step:
        step = self.steps[min(self.cursor, len(self.steps) - 1)]
        self.cursor += 1
        return step


class _Run:
    __slots__ = (
        "dropped",
        "fixtures",
        "idempotency",
        "in_flight",
        "max_in_flight",
        "records",
        "reservations",
        "rng",
        "window",
        "windows",
    )

    def __init__(self, rng: random.Random) -> None:
        self.records: list[RequestRecord] = []
        self.dropped = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.window = FixedWindow()
        self.windows: dict[str, FixedWindow] = {}  # per bucket (Slack: per Web API method)
        self.fixtures: dict[str, _Script] = {}
        self.idempotency: dict[str, StoredResponse] = {}
        self.reservations = 0
        self.rng = rng


class SandboxState:
    """All mutable state of one sandbox app.

    Args:
        config: the app's configuration.
        clock: where every time reading comes from.
    """

    def __init__(self, config: SandboxConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.started_mono = clock.monotonic()
        self._runs: dict[str, _Run] = {}
        self._lock = threading.Lock()

    def _run(self, run_id: str) -> _Run:
        run = self._runs.get(run_id)
        if run is None:
            run = _Run(fault_rng(self.config.faults.seed, run_id))
            self._runs[run_id] = run
        return run

    # traffic -------------------------------------------------------------

    def arrive(
        self,
        run_id: str,
        *,
        method: str,
        path: str,
        idempotency_key: str | None,
        fixture_id: str | None,
    ) -> tuple[RequestRecord, int]:
        """Record a request's arrival; returns its record and the run's in-flight count."""
        record = RequestRecord(
            method=method,
            path=path,
            arrival=self.clock.wall(),
            arrival_mono=self.clock.monotonic(),
            idempotency_key=idempotency_key,
            fixture_id=fixture_id,
        )
        with self._lock:
            run = self._run(run_id)
            if len(run.records) < MAX_RECORDS_PER_RUN:
                run.records.append(record)
            else:
                run.dropped += 1
            run.in_flight += 1
            run.max_in_flight = max(run.max_in_flight, run.in_flight)
            return record, run.in_flight

    def answered(self, record: RequestRecord, status: int | None) -> None:
        """Mark a request answered with ``status`` (``None``: the connection was reset)."""
        with self._lock:
            record.status = status
            record.done = True

    def leave(self, run_id: str) -> None:
        """The request is no longer in flight."""
        with self._lock:
            run = self._run(run_id)
            run.in_flight = max(0, run.in_flight - 1)

    def in_flight(self, run_id: str) -> int:
        """Requests of the run currently in flight."""
        with self._lock:
            return self._run(run_id).in_flight

    # limits and faults ---------------------------------------------------

    def consume(self, run_id: str, bucket: str = "") -> WindowReading | None:
        """Take one request from the run's primary quota (``None`` if there is no limit);
        a ``bucket`` (a Slack Web API method) has a quota of its own."""
        limit = self.config.active_rate_limit
        if limit is None:
            return None
        now = self.clock.wall()
        with self._lock:
            run = self._run(run_id)
            window = run.window if not bucket else run.windows.setdefault(bucket, FixedWindow())
            return window.consume(limit, now)

    def peek(self, run_id: str) -> WindowReading | None:
        """The run's primary quota without consuming it (``None`` if there is no limit)."""
        limit = self.config.active_rate_limit
        if limit is None:
            return None
        now = self.clock.wall()
        with self._lock:
            return self._run(run_id).window.peek(limit, now)

    def in_outage(self) -> bool:
        """Whether the provider is in a configured outage window now."""
        faults = self.config.faults
        if not faults.outages:
            return False
        return in_outage(faults, self.clock.monotonic() - self.started_mono)

    def draw_fault(self, run_id: str) -> FaultDraw:
        """Draw the next fault from the run's seeded generator."""
        with self._lock:
            return draw_fault(self.config.faults, self._run(run_id).rng)

    # fixtures --------------------------------------------------------------

    def load_fixture(self, run_id: str, fixture_id: str, steps: tuple[Step, ...]) -> None:
        """Install (or replace, rewinding it) a script for ``run_id``/``fixture_id``."""
        with self._lock:
            self._run(run_id).fixtures[fixture_id] = _Script(steps)

    def next_step(self, run_id: str, fixture_id: str) -> Step | None:
        """The script's next step (the last one again past the end), or ``None`` if unknown."""
        with self._lock:
            script = self._run(run_id).fixtures.get(fixture_id)
            return None if script is None else script.next_step()

    # reservations ----------------------------------------------------------

    def reserve(
        self, run_id: str, rental_id: int, idempotency_key: str | None
    ) -> tuple[StoredResponse, bool]:
        """Make a reservation, or replay the one made under ``idempotency_key``.

        Returns the response and whether it is a replay. A key reused for another
        rental returns a 409 response (not stored).
        """
        with self._lock:
            run = self._run(run_id)
            if idempotency_key is not None:
                stored = run.idempotency.get(idempotency_key)
                if stored is not None:
                    if stored.rental_id != rental_id:
                        conflict = StoredResponse(
                            rental_id,
                            409,
                            {"message": "Idempotency-Key was used for another request"},
                        )
                        return conflict, False
                    return stored, True
            run.reservations += 1
            body = {
                "reservation_id": f"res_{run.reservations:06d}",
                "rental_id": rental_id,
                "reserved": True,
            }
            response = StoredResponse(rental_id, 201, body)
            if idempotency_key is not None:
                run.idempotency[idempotency_key] = response
            return response, False

    # stats -----------------------------------------------------------------

    def stats(self, run_id: str) -> dict[str, Any]:
        """Everything recorded for a run, with aggregates (see ``GET /_stats/{run_id}``)."""
        limit = self.config.active_rate_limit
        window_s = limit.window_s if limit is not None else 1
        with self._lock:
            run = self._runs.get(run_id)
            records = list(run.records) if run is not None else []
            requests = [record.as_json() for record in records]
            by_status: Counter[str] = Counter()
            for record in records:
                if record.status is not None:
                    by_status[str(record.status)] += 1
                else:
                    by_status["reset" if record.done else "pending"] += 1
            windows = Counter(math.floor(record.arrival / window_s) for record in records)
            return {
                "run_id": run_id,
                "count": len(records) + (run.dropped if run is not None else 0),
                "dropped": run.dropped if run is not None else 0,
                "by_status": dict(sorted(by_status.items())),
                "busiest_window": {
                    "window_s": window_s,
                    "limit": limit.limit if limit is not None else None,
                    "count": max(windows.values(), default=0),
                },
                "max_in_flight": run.max_in_flight if run is not None else 0,
                "in_flight": run.in_flight if run is not None else 0,
                "reservations": run.reservations if run is not None else 0,
                "requests": requests,
            }
