"""Support for the CLI tests: run ``python -m retrybudget`` as a subprocess, read its files.

Not a test module of its own (it holds no tests); the ``test_cli*`` modules import it.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from retrybudget import SYSTEM_CLOCK

STEP = 0.05
"""Seconds between checks while polling a file or a process."""


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run ``python -m retrybudget ARGS`` to completion (bounded by ``timeout``)."""
    return subprocess.run(
        [sys.executable, "-m", "retrybudget", *args], cwd=cwd, capture_output=True, text=True,
        timeout=timeout, env={**os.environ, **(env or {})}, check=False,
    )


def start_cli(*args: str, cwd: Path | None = None,
              env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``python -m retrybudget ARGS`` without waiting for it."""
    return subprocess.Popen(
        [sys.executable, "-m", "retrybudget", *args], cwd=cwd, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})},
    )


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a results file."""
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def count_lines(path: Path) -> int:
    """Complete lines in a file (0 when it does not exist yet)."""
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    """Poll ``predicate`` every :data:`STEP` seconds until true; fail after ``timeout``."""
    for _ in range(int(timeout / STEP)):
        if predicate():
            return
        SYSTEM_CLOCK.sleep(STEP)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def digest(*paths: Path) -> str:
    """A digest of the files' bytes (absent files count as empty), to prove they did not change."""
    h = hashlib.sha256()
    for path in paths:
        h.update(path.read_bytes() if path.exists() else b"<absent>")
    return h.hexdigest()


def write_urls(path: Path, urls: Sequence[str]) -> Path:
    """Write one URL per line."""
    path.write_text("".join(u + "\n" for u in urls), "utf-8")
    return path


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """Assert the run failed with exit status 2 and one line on stderr; return that line."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def answer_json(handler: http.server.BaseHTTPRequestHandler, status: int, body: bytes,
                headers: Sequence[tuple[str, str]] = ()) -> None:
    """Send one JSON answer from a standard-library request handler."""
    handler.send_response(status)
    for name, value in headers:
        handler.send_header(name, value)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class RestoredProvider(http.server.ThreadingHTTPServer):
    """A provider on loopback whose record 2 is missing (404) until it is restored upstream:
    every request after the first for it answers 200, as every other record does (or, once
    ``restored`` is set False, until it is set True). Each answer takes ``latency`` seconds;
    ``seen`` counts the requests per path."""

    daemon_threads = True

    def __init__(self, latency: float = 0.0) -> None:
        super().__init__(("127.0.0.1", 0), _RestoredHandler)
        self.latency = latency
        self.lock = threading.Lock()
        self.seen: dict[str, int] = {}
        self.restored: bool | None = None  # None: restored by the first request for it

    @property
    def host(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.server_address[1]}"


class _RestoredHandler(http.server.BaseHTTPRequestHandler):
    server: RestoredProvider

    def do_GET(self) -> None:
        with self.server.lock:
            n = self.server.seen[self.path] = self.server.seen.get(self.path, 0) + 1
        if self.server.latency:
            SYSTEM_CLOCK.sleep(self.server.latency)
        restored = n > 1 if self.server.restored is None else self.server.restored
        missing = self.path.startswith("/rentals/2/") and not restored
        answer_json(self, 404 if missing else 200,
                    b'{"error": "no such rental"}' if missing else b'{"available": true}')

    def log_message(self, *args: Any) -> None:
        """Quiet."""


def restored_provider(latency: float = 0.0) -> contextlib.AbstractContextManager[RestoredProvider]:
    """A :class:`RestoredProvider` serving on its own thread until the block ends."""
    return serving(RestoredProvider(latency))


S = TypeVar("S", bound=http.server.HTTPServer)


@contextlib.contextmanager
def serving(server: S) -> Iterator[S]:
    """Serve ``server`` on its own thread until the block ends, then close it."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def held_by(url: str, job: str, pid: int) -> list[str]:
    """The operations of the Redis job ``job`` the process ``pid`` (of this host) holds."""
    from retrybudget.queue import RedisQueue

    queue = RedisQueue(url, job)
    try:
        return [h.op_id for h in queue.held() if f"-{pid}-" in h.worker]
    finally:
        queue.close()
