"""A hostile availability provider for the gateway soak, on raw asyncio so it can misbehave
at the byte level: valid 200s, invalid payloads, short 429s, 5xx, 404s, slow heads, trickled
bodies, connection resets and hangs, mixed at random (seeded) on every request.

    python benchmarks/soak_provider.py --port 0 [--calm-after 27] [--seed 7]

prints ``soak provider listening on http://127.0.0.1:PORT``. ``GET /__stats`` answers what it
did so far: requests by behaviour and the wall-clock time of its last 429 (it stops sending
429s ``--calm-after`` seconds after it started, so a soak can check the gateway recovers).
A rental's truth is :func:`retrybudget.sandbox.is_available`, as in the sandbox.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import re
import socket
import struct
import sys
from collections import Counter
from collections.abc import Sequence

from retrybudget import SYSTEM_CLOCK
from retrybudget.sandbox import is_available

CLOCK = SYSTEM_CLOCK

MIX: dict[str, float] = {
    "ok": 0.53, "invalid": 0.05, "rate_limited": 0.08, "5xx": 0.10, "not_found": 0.03,
    "slow_head": 0.06, "trickle": 0.05, "reset": 0.05, "hang": 0.05,
}
"""Each behaviour's share of the requests (after --calm-after, a 429's share answers ok)."""

WINDOW = 1
"""Seconds of a 429's ``Retry-After``: the provider's rate window."""
HANG_S = 30.0
"""How long a hung request holds its connection at most (the gateway gives up long before)."""
TRICKLE_S = 3.0
"""How long a trickled body takes to arrive (longer than an attempt may last)."""

_TARGET = re.compile(rb"^GET /rentals/([^/\s]+)/availability HTTP/1\.[01]\r\n")


class Provider:
    """The provider's state: its random source, what it did, and when it last sent a 429."""

    def __init__(self, seed: int, calm_after: float | None) -> None:
        self.rng = random.Random(seed)
        self.started = CLOCK.monotonic()
        self.calm_after = calm_after
        self.counts: Counter[str] = Counter()
        self.last_429: float | None = None
        self.open = 0

    def pick(self) -> str:
        """A behaviour for the next request."""
        kind = self.rng.choices(list(MIX), weights=list(MIX.values()))[0]
        calm = self.calm_after is not None and CLOCK.monotonic() - self.started >= self.calm_after
        if kind == "rate_limited" and calm:
            kind = "ok"
        self.counts[kind] += 1
        return kind

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer the requests of one connection (keep-alive) until it closes or misbehaves."""
        self.open += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                if not await self.answer(head, reader, writer):
                    return
        finally:
            self.open -= 1
            with contextlib.suppress(ConnectionError, OSError):
                writer.close()

    async def answer(self, head: bytes, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection is done with."""
        if head.startswith(b"GET /__stats "):
            body = json.dumps({"counts": dict(self.counts), "last_429": self.last_429,
                               "open": self.open}).encode()
            await _send(writer, 200, body)
            return True
        match = _TARGET.match(head)
        if match is None:
            await _send(writer, 400, b'{"error": "bad request"}')
            return False
        rental = match.group(1).decode("ascii", "replace")
        truth = rental.isdigit() and is_available(int(rental))
        valid = json.dumps({"rental_id": rental, "available": truth,
                            "checked_at": CLOCK.wall()}).encode()
        kind = self.pick()
        if kind == "ok":
            await _send(writer, 200, valid)
        elif kind == "invalid":
            body = b"<html>maintenance</html>" if self.rng.random() < 0.5 else b'{"rental_id": 1}'
            await _send(writer, 200, body)
        elif kind == "rate_limited":
            self.last_429 = CLOCK.wall()
            await _send(writer, 429, b'{"error": "slow down"}', f"Retry-After: {WINDOW}\r\n")
        elif kind == "5xx":
            await _send(writer, self.rng.choice((500, 502, 503)), b'{"error": "oops"}')
        elif kind == "not_found":
            await _send(writer, 404, b'{"error": "no such rental"}')
        elif kind == "slow_head":
            await CLOCK.async_sleep(self.rng.uniform(0.2, 1.5))
            await _send(writer, 200, valid)
        elif kind == "trickle":
            await _trickle(writer, valid)
        elif kind == "reset":
            _reset(writer)
            return False
        else:  # hang: read nothing more, answer nothing, until the gateway gives up
            with contextlib.suppress(asyncio.TimeoutError, ConnectionError):
                await asyncio.wait_for(reader.read(), HANG_S)
            return False
        return True


async def _send(writer: asyncio.StreamWriter, status: int, body: bytes, extra: str = "") -> None:
    head = (f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n")
    writer.write(head.encode("ascii") + body)
    await writer.drain()


async def _trickle(writer: asyncio.StreamWriter, body: bytes) -> None:
    writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(body)}\r\n\r\n".encode("ascii"))
    step = TRICKLE_S / len(body)
    for byte in body:
        writer.write(bytes([byte]))
        await writer.drain()
        await CLOCK.async_sleep(step)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close the connection with a TCP reset (SO_LINGER 0), mid-request."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def main_async(port: int, seed: int, calm_after: float | None) -> None:
    provider = Provider(seed, calm_after)
    server = await asyncio.start_server(provider.serve, "127.0.0.1", port, backlog=1024)
    host, bound = server.sockets[0].getsockname()[:2]
    print(f"soak provider listening on http://{host}:{bound}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--calm-after", type=float, default=None,
                        help="seconds after which no 429 is sent (default: never)")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main_async(args.port, args.seed, args.calm_after))
    return 0


if __name__ == "__main__":
    sys.exit(main())
