"""One short 429 costs the gateway at most what the provider asked.

The gateway (real uvicorn, loopback) in front of the sandbox provider, which answers one
``429 Retry-After: 1`` and then only 200s, driven at about 100 lookups per second for three
seconds. Lookups are ``fail_fast`` on rate limits: while the gate is closed they are refused
at once (``provider_rate_limited``, 0 attempts), and a refused lookup reserves nothing, so
the refusals end when the gate opens and every lookup after that is answered by the
provider.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from retrybudget import SYSTEM_CLOCK
from retrybudget.coordination import CoordinationConfig, GateConfig
from retrybudget.sandbox import SandboxServer
from retrybudget.sandbox import serve_in_thread as serve_sandbox
from tests.support.gateway import Scripted, available, unique

RATE = 100
"""Lookups started per second."""
SECONDS = 3.0
"""How long the load runs (bounded: RATE * SECONDS lookups in all)."""
HERD_WINDOW = GateConfig().herd_window
"""The local wait beyond the provider's own that a release may add (1 s by default)."""
CLOCK_READS = 0.05
"""Seconds of allowance between our clock readings and the gateway's (the same monotonic
clock, read by different threads)."""


@dataclass(frozen=True)
class Answer:
    sent: float  # monotonic, when the request was started
    done: float  # monotonic, when its answer was read
    status: int
    code: str | None
    attempts: int
    waits: int
    retry_after: int | None


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with serve_sandbox() as server:
        yield server


async def drive(url: str) -> list[Answer]:
    """Start RATE lookups per second for SECONDS, each on its own schedule; their answers."""
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(trust_env=False, timeout=10.0, limits=limits) as client:
        start = SYSTEM_CLOCK.monotonic()

        async def one(i: int) -> Answer:
            await asyncio.sleep(max(0.0, start + i / RATE - SYSTEM_CLOCK.monotonic()))
            sent = SYSTEM_CLOCK.monotonic()
            response = await client.get(url)
            done = SYSTEM_CLOCK.monotonic()
            body = response.json()
            hint = response.headers.get("Retry-After")
            return Answer(sent, done, response.status_code, body.get("code"),
                          int(body.get("attempts", 0)), int(body.get("waits", 0)),
                          None if hint is None else int(hint))

        return await asyncio.gather(*(one(i) for i in range(int(RATE * SECONDS))))


def test_refusals_after_a_short_429_end_when_its_retry_after_does(
        sandbox: SandboxServer, tmp_path: Path) -> None:
    rental = unique("r")
    with Scripted(sandbox, tmp_path, CoordinationConfig()) as gateway:
        gateway.script([{"status": 429, "headers": {"Retry-After": "1"}}, available(rental)])
        answers = asyncio.run(drive(gateway.url(f"/rentals/{rental}/availability")))
    limited = [a for a in answers if a.code == "provider_rate_limited"]
    first = [a for a in limited if a.attempts == 1]
    assert len(first) == 1  # the one lookup the provider answered 429
    refused = [a for a in limited if a.attempts == 0]
    assert refused  # the gate held lookups
    # The gateway closed its gate for 1 s when it learned the 429, before that lookup was
    # answered; a refusal is decided before its gate opens, after its lookup was sent: so
    # every refused lookup was sent within Retry-After of the 429's answer. Before refused
    # lookups reserved nothing, they queued ever further behind it (refusals for ~6 s).
    opened = first[0].done + 1.0
    assert max(a.sent for a in refused) <= opened + CLOCK_READS
    # every lookup started after the gate opened went to the provider at once (the refused
    # ones left no queue to wait behind) and was answered ok
    later = [a for a in answers if a.sent > opened + CLOCK_READS]
    assert later  # the load went on past the gate (the client kept its schedule)
    assert all((a.status, a.attempts, a.waits) == (200, 1, 0) for a in later), [
        (a.status, a.code, a.attempts, a.waits) for a in later
        if (a.status, a.waits) != (200, 0)][:5]
    # a local Retry-After is never longer than the provider's own plus one herd window
    assert all(a.retry_after is not None and a.retry_after <= 1 + HERD_WINDOW
               for a in limited)
