"""One short 429 in front of the gateway: how long its lookups are refused.

The sandbox provider answers the first request ``429 Retry-After: 1`` and every later one
200; the reference gateway (real uvicorn, in this process, loopback) is driven at RATE
lookups per second for SECONDS, each lookup started on its own schedule. Reported: the
lookups refused with 0 attempts (``provider_rate_limited`` while the gate holds), how long
after the 429's answer the last refused lookup was sent (the provider asked for 1 s), the
largest ``Retry-After`` the gateway answered, and the lookups answered ok.

Bounded in count and time (RATE * SECONDS lookups, SECONDS + a few). Run::

    python benchmarks/short_429.py [--rate 100] [--seconds 6] [--json short_429.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import httpx

from retrybudget import SYSTEM_CLOCK
from retrybudget.gateway import GatewayConfig, GatewayServer, create_app
from retrybudget.sandbox import serve_in_thread as serve_sandbox

CLOCK = SYSTEM_CLOCK


@dataclass(frozen=True, slots=True)
class Lookup:
    """One lookup: sent and answered (seconds since the load began), and its answer."""

    sent: float
    answered: float
    status: int
    code: str | None
    attempts: int
    retry_after: int | None


async def drive(url: str, rate: float, seconds: float) -> list[Lookup]:
    """``rate`` lookups per second for ``seconds``, each started on its own schedule."""
    limits = httpx.Limits(max_connections=500, max_keepalive_connections=500)
    async with httpx.AsyncClient(trust_env=False, timeout=10.0, limits=limits) as client:
        start = CLOCK.monotonic()

        async def one(i: int) -> Lookup:
            await CLOCK.async_sleep(max(0.0, start + i / rate - CLOCK.monotonic()))
            sent = CLOCK.monotonic() - start
            response = await client.get(url)
            body = response.json()
            hint = response.headers.get("Retry-After")
            return Lookup(sent, CLOCK.monotonic() - start, response.status_code,
                          body.get("code"), int(body.get("attempts", 0)),
                          None if hint is None else int(hint))

        return await asyncio.gather(*(one(i) for i in range(int(rate * seconds))))


def measure(rate: float, seconds: float) -> dict[str, object]:
    """Run the scenario once; its figures."""
    rental = "r1"
    with serve_sandbox() as sandbox, tempfile.TemporaryDirectory() as directory:
        base = sandbox.load_fixture(f"short-{uuid.uuid4().hex[:8]}", "provider", [
            {"status": 429, "headers": {"Retry-After": "1"}},
            {"status": 200, "body": {"rental_id": rental, "available": True}},
        ])
        app = create_app(GatewayConfig(provider=base, db_path=Path(directory) / "g.sqlite3"))
        server = GatewayServer(app)
        server.start()
        try:
            lookups = asyncio.run(drive(server.url(f"/rentals/{rental}/availability"), rate,
                                        seconds))
        finally:
            server.stop()
    limited = [x for x in lookups if x.code == "provider_rate_limited"]
    throttled = [x.answered for x in limited if x.attempts == 1]
    refused = [x for x in limited if x.attempts == 0]
    answered_429 = min(throttled) if throttled else None
    last = max((x.sent for x in refused), default=None)
    return {
        "lookups": len(lookups),
        "refused": len(refused),
        "last_refusal_after_429_s": (None if last is None or answered_429 is None
                                     else round(last - answered_429, 3)),
        "max_retry_after_s": max((x.retry_after or 0 for x in limited), default=None),
        "ok": sum(x.status == 200 for x in lookups),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    figures = measure(args.rate, args.seconds)
    print(f"{figures['lookups']} lookups at {args.rate:g}/s behind one 429 Retry-After: 1: "
          f"{figures['refused']} refused (0 attempts), the last sent "
          f"{figures['last_refusal_after_429_s']} s after the 429's answer; largest "
          f"Retry-After {figures['max_retry_after_s']} s; {figures['ok']} ok")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
