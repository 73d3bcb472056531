"""The services the storm benchmark runs against: the sandbox provider and a redis-server.

Both run as child processes bound to loopback (the sandbox on 127.0.0.1, Redis on a unix
socket), so their work does not compete with the contenders for this process's GIL. Every
wait for them is bounded; leaving the context always stops them.
"""

from __future__ import annotations

import contextlib
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

START_TIMEOUT = 15.0
"""Seconds a service may take to come up."""


def _first_line(child: subprocess.Popen[str], timeout: float) -> str:
    """The child's first line of output, waited for at most ``timeout`` seconds."""
    assert child.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise RuntimeError(f"no output within {timeout:g} s")
    return child.stdout.readline()


def _stop(child: subprocess.Popen[Any]) -> None:
    child.terminate()
    try:
        child.wait(10)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(10)


def _wait_until(ready: Callable[[], bool], child: subprocess.Popen[Any], what: str) -> None:
    """Poll ``ready()`` (its errors count as not ready) until it is true, for at most
    ``START_TIMEOUT`` seconds or until ``child`` exits."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        with contextlib.suppress(Exception):
            if ready():
                return
        if child.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.02)


class Sandbox:
    """A sandbox provider process; ``stats(run)`` reads ``GET /_stats/{run}``."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def stats(self, run_id: str) -> dict[str, Any]:
        """Every request the provider saw for ``run_id``, with aggregates."""
        answer = httpx.get(f"{self.base_url}/_stats/{run_id}", timeout=30.0)
        answer.raise_for_status()
        result: dict[str, Any] = answer.json()
        return result


@contextlib.contextmanager
def sandbox(options: Sequence[str]) -> Iterator[Sandbox]:
    """``python -m retrybudget.sandbox`` with ``options`` on a free loopback port."""
    command = [sys.executable, "-m", "retrybudget.sandbox", "--host", "127.0.0.1", "--port", "0",
               *options]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True)
    try:
        line = _first_line(child, START_TIMEOUT)
        if "listening on" not in line:
            raise RuntimeError(f"the sandbox did not start: {line.strip()!r}")
        base_url = line.split()[-1]  # printed before it listens: wait for /_health too
        _wait_until(lambda: httpx.get(f"{base_url}/_health", timeout=1.0).status_code == 200,
                    child, "the sandbox")
        yield Sandbox(base_url)
    finally:
        _stop(child)


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """A redis-server on a unix socket in a temporary directory, without persistence.

    Yields its URL (``unix://...``).
    """
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed")
    import redis

    with tempfile.TemporaryDirectory(prefix="storm-redis-") as directory:
        socket = Path(directory) / "redis.sock"
        child = subprocess.Popen(
            [binary, "--port", "0", "--unixsocket", str(socket), "--unixsocketperm", "700",
             "--save", "", "--appendonly", "no", "--dir", directory],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            with redis.Redis(unix_socket_path=str(socket), socket_timeout=0.5) as client:
                _wait_until(lambda: bool(client.ping()), child, "redis-server")
            yield f"unix://{socket}"
        finally:
            _stop(child)
