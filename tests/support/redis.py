"""A real redis-server for the tests: on a unix socket in a directory of its own, killed at the end.

Not a test module of its own (it holds no tests): test modules that name it (or a support
module that does) in ``pytest_plugins`` get its fixtures.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from retrybudget import SYSTEM_CLOCK

REDIS_SERVER = shutil.which("redis-server")
STEP = 0.02
"""Seconds between checks while waiting for redis-server."""


class RedisServer:
    """A redis-server on a unix socket in ``directory``: with no persistence, or with the
    append-only file on (fsync on every write) when ``append_only``, restartable over the same
    directory and socket."""

    def __init__(self, directory: Path, *, append_only: bool = False) -> None:
        self.directory = directory
        self.socket = directory / "redis.sock"
        self.append_only = append_only
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The URL clients connect with."""
        return f"unix://{self.socket}"

    def start(self) -> None:
        """Start (or restart) the server and wait (at most 5 s) until it answers."""
        if REDIS_SERVER is None:
            pytest.skip("redis-server is not installed")
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        persistence = (["--appendonly", "yes", "--appendfsync", "always"] if self.append_only
                       else ["--appendonly", "no"])
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", "0", "--unixsocket", str(self.socket),
             "--unixsocketperm", "700", "--save", "", *persistence,
             "--dir", str(self.directory)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(unix_socket_path=str(self.socket), socket_timeout=0.5)
        try:
            for _ in range(250):
                with contextlib.suppress(redis.RedisError, OSError):
                    if client.ping():
                        return
                SYSTEM_CLOCK.sleep(STEP)
        finally:
            client.close()
        raise RuntimeError("redis-server did not start within 5 s")

    def stop(self) -> None:
        """Kill the server (no goodbye) and wait for it."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(5)
            self.proc = None

    def pause(self) -> None:
        """Freeze the server (it stops answering but keeps its connections)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Unfreeze the server."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def client(self) -> redis.Redis:
        """A plain client, for inspecting and tampering with keys."""
        return redis.Redis(unix_socket_path=str(self.socket), socket_timeout=2.0)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One redis-server for the whole run, killed at the end."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server for one test that kills or freezes it."""
    server = RedisServer(tmp_path_factory.mktemp("own-redis"))
    server.start()
    yield server
    if server.proc is not None:
        server.resume()
    server.stop()


@pytest.fixture
def aof_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server with AOF on, for one test that restarts it."""
    server = RedisServer(tmp_path_factory.mktemp("aof-redis"), append_only=True)
    server.start()
    yield server
    server.stop()
