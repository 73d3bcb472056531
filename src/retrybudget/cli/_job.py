"""The fetch job: worker threads that lease operations from the job's queue and GET them.

Every worker sends through its own :class:`~retrybudget.integrations.httpx.RetryTransport`,
and every transport shares one coordinator (memory or Redis), so the gate, pacing, retry
budget and breaker coordinate all of them. Each finished operation becomes one result line:
its outcome reason and per-operation stats, the last status, and the payload only when the
outcome is ok. A failed operation never carries a value.
"""

from __future__ import annotations

import json
import random
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from .._clock import SYSTEM_CLOCK, Clock
from .._drivers import Retrier
from ..coordination import Coordinator
from ..core.actions import RequestInfo
from ..core.outcome import Outcome, Reason
from ..core.policy import Policy
from ..integrations import JOB_ID, send_with_outcome
from ..integrations.httpx import RetryTransport
from ..observe import operation_stats, scrub
from ..queue import Lease, worker_name
from ._inputs import Op
from ._state import JobState

__all__ = ["JobSettings", "ResultHook", "result_line", "run_job"]

ResultHook = Callable[[dict[str, Any]], None]
"""Called (from a worker thread) with each result line as it is recorded."""


@dataclass(frozen=True, slots=True)
class JobSettings:
    """How a job runs.

    Attributes:
        policy: every operation's budget and rules.
        workers: worker threads.
        coordinator: shared by every worker (and, for Redis, by other processes).
        hooks: retrier hooks (audit, progress).
        secrets: values scrubbed from every result line.
        timeout: the httpx timeout of one attempt (the policy clips it to the deadline).
        clock: where time comes from.
        seed: seeds each worker's jitter source (None: unseeded).
        refuse: why an operation is outside the job's allowed inputs (None: allowed); a
            refused operation is recorded ``rejected`` with zero attempts, never sent.
    """

    policy: Policy
    workers: int
    coordinator: Coordinator
    hooks: tuple[object, ...] = ()
    secrets: tuple[str, ...] = ()
    timeout: float = 30.0
    clock: Clock = SYSTEM_CLOCK
    seed: int | None = None
    refuse: Callable[[Op], str | None] | None = None


def _payload(response: httpx.Response) -> object:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return response.text


def result_line(
    op: Op,
    outcome: Outcome[Any],
    request: RequestInfo | None,
    response: httpx.Response | None,
    *,
    run: int,
    finished_at: float,
    secrets: Sequence[str] = (),
) -> dict[str, Any]:
    """The results-file line of one operation (scrubbed of ``secrets``).

    The per-operation stats (:func:`~retrybudget.observe._stats.operation_stats`) plus the
    input id, the redacted URL, ``ok``, the last HTTP status (or the class of the error when
    no response came, as ``error``), the run number and, only when the outcome is ok, the
    payload as ``value``.
    """
    info = request if request is not None else RequestInfo("GET", outcome.key, url=op.safe_url)
    line: dict[str, Any] = {"id": op.id, "url": op.safe_url}
    line.update(operation_stats(outcome, info))
    ok = outcome.reason is Reason.OK
    status = outcome.history[-1].status if outcome.history else None
    error = outcome.history[-1].error if outcome.history else None
    value = _payload(response) if ok and response is not None else None
    line.update({"url": op.safe_url, "ok": ok, "status": status, "error": error, "value": value,
                 "run": run, "finished_at": round(finished_at, 3)})
    cleaned = scrub(line, secrets)
    assert isinstance(cleaned, dict)  # noqa: S101 - scrub keeps a dict a dict
    return cleaned


class _Worker:
    def __init__(self, number: int, ops: Mapping[str, Op], state: JobState, settings: JobSettings,
                 on_result: ResultHook, stop: threading.Event) -> None:
        self.ops = ops
        self.state = state
        self.settings = settings
        self.on_result = on_result
        self.stop = stop
        seed = None if settings.seed is None else settings.seed * 1000 + number
        self.retrier = Retrier(policy=settings.policy, clock=settings.clock,
                               coordinator=settings.coordinator,
                               hooks=settings.hooks, random=random.Random(seed),
                               method="GET")
        self.error: BaseException | None = None
        self.name = worker_name(number)
        self.busy = False
        """Whether an operation is in flight (read by run_job when Ctrl-C comes)."""

    def __call__(self) -> None:
        try:
            transport = RetryTransport(retrier=self.retrier)
            with httpx.Client(transport=transport, timeout=self.settings.timeout) as client:
                self.state.work(self.name, lambda lease: self._busy_run(client, lease), self.stop,
                                self.on_result)
        except BaseException as exc:  # reported by run_job; the leased operation is recovered
            self.error = exc
            self.stop.set()

    def _refused(self, op: Op, why: str) -> tuple[Outcome[Any], dict[str, Any]]:
        """Record an operation outside the allowed inputs: rejected, zero attempts, unsent."""
        outcome: Outcome[Any] = Outcome(reason=Reason.REJECTED, operation_id=secrets.token_hex(8),
                                        attempts=0, waits=(), elapsed=0.0,
                                        detail=f"refused before any attempt: {why}",
                                        method="GET", job_id=op.id)
        request = RequestInfo("GET", "", url=op.safe_url, job_id=op.id)
        for hook in self.settings.hooks:
            notify = getattr(hook, "on_outcome", None)
            if notify is not None:
                notify(outcome, request)
        return outcome, result_line(op, outcome, request, None, run=self.state.run,
                                    finished_at=self.settings.clock.wall(),
                                    secrets=self.settings.secrets)

    def _busy_run(self, client: httpx.Client, lease: Lease) -> tuple[Outcome[Any], dict[str, Any]]:
        self.busy = True
        try:
            return self._run(client, lease)
        finally:
            self.busy = False

    def _run(self, client: httpx.Client, lease: Lease) -> tuple[Outcome[Any], dict[str, Any]]:
        op = self.ops[lease.op_id]
        why = None if self.settings.refuse is None else self.settings.refuse(op)
        if why is not None:
            return self._refused(op, why)
        request = client.build_request("GET", op.url, headers=list(op.headers),
                                       extensions={JOB_ID: op.id})
        # Every ending carries its outcome; an error raised before the operation began (a bug)
        # propagates: the worker stops and its leased operation is recovered next run.
        outcome, handed = send_with_outcome(client.send, request, stream=True)
        response = handed
        if handed is not None:
            try:
                handed.read()  # the body the integration handed over unread
            except httpx.HTTPError:
                response = None  # the outcome stands; there is no payload to record
            finally:
                handed.close()
        line = result_line(op, outcome, None, response, run=self.state.run,
                           finished_at=self.settings.clock.wall(), secrets=self.settings.secrets)
        return outcome, line


def run_job(
    ops: Sequence[Op],
    state: JobState,
    settings: JobSettings,
    *,
    on_result: ResultHook,
    on_tick: Callable[[], None] = lambda: None,
    tick: float = 0.1,
    on_interrupt: Callable[[int], None] = lambda in_flight: None,
) -> None:
    """Run every pending operation of ``state`` with ``settings.workers`` threads.

    ``on_tick`` is called from the calling thread about every ``tick`` seconds while the
    workers run (to refresh a progress display). Ctrl-C stops claiming new operations and
    waits for the ones in flight; their results are recorded.

    Raises:
        KeyboardInterrupt: after the workers in flight have finished.
        BaseException: the first error a worker raised (its operation is recovered next run).
    """
    by_id = {op.id: op for op in ops}
    stop = threading.Event()
    workers = [_Worker(n, by_id, state, settings, on_result, stop)
               for n in range(settings.workers)]
    threads = [threading.Thread(target=w, name=f"retrybudget-fetch-{n}", daemon=True)
               for n, w in enumerate(workers)]
    for thread in threads:
        thread.start()
    try:
        alive = threads
        while alive:
            alive[0].join(tick)
            on_tick()
            alive = [t for t in alive if t.is_alive()]
    except KeyboardInterrupt:
        stop.set()
        on_interrupt(sum(w.busy for w in workers))
        for thread in threads:
            thread.join()
        raise
    on_tick()
    failed = next((w.error for w in workers if w.error is not None), None)
    if failed is not None:
        raise failed
