"""The gateway's side toward the provider: the retrier its configuration makes (the breaker,
the policy, the metrics and audit hooks), the client that runs each request as one operation
with its request's budget, and that operation judged: what its final answer confirmed, or why
it confirmed nothing.
"""

from __future__ import annotations

import functools
import logging
import re
import ssl
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

import httpx
from starlette.requests import Request

from .._clock import Clock
from .._drivers import Retrier
from ..coordination import BreakerConfig, CoordinationConfig, Coordinator, MemoryCoordinator
from ..core.outcome import Outcome, Reason
from ..integrations import JOB_ID, VALIDATOR, asend_with_outcome
from ..integrations.httpx import AsyncRetryTransport
from ..observe import AuditHook, JsonlAuditSink
from ._config import GatewayConfig
from ._door import STEP
from ._logging import LOGGER_NAME

__all__ = ["BackgroundSink", "Result", "audit_sink", "call", "default_coordinator",
           "provider_client", "provider_retrier"]

log = logging.getLogger(LOGGER_NAME)

T = TypeVar("T")

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_BUDGET = "retrybudget.gateway.budget_steps"
"""The request extension naming the operation's budget, in whole ``STEP`` units."""


class BackgroundSink:
    """Writes audit records on one worker thread, in order, so the event loop never waits on
    the file."""

    def __init__(self, sink: JsonlAuditSink) -> None:
        self.sink = sink
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gateway-audit")

    def write(self, record: Mapping[str, Any]) -> None:
        """Queue one record."""
        self._pool.submit(self._write, dict(record))

    def _write(self, record: dict[str, Any]) -> None:
        try:
            self.sink.write(record)
        except Exception as exc:  # an audit failure never changes an answer
            log.error("audit record not written: %s", type(exc).__name__,  # noqa: TRY400
                      extra={"event": "audit_error"})

    def close(self) -> None:
        """Write what is queued, then close the file."""
        self._pool.shutdown(wait=True)
        self.sink.close()


def default_coordinator(config: GatewayConfig, clock: Clock) -> Coordinator:
    """A :class:`MemoryCoordinator` with the config's breaker."""
    breaker = BreakerConfig(consecutive_failures=config.breaker_failures,
                            failure_ratio=config.breaker_failure_ratio,
                            window=config.breaker_window,
                            min_operations=config.breaker_min_operations,
                            cool_down=config.breaker_cool_down,
                            probe_ttl=config.deadline * 2)
    return MemoryCoordinator(CoordinationConfig(breaker=breaker), clock=clock)


def audit_sink(config: GatewayConfig) -> BackgroundSink | None:
    """The config's audit file, written off the event loop (None: no audit file)."""
    if config.audit_path is None:
        return None
    secrets = tuple(config.provider_headers.values())
    return BackgroundSink(JsonlAuditSink(config.audit_path, secrets=secrets))


def provider_retrier(config: GatewayConfig, clock: Clock, coordinator: Coordinator,
                     metrics_hook: object, audit: BackgroundSink | None) -> Retrier:
    """The retrier of every provider operation: the config's policy, the coordinator, the
    metrics hook and, with an audit file, the audit hook."""
    policy = config.policy()
    hooks: list[object] = [metrics_hook]
    if audit is not None:
        hooks.append(AuditHook(audit, policy=policy, clock=clock))
    return Retrier(policy=policy, clock=clock, coordinator=coordinator, hooks=tuple(hooks))


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context per process (building one loads the CA bundle)."""
    return httpx.create_ssl_context()


def provider_client(config: GatewayConfig, retrier: Retrier,
                    transport: httpx.AsyncBaseTransport | None) -> httpx.AsyncClient:
    """The client that sends each request as one operation of ``retrier``, within the budget
    its request names (:func:`call`), over ``transport`` (default: pooled HTTP, verified TLS).
    It never follows a redirect and reads no proxy from the environment."""
    limits = httpx.Limits(max_connections=config.max_connections,
                          max_keepalive_connections=config.max_connections)
    inner = transport if transport is not None else httpx.AsyncHTTPTransport(
        verify=_tls_context(), limits=limits)
    return httpx.AsyncClient(
        transport=_ByBudget(inner, retrier),
        headers=dict(config.provider_headers),
        timeout=config.deadline,
        follow_redirects=False,
        trust_env=False,
    )


class _ByBudget(httpx.AsyncBaseTransport):
    """Sends each request through the retry transport of its budget.

    The policy's deadline is per retrier; the door gives each operation what its request has
    left, in whole ``STEP`` units (the ``_BUDGET`` extension), so there is one retry transport
    per budget, made on first use (at most deadline / STEP of them), all sharing the inner
    transport, the coordinator and the hooks.
    """

    def __init__(self, inner: httpx.AsyncBaseTransport, retrier: Retrier) -> None:
        self._inner = inner
        self._retrier = retrier
        self._by_steps: dict[int, AsyncRetryTransport] = {}

    def _transport(self, steps: int) -> AsyncRetryTransport:
        transport = self._by_steps.get(steps)
        if transport is None:
            policy = self._retrier.policy.replace(deadline=steps * STEP)
            transport = AsyncRetryTransport(self._inner, redirects_ok=False,
                                            retrier=self._retrier.with_options(policy=policy))
            self._by_steps[steps] = transport
        return transport

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Run ``request`` as one operation with the budget its ``_BUDGET`` extension names."""
        return await self._transport(request.extensions[_BUDGET]).handle_async_request(request)

    async def aclose(self) -> None:
        """Close the inner transport (once)."""
        await self._inner.aclose()


@dataclass(frozen=True, slots=True)
class Result(Generic[T]):
    """A provider operation as the gateway judges it.

    Attributes:
        outcome: the library's outcome (its counters are the operation's counters).
        value: what the final answer confirmed, read and validated; None when nothing was.
        reason: the outcome reason the gateway answers for (``ok`` exactly when ``value``).
        detail: a short explanation.
    """

    outcome: Outcome[Any]
    value: T | None
    reason: Reason
    detail: str


async def call(client: httpx.AsyncClient, request: Request, method: str, url: str,
               reader: Callable[[Any], T], steps: int, *,
               headers: Mapping[str, str] | None = None,
               body: Mapping[str, Any] | None = None) -> Result[T]:
    """One logical provider operation of ``steps`` budget units for ``request``, sent with
    ``client`` (:func:`provider_client`), judged: what its final answer confirmed, or why it
    confirmed nothing. Provider failures never raise: they are results.

    ``reader`` is the request's validator: the integration reads the 2xx payload with it,
    once, and the value it read (the outcome's ``payload``) is the result's. Every ending
    of the operation (a response, a typed error, an error raised again as it was) carries
    its outcome; an exception that carries none is not a provider failure and is raised.
    """
    request_id = request.headers.get("x-request-id", "")
    extensions: dict[str, Any] = {VALIDATOR: reader, _BUDGET: steps}
    if _REQUEST_ID.match(request_id):
        extensions[JOB_ID] = request_id
    outgoing = client.build_request(method, url, headers=headers, json=body,
                                    extensions=extensions)
    outcome, response = await asend_with_outcome(lambda: client.send(outgoing, stream=True))
    try:
        return await _judge(outcome, response, reader)
    finally:
        if response is not None:
            await response.aclose()


async def _judge(outcome: Outcome[Any], response: httpx.Response | None,
                 reader: Callable[[Any], T]) -> Result[T]:
    """Judge the final answer of an operation; only a validated 2xx confirms anything.

    The transport ends a 3xx as ``unexpected`` (``redirects_ok=False``: redirects are not
    followed) and validated the final 2xx with ``reader``: the value it read is the
    outcome's ``payload``. A 2xx it had no payload to validate in (a 204 or 205) is read
    here, once, and confirms nothing: it is ``invalid_payload``.
    """
    if not outcome.ok or response is None:
        return Result(outcome, None, outcome.reason, outcome.detail or outcome.reason.value)
    value = cast("T | None", outcome.payload)
    try:
        if value is None:
            await response.aread()
            value = reader(response)
    except (ValueError, httpx.HTTPError) as exc:
        return Result(outcome, None, Reason.INVALID_PAYLOAD,
                      f"the provider's payload failed validation ({type(exc).__name__})")
    return Result(outcome, value, Reason.OK, outcome.detail)
