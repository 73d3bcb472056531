"""Support for the gateway tests: a scripted provider behind one live gateway.

Not a test module of its own (it holds no tests): the gateway test modules import it.

:class:`Scripted` runs one gateway (real uvicorn, loopback) whose provider base URL is one
sandbox fixture; each case loads its own script into that fixture, starts from a fresh
coordinator (no breaker or gate state from the case before) and reads how many requests
the provider saw for it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sqlite3
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from retrybudget.coordination import CoordinationConfig, Coordinator, MemoryCoordinator
from retrybudget.core.actions import Admission, Permit
from retrybudget.core.outcome import Outcome
from retrybudget.core.throttle import Throttle
from retrybudget.gateway import GatewayConfig, GatewayServer, create_app
from retrybudget.sandbox import SandboxServer

_ids = itertools.count(1)


def unique(prefix: str) -> str:
    """A short id no other case uses (run ids, rental ids, idempotency keys)."""
    return f"{prefix}{next(_ids)}-{uuid.uuid4().hex[:6]}"


def available(rental_id: str, value: bool = True, **more: Any) -> dict[str, Any]:
    """A script step: the provider confirms ``value`` for ``rental_id``."""
    return {"status": 200, "body": {"rental_id": rental_id, "available": value, **more}}


def reserved(rental_id: str, reservation_id: str = "res_1") -> dict[str, Any]:
    """A script step: the provider confirms a reservation."""
    return {"status": 201, "body": {"rental_id": rental_id, "reserved": True,
                                    "reservation_id": reservation_id}}


class Resettable(Coordinator):
    """Delegates to an in-memory coordinator that :meth:`reset` replaces (test-only)."""

    def __init__(self, make: Callable[[], Coordinator]) -> None:
        self.make = make
        self.inner = make()

    def reset(self) -> None:
        """Forget every breaker, gate and budget."""
        self.inner = self.make()

    def admit(self, key: str) -> Admission:
        return self.inner.admit(key)

    patient = True  # the inner coordinator is told what each operation would wait

    def acquire(self, key: str, attempt: int, write_gap: float = 0.0, *,
                max_wait: float | None = None, fail_fast: bool = False) -> Permit:
        return self.inner.acquire(key, attempt, write_gap, max_wait=max_wait,
                                  fail_fast=fail_fast)

    def learn(self, key: str, throttle: Throttle | None, lease: str | None) -> None:
        self.inner.learn(key, throttle, lease)

    def spend_retry(self, key: str) -> bool:
        return self.inner.spend_retry(key)

    def finish(self, key: str, outcome: Outcome[Any], probe: bool) -> None:
        self.inner.finish(key, outcome, probe)


class Scripted:
    """One live gateway in front of one sandbox fixture.

    Args:
        sandbox: the provider.
        directory: where the gateway's database goes.
        coordination: the coordinator's settings (made afresh for each script).
        config: GatewayConfig fields besides ``provider`` and ``db_path``.
    """

    def __init__(self, sandbox: SandboxServer, directory: Path,
                 coordination: CoordinationConfig | None = None, **config: Any) -> None:
        self.sandbox = sandbox
        self.run = unique("run")
        self.fixture = "provider"
        self.steps: list[dict[str, Any]] = [{"status": 500}]
        base = sandbox.load_fixture(self.run, self.fixture, self.steps)
        self.config = GatewayConfig(provider=base, db_path=directory / f"{self.run}.sqlite3",
                                    **config)
        self.coordinator = Resettable(lambda: MemoryCoordinator(coordination))
        app = create_app(self.config, coordinator=self.coordinator)
        # The door's answers to a lagging loop have their own tests (test_gateway_door.py);
        # here a loaded machine's lag must not shed the lookups whose answers are under test.
        # The door still counts operations in flight and keeps its least reserve per turn.
        app.state.gateway.door.lag = None
        self.server = GatewayServer(app)
        self._baseline = 0

    def __enter__(self) -> Scripted:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    def script(self, steps: Sequence[dict[str, Any]]) -> None:
        """The provider answers ``steps`` from now on (the last one repeats); state is fresh."""
        self.steps = list(steps)
        self.sandbox.load_fixture(self.run, self.fixture, self.steps)
        self.coordinator.reset()
        self._baseline = self.sandbox.stats(self.run)["count"]

    def requests(self) -> list[dict[str, Any]]:
        """The requests the provider saw since the last :meth:`script`."""
        stats = self.sandbox.stats(self.run)
        return list(stats["requests"][self._baseline:])

    def url(self, path: str) -> str:
        """A URL on the gateway."""
        return self.server.url(path)

    def audited(self, operation_id: str, within: float = 10.0) -> dict[str, Any]:
        """The audit record of ``operation_id`` (the gateway writes it on a worker thread, so
        this polls, for at most ``within`` seconds; the gateway needs an ``audit_path``)."""
        path = self.config.audit_path
        assert path is not None, "this gateway keeps no audit"
        ends = time.monotonic() + within
        while True:
            with contextlib.suppress(FileNotFoundError):
                for line in Path(path).read_text(encoding="utf-8").splitlines():
                    record: dict[str, Any] = json.loads(line)
                    if record["operation_id"] == operation_id:
                        return record
            assert time.monotonic() < ends, f"no audit record for {operation_id} in {within} s"
            time.sleep(0.01)

    def query(self, sql: str, *args: object) -> list[tuple[Any, ...]]:
        """Rows from the gateway's database, read on a connection of our own."""
        with sqlite3.connect(self.config.db_path) as conn:
            return conn.execute(sql, args).fetchall()


def keys_named(value: object, name: str) -> int:
    """How many times a mapping key called ``name`` occurs anywhere in JSON-like ``value``."""
    if isinstance(value, Mapping):
        return sum((k == name) + keys_named(v, name) for k, v in value.items())
    if isinstance(value, list):
        return sum(keys_named(v, name) for v in value)
    return 0
