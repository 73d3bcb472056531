"""Serving the gateway with uvicorn: socket binding, configuration, a background-thread server."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from types import TracebackType
from typing import Any

import httpx
import uvicorn
from starlette.responses import Response
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from .._clock import SYSTEM_CLOCK, Clock
from ..coordination import Coordinator
from ._answers import counters, problem
from ._app import ARRIVED, create_app
from ._config import GatewayConfig

__all__ = ["GatewayServer", "bind_socket", "serve_in_thread", "uvicorn_config"]

_REAL_CLOCK: Clock = SYSTEM_CLOCK  # start-up and shut-down always wait in real time
_STOP_TIMEOUT_S = 10.0


def bind_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening TCP socket for uvicorn (port 0: any free port), with ``TCP_NODELAY``.

    asyncio sets ``TCP_NODELAY`` only on accepted sockets made with ``IPPROTO_TCP``; this
    listener has it set instead, and accepted sockets inherit it (Linux, the BSDs). Without
    it each keep-alive answer waits for a delayed ACK (~40 ms on loopback).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family)
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _raw(response: Response, reason: str) -> bytes:
    """``response`` as the bytes of an HTTP/1.1 answer that closes its connection."""
    lines = [f"HTTP/1.1 {response.status_code} {reason}".encode("ascii")]
    lines += [name + b": " + value for name, value in response.raw_headers]
    lines.append(b"connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + response.body


_TOO_MANY = _raw(problem(503, "gateway_overloaded", "too many client connections are open; "
                         "try again in a moment", counters(None, "logical_requests"),
                         instance="/", headers={"Retry-After": "1"},
                         extra={"shed": "connections"}), "Service Unavailable")
"""The answer to a connection beyond ``max_clients``, sent before its request is read."""

_HEAD_TIMED_OUT = _raw(problem(408, "request_timeout", "the request head did not arrive in "
                               "time; the connection is closed", counters(None, "logical_requests"),
                               instance="/"), "Request Timeout")
"""The answer to a connection whose request head did not arrive within ``head_timeout``."""


class _Stamped(H11Protocol):
    """uvicorn's h11 protocol, stamping each request with the instant its bytes were read,
    with a timeout on incomplete request heads and a cap on open client connections.

    A request's deadline starts there: the time it then waits for the event loop to run its
    handler is paid out of its budget (the app stamps on entry when no server did).

    uvicorn times out idle keep-alive connections only after a response, and its
    ``limit_concurrency`` answers 503 only once a complete head arrived: a client that opens
    connections and trickles their heads (slowloris) holds them all. Here a connection waiting
    for a head (a new one, or a kept-alive one that started another) is answered 408 and
    closed after ``head_timeout`` seconds, and a connection beyond ``max_clients`` open at
    once is answered 503 ``gateway_overloaded`` and closed before anything is read.
    """

    clock: Clock = SYSTEM_CLOCK
    head_timeout: float | None = None
    max_clients: int | None = None
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Count the connection; one beyond the cap is answered 503 and closed at once."""
        super().connection_made(transport)
        if self.max_clients is not None and len(self.connections) > self.max_clients:
            self.transport.write(_TOO_MANY)
            self.transport.close()
            return
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection (and its head timer)."""
        self._head_received()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Read ``data``; a request it completes carries the instant in its scope."""
        arrived = self.clock.monotonic()
        before = getattr(self, "cycle", None)
        if before is None or before.response_complete:
            self._await_head()  # the bytes of a new request: its head has head_timeout
        super().data_received(data)
        cycle = getattr(self, "cycle", None)
        if cycle is not None and cycle is not before:
            cycle.scope.setdefault(ARRIVED, arrived)
            self._head_received()

    def _await_head(self) -> None:
        if self.head_timeout is not None and self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _head_received(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        cycle = getattr(self, "cycle", None)
        if cycle is not None and not cycle.response_complete:
            return  # a request is being served: its own deadline bounds it
        if not self.transport.is_closing():
            self.transport.write(_HEAD_TIMED_OUT)
            self.transport.close()


def _protocol(app: ASGIApp) -> type[H11Protocol]:
    """The gateway's protocol, on the clock and the server settings of ``app`` (a gateway
    app; another app gets the real clock and uvicorn's own behaviour)."""
    gateway = getattr(getattr(app, "state", None), "gateway", None)
    config: GatewayConfig | None = getattr(gateway, "config", None)
    settings: dict[str, Any] = {"clock": getattr(gateway, "clock", SYSTEM_CLOCK)}
    if config is not None:
        settings.update(head_timeout=config.head_timeout, max_clients=config.max_clients)
    return type("GatewayProtocol", (_Stamped,), settings)


def uvicorn_config(app: ASGIApp, *, log_level: str = "warning", quiet: bool = False) -> uvicorn.Config:
    """The uvicorn configuration the gateway runs with (lifespan on: it closes the store).

    It serves HTTP/1.1 with uvicorn's h11 protocol, which stamps each request with the
    instant its bytes were read (the start of its deadline), with the server settings of
    the app's :class:`GatewayConfig`: ``head_timeout`` and ``max_clients`` (see
    :class:`_Stamped`), ``keep_alive_timeout`` (uvicorn's ``timeout_keep_alive``) and
    ``max_head_size`` (uvicorn's ``h11_max_incomplete_event_size``: a longer head is
    answered 400).

    Args:
        app: the gateway app.
        log_level: uvicorn's log level.
        quiet: leave logging alone (no uvicorn logging set-up, no access log).
    """
    extra: dict[str, Any] = {"log_config": None} if quiet else {}
    gateway = getattr(getattr(app, "state", None), "gateway", None)
    config: GatewayConfig | None = getattr(gateway, "config", None)
    if config is not None:
        extra.update(timeout_keep_alive=config.keep_alive_timeout,
                     h11_max_incomplete_event_size=config.max_head_size)
    return uvicorn.Config(app, lifespan="on", log_level=log_level, access_log=False,
                          server_header=False, timeout_graceful_shutdown=5,
                          http=_protocol(app), **extra)


def _serve(server: uvicorn.Server, sock: socket.socket) -> None:
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()


class GatewayServer:
    """A gateway app served by uvicorn in a background thread.

    Use it as a context manager: entering starts the server and waits until uvicorn has
    started (the app's lifespan included); leaving always stops it.

    Args:
        app: the gateway app (see :func:`~retrybudget.gateway.create_app`).
        host: the address to bind.
        port: the port, 0 for any free one.
        startup_timeout_s: how long to wait for uvicorn to start.
    """

    def __init__(self, app: ASGIApp, *, host: str = "127.0.0.1", port: int = 0,
                 startup_timeout_s: float = 10.0) -> None:
        self.app = app
        self.address = (host, port)
        self.startup_timeout_s = startup_timeout_s
        self.base_url = ""
        self._running: tuple[uvicorn.Server, threading.Thread] | None = None

    def start(self) -> None:
        """Start serving and wait until uvicorn reports it started.

        Raises:
            RuntimeError: the server stopped, or did not start within the timeout (uvicorn
                logs why).
        """
        if self._running is not None:
            raise RuntimeError("the gateway server is already started")
        sock = bind_socket(*self.address)
        host, port = sock.getsockname()[:2]
        self.base_url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        server = uvicorn.Server(uvicorn_config(self.app, quiet=True))
        thread = threading.Thread(target=_serve, args=(server, sock), name="retrybudget-gateway",
                                  daemon=True)
        self._running = (server, thread)
        thread.start()
        deadline = _REAL_CLOCK.monotonic() + self.startup_timeout_s
        while not server.started:
            if not thread.is_alive() or _REAL_CLOCK.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the gateway server at {self.base_url} did not start")
            _REAL_CLOCK.sleep(0.005)

    def stop(self) -> None:
        """Stop the server and join its thread (bounded; safe to call twice)."""
        if self._running is None:
            return
        server, thread = self._running
        self._running = None
        for force in (False, True):
            server.should_exit = True
            server.force_exit = force
            thread.join(_STOP_TIMEOUT_S)
            if not thread.is_alive():
                return

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` on this server."""
        return self.base_url + (path if path.startswith("/") else "/" + path)

    def __enter__(self) -> GatewayServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"GatewayServer(base_url={self.base_url!r})"


def serve_in_thread(
    config: GatewayConfig,
    *,
    clock: Clock = SYSTEM_CLOCK,
    transport: httpx.AsyncBaseTransport | None = None,
    coordinator: Coordinator | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
) -> GatewayServer:
    """A gateway for ``config`` to run in a background thread: ``with serve_in_thread(cfg) as gw:``.

    Args:
        config: the gateway's configuration.
        clock: the app's clock.
        transport: the httpx transport for provider attempts (default: pooled HTTP).
        coordinator: breaker, gate and retry budget (default: in-memory, from ``config``).
        host: the address to bind.
        port: the port, 0 for any free one.
    """
    app = create_app(config, clock=clock, transport=transport, coordinator=coordinator)
    return GatewayServer(app, host=host, port=port)
