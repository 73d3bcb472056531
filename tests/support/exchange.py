"""Hostile providers on loopback: one trickles its status line and headers, or its body;
another never answers a connect (its accept queue is full, see :func:`full_accept_queue`).

The path names what each request gets: ``/{part}/{interval_ms}/{size}/{status}[/...]``, where
``part`` is ``head`` (every byte of the status line and headers ``interval_ms`` apart, then
the body at once), ``body`` (the head at once, then ``size`` body bytes one at a time) or
``close`` (as ``body``, but the body has no length: the connection's close ends it) or
``hang`` (nothing for ``interval_ms``, then the whole answer at once).
Anything after the fourth segment is ignored, so a client can put its own path behind it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from retrybudget.gateway import GatewayConfig, serve_in_thread

__all__ = ["SLACK", "TrickleServer", "full_accept_queue", "gateway_timed_out", "trickle_server"]

SLACK = 1.0
"""Seconds an operation may end after its deadline against a trickle (real clock, real sockets:
generous on purpose, a loaded CI machine schedules threads late; without the bound the same
operations take many seconds)."""


_PAYLOAD = b'{"rental_id":"1","available":true,"checked_at":1,"pad":"'


def _answer(path: str) -> tuple[bytes, bytes, float]:
    """The bytes sent at once and the bytes trickled, and the seconds between two of them."""
    parts = path.split("/")
    part, interval_ms, size, status = parts[1], int(parts[2]), int(parts[3]), int(parts[4])
    body = _PAYLOAD + b"x" * max(0, size - len(_PAYLOAD) - 2) + b'"}'
    length = "connection: close" if part == "close" else f"content-length: {len(body)}"
    head = (f"HTTP/1.1 {status} Trickle\r\ncontent-type: application/json\r\n"
            f"{length}\r\n\r\n").encode("ascii")
    return (b"", head + body, interval_ms / 1000.0) if part == "head" else (head, body,
                                                                             interval_ms / 1000.0)


class TrickleServer:
    """Serves trickled answers on 127.0.0.1, one thread per connection (keep-alive)."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.requests = 0

    def url(self, path: str) -> str:
        """A URL on the server."""
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> None:
        """Accept connections on a background thread."""
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        """Stop accepting, end every trickle and wait (bounded) for the threads."""
        self._stop.set()
        with contextlib.suppress(OSError):
            self._listener.close()
        for thread in self._threads:
            thread.join(timeout=5.0)

    def _accept(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10.0)
        with conn:
            pending = b""
            while not self._stop.is_set():
                while b"\r\n\r\n" not in pending:
                    try:
                        chunk = conn.recv(65536)
                    except OSError:
                        return
                    if not chunk:
                        return
                    pending += chunk
                request, _, pending = pending.partition(b"\r\n\r\n")
                self.requests += 1
                path = request.split(b" ", 2)[1].decode("ascii")
                fast, slow, interval = _answer(path)
                try:
                    if path.startswith("/hang/"):
                        if self._stop.wait(interval):
                            return
                        fast, slow = fast + slow, b""
                    conn.sendall(fast)
                    for index in range(len(slow)):
                        if self._stop.wait(interval):
                            return
                        conn.sendall(slow[index:index + 1])
                except OSError:  # the client gave up: the point of the test
                    return
                if path.startswith("/close/"):
                    return


@contextlib.contextmanager
def trickle_server() -> Iterator[TrickleServer]:
    """A started :class:`TrickleServer`, stopped on leaving."""
    server = TrickleServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def full_accept_queue() -> Iterator[str]:
    """The base URL of a listening socket that never accepts, its accept queue already full.

    Linux drops a SYN sent to a listener whose accept queue is full, so a connect to it gets
    no answer at all (no refusal, no timeout from the server): the client's connect hangs
    until its own timeout, resending the SYN. The queue is filled with held connections until
    a probe's connect hangs, which is checked, so the provider is known to be stuck.
    """
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    port: int = listener.getsockname()[1]
    held: list[socket.socket] = []
    try:
        for _ in range(64):
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            probe.settimeout(0.3)
            try:
                probe.connect(("127.0.0.1", port))
            except TimeoutError:  # the SYN got no answer: the queue is full
                probe.close()
                break
            held.append(probe)
        else:
            raise RuntimeError("the accept queue never filled: connects are answered")
        yield f"http://127.0.0.1:{port}"
    finally:
        for conn in held:
            conn.close()
        listener.close()


def elapsed_since(started: float) -> float:
    """Real seconds since ``started`` (``time.monotonic``)."""
    return time.monotonic() - started


def gateway_timed_out(provider: str, db_path: Path) -> dict[str, Any]:
    """The body of a lookup through a gateway in front of ``provider``, checked to be answered
    within the gateway's deadline plus :data:`SLACK` as a provider failure that ran out of
    time (``deadline``, or ``exhausted`` when every attempt timed out)."""
    config = GatewayConfig(provider=provider, db_path=db_path)
    with serve_in_thread(config) as gateway, httpx.Client(timeout=30.0) as client:
        started = time.monotonic()
        response = client.get(gateway.url("/rentals/1/availability"))
        elapsed = time.monotonic() - started
    assert elapsed <= config.deadline + SLACK, f"{elapsed:.2f} s"
    body: dict[str, Any] = response.json()
    assert response.status_code == 503, body
    assert body["outcome"] in ("deadline", "exhausted"), body
    return body
