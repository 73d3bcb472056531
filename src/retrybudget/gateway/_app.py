"""The gateway as an ASGI app (Starlette).

Routes:

- ``GET /rentals/{id}/availability``: one logical lookup at the provider under the
  interactive contract (docs/design.md); answers 200 with the availability the
  provider just confirmed, or a problem mapped by ``GATEWAY_MAPPING`` that may carry the
  stored fact, labelled ``stored``.
- ``POST /rentals/{id}/reservations``: a write with a required ``Idempotency-Key``; sent
  once, committed locally only after the provider confirmed it, replayed from the store.
- ``GET /metrics``: Prometheus exposition of the app's own registry.
- ``GET /healthz``: 200 while the app and its store answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import anyio
import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from .._asgi import SendFilter
from .._clock import SYSTEM_CLOCK, Clock
from .._gateway_mapping import GATEWAY_MAPPING
from ..coordination import Coordinator
from ..integrations import IDEMPOTENCY_HEADER
from ..observe import redact_url
from ._answers import Answer, counters, json_answer, problem, retry_after, stored_view
from ._config import GatewayConfig
from ._door import STEP, STORE_TIME, Admitted, Door, LoopLag, Shed
from ._logging import LOGGER_NAME
from ._metrics import CONTENT_TYPE, GatewayMetrics
from ._payload import RENTAL_ID, idempotency_key_problem, read_availability, read_reservation
from ._provider import Result, audit_sink, call, default_coordinator, provider_client, provider_retrier
from ._store import ClaimKind, FactStore, StoredFact, key_digest

__all__ = ["ARRIVED", "Gateway", "create_app"]

log = logging.getLogger(LOGGER_NAME)

_MAX_BODY = 16 * 1024
_LOOKUP, _RESERVE = "logical_lookups", "logical_operations"
_SHED_DETAIL = {
    "capacity": "the gateway is at its limit of provider operations in flight; retry later",
    "budget": "the request waited too long to start a provider operation inside its "
              "deadline; retry later",
}
_SHED_RETRY_AFTER = "1"
"""The ``Retry-After`` of an overload answer (seconds): the door holds no queue to predict
from, so the hint is the smallest whole second."""
_VERDICT = "retrybudget.gateway.verdict"
"""The ASGI scope key holding the door's verdict on a request (see :meth:`Gateway._admit`)."""
_OPERATION_ENDED = "retrybudget.gateway.operation_ended"
"""The ASGI scope key holding the monotonic instant a request's provider operation ended."""

ARRIVED = "retrybudget.arrived"
"""The ASGI scope key holding the monotonic instant (on the app's clock) a request arrived:
set by the gateway's uvicorn protocol when the request's bytes are read, else by the app's
outermost middleware."""


def _fingerprint(rental_id: str, body: Mapping[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(f"{rental_id}\n{canonical}".encode()).hexdigest()


def _key_hash(key: str) -> str:
    return key_digest(key)[:12]  # the log's short form of what the store keeps


class Gateway:
    """The app's state and handlers: config, clock, store, provider client, metrics.

    Args:
        config: the gateway's configuration.
        clock: where every time reading comes from.
        transport: the httpx transport that sends each provider attempt (default: a pooled
            ``httpx.AsyncHTTPTransport``); the retry transport wraps it.
        coordinator: the coordinator (breaker, rate-limit gate, retry budget) for provider
            calls; default a :class:`MemoryCoordinator` with the config's breaker.
    """

    def __init__(self, config: GatewayConfig, *, clock: Clock,
                 transport: httpx.AsyncBaseTransport | None,
                 coordinator: Coordinator | None) -> None:
        self.config = config
        self.clock = clock
        self.store = FactStore(config.db_path, threads=config.db_threads)
        self.metrics = GatewayMetrics()
        self.coordinator = coordinator if coordinator is not None else default_coordinator(
            config, clock)
        self.lag = LoopLag(clock)
        self.door = Door(clock, deadline=config.deadline, max_in_flight=config.max_in_flight,
                         min_budget=config.min_budget, lag=self.lag)
        self.audit = audit_sink(config)
        retrier = provider_retrier(config, clock, self.coordinator, self.metrics.hook, self.audit)
        self.client = provider_client(config, retrier, transport)

    async def close(self) -> None:
        """Close the provider client, then the store and the audit file (on a worker thread)."""
        self.lag.stop()
        await self.client.aclose()
        await asyncio.get_running_loop().run_in_executor(None, self._close_files)

    def _close_files(self) -> None:
        self.store.close()
        if self.audit is not None:
            self.audit.close()

    # answers -----------------------------------------------------------------------

    async def _stored(self, rental_id: str, answer_by: float) -> StoredFact | None:
        """The stored fact, or None if the store fails or cannot answer by ``answer_by`` (the
        instant the lookup's answer is due to be decided; the door leaves ``STORE_TIME`` for
        it): a busy store never holds a failure answer past the deadline."""
        wait = answer_by - self.clock.monotonic()
        if wait <= 0:
            return None  # the answer is due: it goes without the stored fact
        try:
            with anyio.fail_after(wait):
                return await self.store.stored_fact(rental_id)
        except TimeoutError:
            log.warning("stored fact not read in time", extra={"event": "store_slow"})
            return None
        except sqlite3.Error as exc:
            log.warning("stored fact unreadable", extra={"event": "store_error",
                                                          "error": type(exc).__name__})
            return None

    async def _provider_failure(self, request: Request, result: Result[Any], logical: str,
                                rental_id: str, extra: Mapping[str, Any] | None = None,
                                answer_by: float = 0.0) -> Answer:
        """The problem for a failed provider operation, with the stored fact if one exists
        (a lookup's is read by ``answer_by``, see :meth:`_stored`)."""
        outcome, reason = result.outcome, result.reason
        status, code = GATEWAY_MAPPING[reason]
        code = code or "provider_unexpected"
        now = self.clock.wall()
        stored = (stored_view(await self._stored(rental_id, answer_by), now)
                  if logical == _LOOKUP else None)
        body: dict[str, Any] = {"rental_id": rental_id, **(extra or {})}
        if logical == _LOOKUP:
            body["stored"] = stored
        headers: dict[str, str] = {}
        hint = retry_after(outcome.retry_at, now) if reason.retry_hint else None
        if hint is not None:
            headers["Retry-After"] = hint  # a hint for the caller; the gateway did not wait
            body["retry_at"] = outcome.retry_at
        response = problem(status, code, result.detail, counters(outcome, logical, reason),
                           instance=request.url.path, extra=body, headers=headers)
        return Answer(response, code, outcome, {"rental_id": rental_id, "stored": bool(stored)})

    def _shed(self, request: Request, shed: Shed, logical: str, rental_id: str) -> Answer:
        """The answer to a request the door did not admit: at once, without the provider."""
        detail = _SHED_DETAIL[shed.reason]
        extra: dict[str, Any] = {"rental_id": rental_id, "shed": shed.reason}
        if logical == _LOOKUP:
            extra["stored"] = None  # an overloaded gateway does not read its store
        else:
            extra["committed"] = False
        fields: dict[str, Any] = {"rental_id": rental_id, "shed": shed.reason}
        if logical == _RESERVE:
            fields["reservation"] = "refused"
        response = problem(503, "gateway_overloaded", detail, counters(None, logical),
                           instance=request.url.path, extra=extra,
                           headers={"Retry-After": _SHED_RETRY_AFTER}, redact=False)
        return Answer(response, "gateway_overloaded", None, fields)

    def _admit(self, request: Request) -> Admitted | Shed:
        """Ask the door whether ``request`` may start its provider operation."""
        arrived = request.scope.get(ARRIVED)
        verdict = self.door.enter(arrived if isinstance(arrived, float)
                                  else self.clock.monotonic())
        self.metrics.admitted(verdict)
        request.scope[_VERDICT] = verdict
        return verdict

    def _local_problem(self, request: Request, status: int, code: str, detail: str, logical: str,
                       **fields: Any) -> Answer:
        """A problem the gateway answers without calling the provider (0 attempts)."""
        headers = {"Retry-After": str(fields.pop("retry_after"))} if "retry_after" in fields else {}
        response = problem(status, code, detail, counters(None, logical),
                           instance=request.url.path, extra=fields, headers=headers)
        return Answer(response, code, None, dict(fields))

    # routes --------------------------------------------------------------------------

    async def availability(self, request: Request) -> Answer:
        """``GET /rentals/{id}/availability``."""
        rental_id: str = request.path_params["rental_id"]
        if not RENTAL_ID.match(rental_id):
            return self._local_problem(request, 400, "invalid_rental_id",
                                       "rental ids are 1 to 64 URL-safe characters", _LOOKUP)
        admitted = self._admit(request)
        if isinstance(admitted, Shed):
            return self._shed(request, admitted, _LOOKUP, rental_id)
        try:
            return await self._lookup(request, rental_id, admitted)
        finally:
            self.door.leave()

    async def _lookup(self, request: Request, rental_id: str, admitted: Admitted) -> Answer:
        """The admitted lookup: one provider operation, then its answer by ``answer_by``."""
        answer_by = admitted.answer_by
        url = self.config.url(self.config.availability_path, rental_id)
        reader = functools.partial(read_availability, rental_id=rental_id)
        result = await call(self.client, request, "GET", url, reader, admitted.steps)
        request.scope[_OPERATION_ENDED] = self.clock.monotonic()
        fact, outcome = result.value, result.outcome
        if fact is None:
            return await self._provider_failure(request, result, _LOOKUP, rental_id,
                                                answer_by=answer_by)
        confirmed_at = self.clock.wall()
        recorded = True
        try:
            # the fact is written even if the answer cannot wait for it (recorded: false)
            with anyio.fail_after(max(STORE_TIME, answer_by - self.clock.monotonic())):
                await asyncio.shield(self.store.record_availability(StoredFact(
                    rental_id, fact.available, confirmed_at, fact.checked_at, redact_url(url),
                    outcome.operation_id)))
        except TimeoutError:
            recorded = False
            log.warning("confirmed availability not stored in time", extra={"event": "store_slow"})
        except sqlite3.Error as exc:
            recorded = False
            log.warning("confirmed availability not stored",
                        extra={"event": "store_error", "error": type(exc).__name__})
        body = {"rental_id": rental_id, "available": fact.available, "source": "provider",
                "confirmed_at": confirmed_at, "provider_checked_at": fact.checked_at,
                "recorded": recorded}
        answer = json_answer(200, body, counters(outcome, _LOOKUP))
        return Answer(answer, None, outcome, {"rental_id": rental_id})

    async def _request_body(self, request: Request) -> dict[str, Any] | None:
        raw = await request.body()
        if not raw.strip():
            return {}
        if len(raw) > _MAX_BODY:
            return None
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return None
        return data if isinstance(data, dict) else None

    async def reserve(self, request: Request) -> Answer:
        """``POST /rentals/{id}/reservations`` (``Idempotency-Key`` required)."""
        rental_id: str = request.path_params["rental_id"]
        if not RENTAL_ID.match(rental_id):
            return self._local_problem(request, 400, "invalid_rental_id",
                                       "rental ids are 1 to 64 URL-safe characters", _RESERVE)
        key = request.headers.get(IDEMPOTENCY_HEADER)
        unusable = idempotency_key_problem(key)
        if key is None or unusable:
            return self._local_problem(request, 400, "idempotency_key_required", unusable,
                                       _RESERVE, reservation="refused")
        body = await self._request_body(request)
        if body is None:
            return self._local_problem(request, 400, "invalid_request_body",
                                       f"send a JSON object of at most {_MAX_BODY} bytes, or nothing",
                                       _RESERVE, reservation="refused")
        admitted = self._admit(request)
        if isinstance(admitted, Shed):
            return self._shed(request, admitted, _RESERVE, rental_id)
        try:
            return await self._claim_and_forward(request, key, rental_id, body, admitted)
        finally:
            self.door.leave()

    async def _claim_and_forward(self, request: Request, key: str, rental_id: str,
                                 body: dict[str, Any], admitted: Admitted) -> Answer:
        """Claim the idempotency key, then forward the reservation (or answer why not)."""
        now = self.clock.wall()
        claim = await self.store.claim_reservation(
            key, rental_id, _fingerprint(rental_id, body), now, now + self.config.reservation_lease)
        fields: dict[str, Any] = {"rental_id": rental_id, "key": _key_hash(key)}
        if claim.kind is ClaimKind.REPLAY:
            counted = {**counters(None, _RESERVE), "replayed": True}
            replay = json_answer(claim.status, claim.body or {}, counted,
                                 headers={"Idempotent-Replayed": "true"})
            return Answer(replay, None, None, {**fields, "reservation": "replayed"})
        if claim.kind is ClaimKind.CONFLICT:
            return self._local_problem(
                request, 409, "idempotency_key_conflict",
                "this Idempotency-Key was used for another rental or another body", _RESERVE,
                reservation="refused")
        if claim.kind is ClaimKind.IN_PROGRESS:
            return self._local_problem(
                request, 409, "reservation_in_progress",
                "a request with this Idempotency-Key is still in progress; retry later", _RESERVE,
                reservation="refused", retry_after=retry_after(claim.lease_until, now) or "1")
        return await self._forward_reservation(request, key, claim.token, rental_id, body, fields,
                                               admitted)

    async def _forward_reservation(self, request: Request, key: str, token: str, rental_id: str,
                                   body: dict[str, Any], fields: dict[str, Any],
                                   admitted: Admitted) -> Answer:
        """Send the reservation once; commit it only if the provider confirmed it.

        The operation gets what is left of the admitted budget once the key is claimed (at
        least one ``STEP``: with nothing left the plan stops it before anything is sent).
        """
        url = self.config.url(self.config.reservation_path, rental_id)
        left = admitted.answer_by - STORE_TIME - self.clock.monotonic()
        steps = max(1, min(admitted.steps, int(left / STEP)))
        result = await call(self.client, request, "POST", url,
                                  functools.partial(read_reservation, rental_id=rental_id),
                                  steps, headers={IDEMPOTENCY_HEADER: key}, body=body)
        request.scope[_OPERATION_ENDED] = self.clock.monotonic()
        confirmed, outcome = result.value, result.outcome
        now = self.clock.wall()
        if confirmed is None or not confirmed.reserved:
            declined = confirmed is not None
            await self.store.release_reservation(
                key, token, "declined" if declined else result.reason.value, now)
            extra = {"committed": False,
                     "idempotency_key": "not committed: send the same request with the same key "
                                        "to forward it again (the provider deduplicates by key)"}
            if declined:
                refusal = problem(409, "reservation_declined", "the provider declined",
                                  counters(outcome, _RESERVE), instance=request.url.path,
                                  extra={"rental_id": rental_id, **extra})
                return Answer(refusal, "reservation_declined", outcome,
                              {**fields, "reservation": "declined"})
            failed = await self._provider_failure(request, result, _RESERVE, rental_id, extra)
            failed.fields.update(fields, reservation="unconfirmed")
            return failed
        stored = {"reservation_id": confirmed.reservation_id, "rental_id": rental_id,
                  "reserved": True, "confirmed_at": now}
        assert confirmed.reservation_id is not None  # noqa: S101 - read_reservation checks it
        try:
            await self.store.confirm_reservation(key, confirmed.reservation_id, 201, stored, now)
        except sqlite3.Error:
            log.exception("confirmed reservation not stored", extra={"event": "store_error"})
            return Answer(problem(
                500, "reservation_not_stored",
                "the provider confirmed the reservation but the gateway could not store it; "
                "send the same request with the same Idempotency-Key",
                counters(outcome, _RESERVE), instance=request.url.path,
                extra={"rental_id": rental_id, "committed": False}),
                "reservation_not_stored", outcome, {**fields, "reservation": "unconfirmed"})
        answer = json_answer(201, stored, {**counters(outcome, _RESERVE), "replayed": False})
        return Answer(answer, None, outcome, {**fields, "reservation": "committed"})

    # operations --------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        """``GET /healthz``: the store answers, and what the coordinator has refused."""
        try:
            await self.store.ping()
        except sqlite3.Error as exc:
            return JSONResponse({"status": "degraded", "store": type(exc).__name__}, 503)
        body: dict[str, Any] = {"status": "ok", "store": "ok"}
        stats = getattr(self.coordinator, "stats", None)
        if callable(stats):
            snapshot = stats()
            body["breaker"] = {"opened": snapshot.breaker_opened, "refused": snapshot.refused}
        return JSONResponse(body)

    async def metrics_page(self, request: Request) -> Response:
        """``GET /metrics``: the Prometheus exposition of this app's registry."""
        return Response(self.metrics.render(), media_type=CONTENT_TYPE)

    def endpoint(self, route: str,
                 handler: Callable[[Request], Awaitable[Answer]]) -> Callable[[Request], Awaitable[Response]]:
        """Wrap a handler: time it, count it and log one structured line for it."""

        async def run(request: Request) -> Response:
            arrived = request.scope.get(ARRIVED)
            started = arrived if isinstance(arrived, float) else self.clock.monotonic()
            answer = await handler(request)
            elapsed = self.clock.monotonic() - started
            self.metrics.observe(route, answer, elapsed)
            status = answer.response.status_code
            if elapsed > self.config.deadline:
                self._late(request, route, answer, started, elapsed)
            if log.isEnabledFor(logging.INFO):
                counted = answer.response.headers  # the counters exactly as the caller saw them
                log.info("%s %s %d", request.method, route, status, extra={
                    "event": "answer", "route": route, "status": status, "code": answer.code,
                    "outcome": counted["x-retrybudget-outcome"],
                    "attempts": int(counted["x-retrybudget-attempts"]),
                    "waits": int(counted["x-retrybudget-waits"]),
                    "operation_id": counted.get("x-retrybudget-operation-id"),
                    "elapsed_s": round(elapsed, 6), **answer.fields})
            return answer.response

        return run

    def _late(self, request: Request, route: str, answer: Answer, started: float,
              elapsed: float) -> None:
        """Log an answer decided after its deadline, with where its time went: the wait for
        the door, the provider operation and what came after it (the store, the answer),
        and the loop's lag the door saw against the lag now."""
        verdict = request.scope.get(_VERDICT)
        ended = request.scope.get(_OPERATION_ENDED)
        fields: dict[str, Any] = {"event": "late_answer", "route": route,
                                  "status": answer.response.status_code, "code": answer.code,
                                  "elapsed_s": round(elapsed, 6),
                                  "lag_now_s": round(self.lag.current(), 6)}
        if verdict is not None:
            fields["door_s"] = round(verdict.waited, 6)
            fields["verdict"] = (f"admitted {verdict.budget:.2f} s"
                                 if isinstance(verdict, Admitted) else f"shed {verdict.reason}")
        if isinstance(verdict, Admitted) and isinstance(ended, float):
            fields["operation_s"] = round(ended - started - verdict.waited, 6)
            fields["after_operation_s"] = round(started + elapsed - ended, 6)
        if answer.outcome is not None:
            fields["attempts_s"] = [(round(a.started, 3), round(a.elapsed, 3), a.timeout,
                                     a.status or a.error) for a in answer.outcome.history]
        log.warning("%s %s answered %.3f s after arrival", request.method, route, elapsed,
                    extra=fields)


class _Edge(SendFilter):
    """The app's outermost layer: stamps when a request arrived (unless the server did, see
    :data:`ARRIVED`) and marks every answer ``Cache-Control: no-store``: its own 404s and
    405s, the health and metrics pages and the problems alike (availability is only ever
    live)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and ARRIVED not in scope:
            scope[ARRIVED] = self.clock.monotonic()
        await super().__call__(scope, receive, send)

    async def send(self, scope: Scope, send: Send, message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [(name, value) for name, value in message.get("headers", [])
                       if name.lower() != b"cache-control"]
            message = {**message, "headers": [*headers, (b"cache-control", b"no-store")]}
        await send(message)


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.error("unhandled error: %s", type(exc).__name__, extra={"event": "internal_error"})
    return problem(500, "internal_error", "the gateway failed; nothing was committed",
                   counters(None, "logical_operations"), instance=request.url.path)


def create_app(
    config: GatewayConfig,
    *,
    clock: Clock = SYSTEM_CLOCK,
    transport: httpx.AsyncBaseTransport | None = None,
    coordinator: Coordinator | None = None,
) -> Starlette:
    """Build the gateway app.

    The store's schema is created at once; the provider client, the store's threads and the
    audit file are closed when the app's lifespan ends. ``app.state.gateway`` is the
    :class:`Gateway` (its ``store``, ``metrics`` and ``coordinator``).

    Args:
        config: provider, database and budget.
        clock: the source of every time reading and wait (inject a fake one in tests).
        transport: the httpx transport that sends each provider attempt (default: pooled
            HTTP); the gateway wraps it in :class:`~retrybudget.integrations.httpx.AsyncRetryTransport`.
        coordinator: breaker, rate-limit gate and retry budget (default: an in-memory one
            with the config's breaker settings).
    """
    gateway = Gateway(config, clock=clock, transport=transport, coordinator=coordinator)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sampler = asyncio.get_running_loop().create_task(gateway.lag.run())
        try:
            yield
        finally:
            sampler.cancel()
            await gateway.close()

    routes = [
        Route("/rentals/{rental_id}/availability",
              gateway.endpoint("availability", gateway.availability), methods=["GET"]),
        Route("/rentals/{rental_id}/reservations",
              gateway.endpoint("reservations", gateway.reserve), methods=["POST"]),
        Route("/metrics", gateway.metrics_page, methods=["GET"]),
        Route("/healthz", gateway.health, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(_Edge, clock=clock)],
                    exception_handlers={Exception: _internal_error})
    app.state.gateway = gateway
    return app
