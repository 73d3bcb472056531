"""A hostile provider on loopback: it trickles its status line and headers, or its body.

The path names what each request gets: ``/{part}/{interval_ms}/{size}/{status}[/...]``, where
``part`` is ``head`` (every byte of the status line and headers ``interval_ms`` apart, then
the body at once) or ``body`` (the head at once, then ``size`` body bytes one at a time).
Anything after the fourth segment is ignored, so a client can put its own path behind it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

__all__ = ["SLACK", "TrickleServer", "trickle_server"]

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
    head = (f"HTTP/1.1 {status} Trickle\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode("ascii")
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
                    conn.sendall(fast)
                    for index in range(len(slow)):
                        if self._stop.wait(interval):
                            return
                        conn.sendall(slow[index:index + 1])
                except OSError:  # the client gave up: the point of the test
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


def elapsed_since(started: float) -> float:
    """Real seconds since ``started`` (``time.monotonic``)."""
    return time.monotonic() - started
