"""Serving the sandbox with uvicorn: a background-thread server and the reset protocol."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import socket
import struct
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from retrybudget._clock import SYSTEM_CLOCK, Clock
from retrybudget.sandbox._app import RESET_EXTENSION, create_app
from retrybudget.sandbox._config import SandboxConfig

__all__ = [
    "SandboxH11Protocol",
    "SandboxServer",
    "bind_loopback",
    "serve_in_thread",
    "uvicorn_config",
]

_REAL_CLOCK: Clock = SYSTEM_CLOCK  # server start-up and shut-down always wait in real time
_DRAIN_LIMIT = 64
_STOP_TIMEOUT_S = 10.0
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: no proxies


class SandboxH11Protocol(H11Protocol):
    """uvicorn's h11 protocol plus the :data:`RESET_EXTENSION` ASGI extension.

    When the app sends ``{"type": RESET_EXTENSION}`` the connection is aborted with
    ``SO_LINGER`` set to zero, so the peer gets a TCP reset and no HTTP response
    (httpx: ``ReadError`` or ``RemoteProtocolError``; requests: ``ConnectionError``).
    Pass it to uvicorn as ``http=SandboxH11Protocol``.
    """

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        inner: ASGIApp = self.app

        async def app_with_reset(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await inner(scope, receive, send)
                return
            extensions = dict(scope.get("extensions") or {})
            extensions[RESET_EXTENSION] = {}
            scope = {**scope, "extensions": extensions}

            async def send_or_reset(message: Message) -> None:
                if message["type"] != RESET_EXTENSION:
                    await send(message)
                    return
                self._reset_transport()
                # Wait (boundedly) until uvicorn has seen the connection go, so it
                # neither answers nor reports an app that returned without a response.
                for _ in range(_DRAIN_LIMIT):
                    if (await receive())["type"] == "http.disconnect":
                        break

            await inner(scope, receive, send_or_reset)

        self.app = app_with_reset

    def shutdown(self) -> None:
        """On server shutdown, reset connections whose request is still in progress.

        uvicorn would otherwise wait for them (a scripted delay can be long) and
        then cancel them; a stopping sandbox cuts them off at once instead.
        """
        if self.cycle is not None and not self.cycle.response_complete:
            self._reset_transport()
        else:
            super().shutdown()

    def _reset_transport(self) -> None:
        transport = self.transport
        if transport.is_closing():
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # Linger 0: closing sends a TCP reset instead of an orderly FIN.
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()


def bind_loopback(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """Bind a listening-ready TCP socket on a loopback address (port 0: any free port).

    Raises:
        ValueError: ``host`` is not a loopback address (or ``localhost``).
    """
    name = "127.0.0.1" if host == "localhost" else host
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        raise ValueError(f"the sandbox binds loopback addresses only, not {host!r}") from None
    if not address.is_loopback:
        raise ValueError(f"the sandbox binds loopback addresses only, not {host!r}")
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on accepted sockets whose
    # proto says TCP; without it every keep-alive response waits ~40 ms (Nagle plus
    # delayed ACKs). The listener's TCP_NODELAY is also inherited where supported.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((name, port))
    except OSError:
        sock.close()
        raise
    return sock


def uvicorn_config(app: ASGIApp, *, log_level: str = "warning", quiet: bool = False) -> Config:
    """The uvicorn configuration the sandbox runs with (h11 with the reset extension).

    Args:
        app: the ASGI app to serve.
        log_level: uvicorn's log level.
        quiet: leave global logging alone (no uvicorn logging set-up, no access log).
    """
    extra: dict[str, Any] = {"log_config": None, "access_log": False} if quiet else {}
    return Config(
        app,
        http=SandboxH11Protocol,
        lifespan="off",
        date_header=False,  # the app sends Date from its own clock
        server_header=False,
        log_level=log_level,
        timeout_graceful_shutdown=2,
        **extra,
    )


def _base_url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


class SandboxServer:
    """A sandbox app served by uvicorn in a background thread, bound to loopback.

    Use it as a context manager (``with`` or ``async with``): entering starts the
    server and waits until ``/_health`` answers; leaving always stops it. The helpers
    talk to the server over real HTTP with the standard library. :func:`serve_in_thread`
    builds one from a configuration.

    Args:
        app: the sandbox app (see :func:`~retrybudget.sandbox.create_app`).
        config: the configuration it was built from.
        host: a loopback address.
        port: the port, 0 for any free one.
        startup_timeout_s: how long to wait for ``/_health`` before giving up (start-up
            waits use the real clock).
    """

    def __init__(self, app: ASGIApp, config: SandboxConfig, *, host: str = "127.0.0.1",
                 port: int = 0, startup_timeout_s: float = 10.0) -> None:
        self.config = config
        self.app = app
        self._host = host
        self._port = port
        self._startup_timeout_s = startup_timeout_s
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.base_url = ""

    # lifecycle -------------------------------------------------------------

    def start(self) -> None:
        """Start serving and wait until ``/_health`` answers.

        Raises:
            RuntimeError: the server did not come up within ``startup_timeout_s``.
            ValueError: the host is not a loopback address.
        """
        if self._thread is not None:
            raise RuntimeError("the sandbox server is already started")
        sock = bind_loopback(self._host, self._port)
        self.base_url = _base_url(sock)
        server = uvicorn.Server(uvicorn_config(self.app, quiet=True))
        self._server = server

        def run() -> None:
            try:
                server.run(sockets=[sock])
            except BaseException as exc:  # reported by start()
                self._error = exc
            finally:
                sock.close()

        self._thread = threading.Thread(target=run, name="retrybudget-sandbox", daemon=True)
        self._thread.start()
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise

    def _wait_healthy(self) -> None:
        assert self._thread is not None  # noqa: S101  # start() sets it first
        deadline = _REAL_CLOCK.monotonic() + self._startup_timeout_s
        last: Exception | None = None
        while _REAL_CLOCK.monotonic() < deadline:
            if not self._thread.is_alive():
                raise RuntimeError(
                    f"the sandbox server stopped during start-up: {self._error!r}"
                ) from self._error
            if self._server is not None and self._server.started:
                try:
                    with _OPENER.open(self.url("/_health"), timeout=1.0) as answer:
                        if answer.status == 200:
                            return
                except (urllib.error.URLError, OSError) as exc:
                    last = exc
            _REAL_CLOCK.sleep(0.01)
        raise RuntimeError(
            f"the sandbox server at {self.base_url} did not answer /_health "
            f"within {self._startup_timeout_s:g} s (last error: {last!r})"
        )

    def stop(self) -> None:
        """Stop the server and join its thread (bounded; safe to call twice)."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.should_exit = True
        thread.join(_STOP_TIMEOUT_S)
        if thread.is_alive():
            server.force_exit = True
            thread.join(_STOP_TIMEOUT_S)
        self._server = None
        self._thread = None

    def __enter__(self) -> SandboxServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> SandboxServer:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)

    # helpers ---------------------------------------------------------------

    def url(self, path: str) -> str:
        """The absolute URL of ``path`` on this server."""
        if not self.base_url:
            raise RuntimeError("the sandbox server is not started")
        return self.base_url + (path if path.startswith("/") else "/" + path)

    def _call(self, method: str, path: str, body: object = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(  # noqa: S310  # our own loopback URL
            self.url(path),
            data=data,
            method=method,
            headers={"Content-Type": "application/json"} if data is not None else {},
        )
        try:
            with _OPENER.open(request, timeout=10.0) as answer:
                result: dict[str, Any] = json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            raise ValueError(f"{method} {path}: HTTP {exc.code}: {detail}") from None
        return result

    def load_fixture(self, run_id: str, fixture_id: str, script: Sequence[Mapping[str, Any]]) -> str:
        """Install a script for ``run_id``/``fixture_id`` and return the URL that serves it.

        Raises:
            ValueError: the sandbox refused the script (the message says why).
        """
        run, fixture = (urllib.parse.quote(part, safe="") for part in (run_id, fixture_id))
        self._call("PUT", f"/_fixtures/{run}/{fixture}", {"script": list(script)})
        return self.url(f"/fx/{run}/{fixture}")

    def stats(self, run_id: str = "default") -> dict[str, Any]:
        """What ``GET /_stats/{run_id}`` reports: the run's requests and aggregates."""
        return self._call("GET", f"/_stats/{urllib.parse.quote(run_id, safe='')}")

    def __repr__(self) -> str:
        return f"SandboxServer(base_url={self.base_url!r})"


def serve_in_thread(
    config: SandboxConfig | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    clock: Clock = SYSTEM_CLOCK,
    fixtures: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    startup_timeout_s: float = 10.0,
) -> SandboxServer:
    """A sandbox server to run in a background thread, used as a context manager.

    ``with serve_in_thread(config) as sandbox:`` (or ``async with``) starts uvicorn on
    a free loopback port, waits for ``/_health`` (at most ``startup_timeout_s``), and
    yields the :class:`SandboxServer` (``base_url``, ``url()``, ``load_fixture()``,
    ``stats()``); the server is stopped on exit, even after an error.

    Args:
        config: the sandbox configuration.
        host: a loopback address.
        port: the port, 0 for any free one.
        clock: the clock the app reads.
        fixtures: scripts preloaded under run ``"default"``.
        startup_timeout_s: the bounded wait for ``/_health``.
    """
    config = config if config is not None else SandboxConfig()
    app = create_app(config, clock=clock, fixtures=fixtures)
    return SandboxServer(app, config, host=host, port=port, startup_timeout_s=startup_timeout_s)
