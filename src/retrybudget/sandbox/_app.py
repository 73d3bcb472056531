"""The sandbox provider as an ASGI app (Starlette).

Routes:

- ``GET /rentals``, ``GET /rentals/{id}/availability``, ``POST /rentals/{id}/reservations``:
  synthetic records behind the configured rate limits and faults. The run is named
  by the ``X-Sandbox-Run`` request header (default ``"default"``).
- ``GET|POST /api/{method}``: a Slack Web API method behind the same limits (in the
  ``slack`` style each method has a quota of its own, as Slack's tiers do).
- ``POST /admin/api/{version}/graphql.json``: a Shopify GraphQL query, one point each; in
  the ``shopify`` style a query over the quota is ``THROTTLED`` in a 200 body.
- ``PUT /_fixtures/{run_id}/{fixture_id}``: install a script; then any method on
  ``/fx/{run_id}/{fixture_id}`` (or a subpath) answers with the script's next step,
  and with the last step again once the script is used up.
- ``POST /v1/chat/completions`` and ``POST /v1/messages``: an LLM provider answering as
  OpenAI and Anthropic do, behind request and token quotas (:mod:`._llm`).
- ``GET /_stats/{run_id}``: every request seen for the run, with aggregates.
- ``GET /_llm/{run_id}``: the LLM quotas and what each of the run's windows was charged.
- ``GET /_health``: 200 when the app is up.

Paths under ``/_`` are the sandbox's own controls: they are never rate limited,
faulted or recorded.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from email.utils import formatdate
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from retrybudget._asgi import SendFilter
from retrybudget._clock import SYSTEM_CLOCK, Clock
from retrybudget._fixtures import FixtureError, Step, parse_script, resolve_placeholders
from retrybudget.core.profiles import SLACK
from retrybudget.sandbox._config import RateLimit, SandboxConfig
from retrybudget.sandbox._faults import MALFORMED_BODY
from retrybudget.sandbox._limits import (
    Rejection,
    graphql_cost,
    primary_headers,
    primary_rejection,
    secondary_rejection,
)
from retrybudget.sandbox._llm import LlmProvider
from retrybudget.sandbox._state import SandboxState

__all__ = [
    "DEFAULT_RUN",
    "IDEMPOTENCY_HEADER",
    "RESET_EXTENSION",
    "RUN_HEADER",
    "create_app",
    "is_available",
]

RUN_HEADER = "X-Sandbox-Run"
"""The request header naming the run for the record routes."""

DEFAULT_RUN = "default"
"""The run id used when a request names none."""

IDEMPOTENCY_HEADER = "Idempotency-Key"
"""The request header that makes a reservation replayable."""

RESET_EXTENSION = "retrybudget.sandbox.reset"
"""ASGI extension for closing a connection without a response.

A server that supports it lists the name in ``scope["extensions"]`` and, when the app
sends a message ``{"type": RESET_EXTENSION}`` before ``http.response.start``, resets
the connection (the client sees it closed with no response) and returns once the
connection is gone. :class:`~retrybudget.sandbox.SandboxH11Protocol` implements it.
"""

_ID = re.compile(r"^[A-Za-z0-9._~-]{1,128}$")
_MAX_LIST = 1000
_JSON = "application/json"


_SLOW_BODY = "retrybudget.sandbox.slow_body"


class _ResetConnection(Exception):  # a control-flow signal, not an error
    """Raised by a handler to reset the connection instead of answering."""


def is_available(rental_id: int) -> bool:
    """The synthetic availability of a rental: every third rental is booked."""
    return rental_id % 3 != 0


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            text: str = value.decode("latin-1")
            return text
    return None


def _traffic_ids(scope: Scope) -> tuple[str, str | None] | None:
    """The run id and fixture id of a recorded request, or ``None`` if they are invalid."""
    path: str = scope["path"]
    if path.startswith("/fx/"):
        parts = path.split("/")
        run_id = parts[2] if len(parts) > 2 else ""
        fixture_id = parts[3] if len(parts) > 3 else ""
        if not (_ID.match(run_id) and _ID.match(fixture_id)):
            return None
        return run_id, fixture_id
    run_id = _header(scope, RUN_HEADER.lower().encode()) or DEFAULT_RUN
    if not _ID.match(run_id):
        return None
    return run_id, None


async def _reset_connection(scope: Scope, send: Send) -> None:
    if RESET_EXTENSION in (scope.get("extensions") or {}):
        await send({"type": RESET_EXTENSION})
        return
    # A server without the extension cannot drop the connection for us; fail loudly
    # rather than answer (an in-process transport re-raises this to its client).
    raise ConnectionResetError("sandbox: connection reset (the server lacks the reset extension)")


async def _pause(clock: Clock, seconds: float, receive: Receive) -> bool:
    """Wait ``seconds`` on ``clock``, ending early if the client disconnects.

    Consumes the request body while it waits (the handlers that pause never read
    it). Returns whether the full time passed; a disconnected client gets nothing
    more (the server drops whatever is sent), so callers just carry on.
    """

    async def disconnected() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    sleeper = asyncio.ensure_future(clock.async_sleep(seconds))
    watcher = asyncio.ensure_future(disconnected())
    try:
        await asyncio.wait({sleeper, watcher}, return_when=asyncio.FIRST_COMPLETED)
        slept = sleeper.done()
    finally:
        for task in (sleeper, watcher):
            task.cancel()
        await asyncio.gather(sleeper, watcher, return_exceptions=True)
    return slept


class _DateHeader(SendFilter):
    """Adds a ``Date`` header from the app's clock unless the response already has one.

    The server's own ``Date`` header is turned off, so placeholders, quota windows and
    ``Date`` all come from the same clock (a fake one included).
    """

    async def send(self, scope: Scope, send: Send, message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            if not any(name.lower() == b"date" for name, _ in headers):
                date = formatdate(self.clock.wall(), usegmt=True).encode("latin-1")
                headers.append((b"date", date))
                message = {**message, "headers": headers}
        await send(message)


class _SlowBody(SendFilter):
    """Sends the body of an answer drawn ``slow_body`` one byte at a time (the head at once)."""

    async def send(self, scope: Scope, send: Send, message: Message) -> None:
        seconds = scope.get("state", {}).get(_SLOW_BODY)
        body: bytes = message.get("body", b"")
        if message["type"] != "http.response.body" or not seconds or not body:
            await send(message)
            return
        more = message.get("more_body", False)
        for index in range(len(body)):
            await self.clock.async_sleep(seconds / len(body))
            await send({"type": "http.response.body", "body": body[index:index + 1],
                        "more_body": more or index < len(body) - 1})


class _Recorder:
    """Records every request outside ``/_`` for its run and carries out resets."""

    def __init__(self, app: ASGIApp, state: SandboxState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/_"):
            await self.app(scope, receive, send)
            return
        ids = _traffic_ids(scope)
        if ids is None:
            message = {"message": f"invalid run or fixture id (allowed: {_ID.pattern})"}
            await JSONResponse(message, status_code=400)(scope, receive, send)
            return
        run_id, fixture_id = ids
        record, _ = self.state.arrive(
            run_id,
            method=scope["method"],
            path=scope["path"],
            idempotency_key=_header(scope, IDEMPOTENCY_HEADER.lower().encode()),
            fixture_id=fixture_id,
        )

        async def send_recording(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.state.answered(record, int(message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, send_recording)
        except _ResetConnection:
            self.state.answered(record, None)
            await _reset_connection(scope, send)
        except Exception:
            if not record.done:
                self.state.answered(record, 500)
            raise
        finally:
            self.state.leave(run_id)


class _FixtureEndpoint:
    """Any method on ``/fx/{run_id}/{fixture_id}[/...]``: the script's next step."""

    def __init__(self, state: SandboxState) -> None:
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        params: dict[str, str] = scope["path_params"]
        run_id, fixture_id = params["run_id"], params["fixture_id"]
        step = self.state.next_step(run_id, fixture_id)
        if step is None:
            message = {"message": f"no fixture {fixture_id!r} loaded for run {run_id!r}"}
            await JSONResponse(message, status_code=404)(scope, receive, send)
            return
        if step.delay_s > 0:
            await _pause(self.state.clock, step.delay_s, receive)
        if step.reset:
            raise _ResetConnection
        await self._response(step)(scope, receive, send)

    def _response(self, step: Step) -> Response:
        now = self.state.clock.wall()
        headers = {name: resolve_placeholders(value, now) for name, value in step.headers}
        if step.has_body:
            return Response(step.text, step.status, headers, media_type=_JSON)
        if step.body_text is not None:
            html = step.body_text.lstrip().startswith("<")
            media_type = "text/html" if html else "text/plain"
            return Response(step.text, step.status, headers, media_type=media_type)
        return Response(step.text, step.status, headers)


def _bucket(limit: RateLimit | None, path: str) -> str:
    """The quota bucket a request spends: in the ``slack`` style its Web API method (the
    bucket the slack profile reads from the same path), else the run's one quota ("")."""
    if limit is None or limit.style != "slack":
        return ""
    match = re.search(SLACK.bucket_path, path)
    return "" if match is None else match.group(1)


class _Provider:
    """The record routes and the control routes."""

    def __init__(self, state: SandboxState) -> None:
        self.state = state
        self.config = state.config

    # the provider gate ---------------------------------------------------

    def _rejection(self, rejection: Rejection) -> Response:
        return JSONResponse(rejection.body, rejection.status, rejection.headers)

    async def _gate(self, request: Request, run_id: str) -> tuple[Response | None, dict[str, str]]:
        """Outage, secondary limit, primary limit and faults, in that order.

        Returns an answer that replaces the handler's (or ``None``) and the quota
        headers to add to the handler's answer.
        """
        if self.state.in_outage():
            return JSONResponse({"message": "Service unavailable (outage)"}, 503), {}
        limit = self.config.active_rate_limit
        max_concurrent = self.config.max_concurrent
        if max_concurrent is not None and self.state.in_flight(run_id) > max_concurrent:
            reading = self.state.peek(run_id)
            primary = primary_headers(limit, reading) if limit and reading else None
            rejection = secondary_rejection(
                self.config.secondary_status, self.config.secondary_retry_after_s, primary
            )
            return self._rejection(rejection), {}
        headers: dict[str, str] = {}
        reading = self.state.consume(run_id, _bucket(limit, request.url.path))
        if limit is not None and reading is not None:
            if not reading.admitted:
                graphql = request.url.path.endswith("/graphql.json")
                return self._rejection(primary_rejection(limit, reading, graphql)), {}
            headers = primary_headers(limit, reading)
        faults = self.config.faults
        if not faults.any:
            return None, headers
        draw = self.state.draw_fault(run_id)
        if draw.latency_s > 0:
            await _pause(self.state.clock, draw.latency_s, request.receive)
        if draw.kind == "reset":
            raise _ResetConnection
        if draw.kind == "error":
            body = {"message": f"Injected fault: HTTP {draw.status}"}
            return JSONResponse(body, draw.status, headers), {}
        if draw.kind == "malformed":
            return Response(MALFORMED_BODY, 200, headers, media_type="text/html"), {}
        if draw.kind == "slow_body":
            request.scope.setdefault("state", {})[_SLOW_BODY] = self.config.faults.slow_body_s
        return None, headers

    def _rental_id(self, request: Request) -> int | None:
        raw: str = request.path_params["rental_id"]
        if not raw.isascii() or not raw.isdigit():
            return None
        rental_id = int(raw)
        return rental_id if 1 <= rental_id <= self.config.rentals else None

    @staticmethod
    def _run_id(request: Request) -> str:
        return request.headers.get(RUN_HEADER) or DEFAULT_RUN

    def _not_found(self, request: Request, headers: dict[str, str]) -> Response:
        raw = request.path_params.get("rental_id")
        return JSONResponse({"message": f"rental {raw!r} not found"}, 404, headers)

    # record routes -------------------------------------------------------

    async def list_rentals(self, request: Request) -> Response:
        """``GET /rentals?offset=&limit=``: a page of rentals with their availability."""
        answer, headers = await self._gate(request, self._run_id(request))
        if answer is not None:
            return answer
        try:
            offset = max(0, int(request.query_params.get("offset", "0")))
            size = min(_MAX_LIST, max(0, int(request.query_params.get("limit", "100"))))
        except ValueError:
            return JSONResponse({"message": "offset and limit must be integers"}, 400, headers)
        first = offset + 1
        last = min(self.config.rentals, offset + size)
        rentals = [{"rental_id": i, "available": is_available(i)} for i in range(first, last + 1)]
        body = {"rentals": rentals, "total": self.config.rentals, "offset": offset}
        return JSONResponse(body, 200, headers)

    async def availability(self, request: Request) -> Response:
        """``GET /rentals/{id}/availability``: whether the rental is free (404 if unknown)."""
        answer, headers = await self._gate(request, self._run_id(request))
        if answer is not None:
            return answer
        rental_id = self._rental_id(request)
        if rental_id is None:
            return self._not_found(request, headers)
        body = {
            "rental_id": rental_id,
            "available": is_available(rental_id),
            "checked_at": int(self.state.clock.wall()),
        }
        return JSONResponse(body, 200, headers)

    async def slack_method(self, request: Request) -> Response:
        """``GET|POST /api/{method}``: a Slack Web API method, each with its own quota in the
        ``slack`` style (Slack's tiers apply per method)."""
        answer, headers = await self._gate(request, self._run_id(request))
        if answer is not None:
            return answer
        return JSONResponse({"ok": True, "method": request.path_params["method"]}, 200, headers)

    async def shopify_graphql(self, request: Request) -> Response:
        """``POST /admin/api/{version}/graphql.json``: a Shopify Admin GraphQL query costing one
        point of the window's quota; in the ``shopify`` style a query over it is ``THROTTLED``
        in a 200 body, and every answer carries its ``extensions.cost``."""
        run_id = self._run_id(request)
        answer, headers = await self._gate(request, run_id)
        if answer is not None:
            return answer
        body: dict[str, Any] = {"data": {"shop": {"name": "sandbox"}}}
        reading = self.state.peek(run_id)
        if reading is not None:
            body["extensions"] = graphql_cost(reading)
        return JSONResponse(body, 200, headers)

    async def reserve(self, request: Request) -> Response:
        """``POST /rentals/{id}/reservations``: 201, replayed for a repeated Idempotency-Key."""
        run_id = self._run_id(request)
        answer, headers = await self._gate(request, run_id)
        if answer is not None:
            return answer
        rental_id = self._rental_id(request)
        if rental_id is None:
            return self._not_found(request, headers)
        key = request.headers.get(IDEMPOTENCY_HEADER)
        stored, replayed = self.state.reserve(run_id, rental_id, key)
        if replayed:
            headers["Idempotent-Replayed"] = "true"
        return JSONResponse(stored.body, stored.status, headers)

    # control routes --------------------------------------------------------

    async def health(self, request: Request) -> Response:
        """``GET /_health``: 200 while the app is up."""
        return JSONResponse({"status": "ok"})

    async def stats(self, request: Request) -> Response:
        """``GET /_stats/{run_id}``: the run's requests and aggregates."""
        run_id: str = request.path_params["run_id"]
        return JSONResponse(self.state.stats(run_id))

    async def put_fixture(self, request: Request) -> Response:
        """``PUT /_fixtures/{run_id}/{fixture_id}`` with ``{"script": [...]}``: install a script."""
        run_id: str = request.path_params["run_id"]
        fixture_id: str = request.path_params["fixture_id"]
        if not (_ID.match(run_id) and _ID.match(fixture_id)):
            return JSONResponse({"message": f"ids must match {_ID.pattern}"}, 400)
        try:
            document = json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return JSONResponse({"message": "the body must be JSON"}, 400)
        if not isinstance(document, dict) or "script" not in document:
            return JSONResponse({"message": 'the body must be {"script": [...]}'}, 400)
        try:
            steps = parse_script(document["script"])
        except FixtureError as exc:
            return JSONResponse({"message": str(exc)}, 400)
        self.state.load_fixture(run_id, fixture_id, steps)
        body = {
            "run_id": run_id,
            "fixture_id": fixture_id,
            "steps": len(steps),
            "path": f"/fx/{run_id}/{fixture_id}",
        }
        return JSONResponse(body, 201)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)  # noqa: S101  # registered for HTTPException only
    return JSONResponse({"message": exc.detail}, exc.status_code, exc.headers)


def create_app(
    config: SandboxConfig | None = None,
    *,
    clock: Clock = SYSTEM_CLOCK,
    fixtures: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> Starlette:
    """Build the sandbox provider app.

    Args:
        config: rate limits, faults and record count; the defaults if omitted.
        clock: the source of every time reading and sleep (wall time for placeholders,
            windows and ``checked_at``; monotonic time for outages; ``async_sleep`` for
            delays and latency).
        fixtures: scripts preloaded under run ``"default"``, keyed by fixture id.

    Raises:
        FixtureError: a preloaded script or fixture id is invalid.
    """
    config = config if config is not None else SandboxConfig()
    state = SandboxState(config, clock)
    for fixture_id, script in (fixtures or {}).items():
        if not _ID.match(fixture_id):
            raise FixtureError(f"fixture id {fixture_id!r} must match {_ID.pattern}")
        try:
            steps = parse_script(script)
        except FixtureError as exc:
            raise FixtureError(f"fixture {fixture_id!r}: {exc}") from None
        state.load_fixture(DEFAULT_RUN, fixture_id, steps)
    provider = _Provider(state)
    fixture_endpoint = _FixtureEndpoint(state)
    llm = LlmProvider(config.llm, clock, _Provider._run_id)
    routes = [
        Route("/_health", provider.health, methods=["GET"]),
        Route("/_stats/{run_id}", provider.stats, methods=["GET"]),
        Route("/_fixtures/{run_id}/{fixture_id}", provider.put_fixture, methods=["PUT"]),
        Route("/_llm/{run_id}", llm.report, methods=["GET"]),
        Route("/v1/chat/completions", llm.chat_completions, methods=["POST"]),
        Route("/v1/messages", llm.messages, methods=["POST"]),
        Route("/fx/{run_id}/{fixture_id}", fixture_endpoint),
        Route("/fx/{run_id}/{fixture_id}/{rest:path}", fixture_endpoint),
        Route("/rentals", provider.list_rentals, methods=["GET"]),
        Route("/api/{method}", provider.slack_method, methods=["GET", "POST"]),
        Route("/admin/api/{version}/graphql.json", provider.shopify_graphql, methods=["POST"]),
        Route("/rentals/{rental_id}/availability", provider.availability, methods=["GET"]),
        Route("/rentals/{rental_id}/reservations", provider.reserve, methods=["POST"]),
    ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(_DateHeader, clock=clock), Middleware(_Recorder, state=state),
                    Middleware(_SlowBody, clock=clock)],
        exception_handlers={HTTPException: _http_error},
    )
    app.state.sandbox = state
    return app
