"""Soak: the reference gateway under sustained load from a hostile, rate-limited provider.

Runs a hostile provider (``soak_provider.py``, raw asyncio) and the gateway as their own
processes (loopback) and drives the gateway with CLIENTS concurrent lookups, back to back,
for SECONDS. The provider mixes valid 200s, invalid payloads, short 429s (``Retry-After: 1``),
5xx, 404s, slow heads, trickled bodies (3 s, longer than an attempt may last), connection
resets and hangs; it stops sending 429s after 60 % of the run. Checked:

- every answer is inside the contract: a 200 only with the availability the provider
  confirmed (``source: provider``, the provider's truth for the rental), every other answer
  the problem its outcome maps to, or the door's overload answer (503 ``gateway_overloaded``,
  ``Retry-After``, 0 attempts, no outcome), at most ``max_attempts`` attempts, ``no-store``;
- no ``provider_rate_limited`` answer to a lookup that started more than one rate window
  (1 s) after the provider's last 429;
- the 99th percentile of the answers' latency is within the deadline + 0.25 s (client side:
  the client shares the machine, so its own scheduling is part of what is measured);
- the gateway's resident memory and its open descriptors are flat: growth over the last half
  of the run (after warm-up) < 10 %;
- at the end the breaker, the gate and the store are consistent: once the load stops and the
  cool-down passes, lookups are served again; the health check answers ok; the store holds
  only facts the provider confirmed (each equal to the provider's truth) and passes SQLite's
  integrity check; the gateway's own answer counter equals the answers the clients got.

Bounded in count and time (SECONDS + about 15 s). Run::

    python benchmarks/gateway_soak.py [--clients 100] [--seconds 45] [--json soak.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import resource
import sqlite3
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from gateway_load import CLOCK, percentile, process
from retrybudget.core.outcome import Reason
from retrybudget.gateway import GATEWAY_MAPPING
from retrybudget.sandbox import is_available
from soak_provider import WINDOW

DEADLINE = 2.0
MAX_ATTEMPTS = 3
MARGIN = 0.25
"""An answer later than DEADLINE + MARGIN (seconds, client side) is late."""
RENTALS = 100
COOL_DOWN = 5.0
CALM_AFTER = 0.6
"""The share of the run after which the provider sends no more 429s."""
PROBLEM = "application/problem+json"
_WITHIN_2_5 = re.compile(
    r'^retrybudget_gateway_request_duration_seconds_bucket\{(?=[^}]*route="availability")'
    r'(?=[^}]*le="2.5")[^}]*\} (\S+)$', re.MULTILINE)
_COUNT = re.compile(
    r'^retrybudget_gateway_request_duration_seconds_count\{[^}]*route="availability"[^}]*\}'
    r" (\S+)$", re.MULTILINE)
_RESPONSES = re.compile(
    r'^retrybudget_gateway_responses_total\{[^}]*route="availability"[^}]*\} (\S+)$', re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Answer:
    """One HTTP answer as the soak's client read it."""

    status_code: int
    headers: dict[str, list[str]]
    content: bytes

    def header(self, name: str, default: str = "") -> str:
        values = self.headers.get(name)
        return values[0] if values else default

    def json(self) -> Any:
        return json.loads(self.content)


class Connection:
    """A minimal HTTP/1.1 keep-alive client connection (asyncio streams).

    The soak's clients are many and the machine small: httpx costs the client several
    milliseconds of CPU per request, which would starve the gateway it measures. This reads
    exactly what the gateway sends (a status line, headers, a Content-Length body).
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def get(self, path: str) -> Answer:
        """GET ``path``; a reused connection the server closed first is opened again once."""
        reused = self._streams is not None
        try:
            return await self._exchange(path)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            self.close()
            if not reused or (isinstance(exc, asyncio.IncompleteReadError) and exc.partial):
                raise
            return await self._exchange(path)

    async def _exchange(self, path: str) -> Answer:
        if self._streams is None:
            self._streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._streams
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode("ascii"))
        await writer.drain()
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        headers: dict[str, list[str]] = {}
        for line in head[1:]:
            if line:
                name, _, value = line.partition(":")
                headers.setdefault(name.strip().lower(), []).append(value.strip())
        body = await reader.readexactly(int(headers.get("content-length", ["0"])[0]))
        if headers.get("connection") == ["close"]:
            self.close()
        return Answer(int(head[0].split(" ", 2)[1]), headers, body)

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


@dataclass
class Tally:
    """What the clients saw."""

    answers: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    no_answer: int = 0
    late: int = 0
    late_answers: list[dict[str, Any]] = field(default_factory=list)
    confirmed: set[int] = field(default_factory=set)
    shed: Counter[str] = field(default_factory=Counter)
    rate_limited_started: list[float] = field(default_factory=list)
    """The wall-clock start of each lookup answered ``provider_rate_limited``."""
    rate_limited_details: Counter[str] = field(default_factory=Counter)


def _violation(response: Answer, rental: int) -> str | None:
    """Why ``response`` is outside the contract, or None."""
    if response.headers.get("cache-control") != ["no-store"]:
        return "no Cache-Control: no-store"
    try:
        attempts = int(response.header("x-retrybudget-attempts"))
        outcome = response.header("x-retrybudget-outcome")
        body: dict[str, Any] = response.json()
    except ValueError:
        return f"{response.status_code} without counters or a JSON body"
    if not 0 <= attempts <= MAX_ATTEMPTS or body.get("attempts") != attempts:
        return f"attempts {attempts} (body {body.get('attempts')})"
    if body.get("code") == "gateway_overloaded":
        return _shed_violation(response, body)
    if response.status_code == 200:
        if outcome != "ok" or body.get("source") != "provider":
            return f"200 with outcome {outcome} and source {body.get('source')}"
        if body.get("available") is not is_available(rental):
            return f"200 with an availability the provider never confirmed for {rental}"
        return None
    try:
        status, code = GATEWAY_MAPPING[Reason(outcome)]
    except ValueError:
        return f"{response.status_code} with outcome {outcome!r}"
    if response.status_code != status or body.get("code") != code:
        return f"{response.status_code} {body.get('code')} for outcome {outcome}"
    if not response.header("content-type").startswith(PROBLEM):
        return f"{response.status_code} is not a problem document"
    if "available" in body:
        return f"{response.status_code} carrying a live availability"
    stored = body.get("stored")
    if stored is not None and stored.get("available_when_confirmed") is not is_available(rental):
        return "a stored fact the provider never confirmed"
    return None


def _shed_violation(response: Answer, body: dict[str, Any]) -> str | None:
    """Why an overload answer is not the door's (503, a hint, no provider request), or None."""
    if response.status_code != 503 or not response.header("content-type").startswith(PROBLEM):
        return f"{response.status_code} gateway_overloaded is not a 503 problem"
    if body.get("attempts") != 0 or body.get("outcome") is not None:
        return f"gateway_overloaded after {body.get('attempts')} attempts"
    if not response.header("retry-after").isdigit():
        return "gateway_overloaded without Retry-After"
    if body.get("shed") not in ("capacity", "budget", "connections"):
        return f"gateway_overloaded shed for {body.get('shed')!r}"
    if "available" in body or body.get("stored") is not None:
        return "gateway_overloaded carrying an availability"
    return None


async def _client(base: str, until: float, tally: Tally, rng: random.Random) -> None:
    parts = urlsplit(base)
    connection = Connection(parts.hostname or "127.0.0.1", parts.port or 80)
    try:
        while CLOCK.monotonic() < until:
            await _lookup(connection, tally, rng)
    finally:
        connection.close()


async def _lookup(connection: Connection, tally: Tally,
                  rng: random.Random) -> None:
    """One lookup of a random rental, judged and counted."""
    rental = rng.randint(1, RENTALS)
    wall = CLOCK.wall()
    started = CLOCK.monotonic()
    try:
        response = await asyncio.wait_for(
            connection.get(f"/rentals/{rental}/availability"), DEADLINE + 30.0)
    except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError) as exc:
        connection.close()
        tally.no_answer += 1
        tally.violations.append(f"no answer: {type(exc).__name__}")
        return
    latency = CLOCK.monotonic() - started
    tally.answers += 1
    tally.latencies.append(latency)
    tally.statuses[response.status_code] += 1
    tally.outcomes[response.header("x-retrybudget-outcome", "?")] += 1
    if latency > DEADLINE + MARGIN:
        tally.late += 1
        tally.late_answers.append({
            "ms": round(latency * 1000, 1), "status": response.status_code,
            "outcome": response.header("x-retrybudget-outcome", "?"),
            "attempts": response.header("x-retrybudget-attempts", "?")})
    if response.header("x-retrybudget-outcome") == "rate_limited":  # provider_rate_limited
        tally.rate_limited_started.append(wall)
        with contextlib.suppress(ValueError, AttributeError):
            tally.rate_limited_details[str(response.json().get("detail"))[:120]] += 1
    problem = _violation(response, rental)
    if problem is not None:
        tally.violations.append(problem)
    elif response.status_code == 200:
        tally.confirmed.add(rental)
    elif response.header("x-retrybudget-outcome") == "none":
        tally.shed[response.json()["shed"]] += 1


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _fds(pid: int) -> int:
    """The descriptors a process holds open."""
    return len(os.listdir(f"/proc/{pid}/fd"))


async def _memory(pid: int, until: float, samples: list[tuple[float, int]],
                  origin: float, fds: list[tuple[float, int]]) -> None:
    while CLOCK.monotonic() < until:
        at = CLOCK.monotonic() - origin
        samples.append((at, _rss_kib(pid)))
        fds.append((at, _fds(pid)))
        await CLOCK.async_sleep(1.0)


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _mean(values: Sequence[int]) -> float:
    return sum(values) / len(values) if values else 0.0


def _memory_growth(samples: list[tuple[float, int]], seconds: float) -> tuple[float, float, float]:
    """The mean of a sampled figure (RSS in KiB, descriptors) around the half-way mark and
    over the last samples, and the growth."""
    half = seconds / 2
    middle = [rss for at, rss in samples if half - 2 <= at <= half + 2]
    last = [rss for at, rss in samples if at >= seconds - 3]
    start, end = _mean(middle), _mean(last)
    return start, end, (end - start) / start if start else 0.0


async def _settled(http: httpx.AsyncClient, base: str) -> dict[str, Any]:
    """After the load: the breaker and the gate let lookups through again; health is ok."""
    await CLOCK.async_sleep(COOL_DOWN + 1.0)  # the breaker's cool-down and a rate window
    served: list[int] = []
    lookups = 0
    for rental in range(1, 11):
        lookups += 1
        response = await http.get(f"{base}/rentals/{rental}/availability")
        if response.status_code == 200 and int(response.headers["x-retrybudget-attempts"]) >= 1:
            served.append(rental)
            break
    health = (await http.get(f"{base}/healthz")).json()
    metrics = (await http.get(f"{base}/metrics")).text
    counted = sum(float(value) for value in _RESPONSES.findall(metrics))
    inside = float(_WITHIN_2_5.findall(metrics)[0]) if _WITHIN_2_5.search(metrics) else 0.0
    handled = float(_COUNT.findall(metrics)[0]) if _COUNT.search(metrics) else 0.0
    return {"served_after_load": bool(served), "health": health,
            "answers_counted_by_gateway": counted, "settle_lookups": lookups,
            # the app's own time to answer (from its histogram): what the queue in front of
            # the app does not include
            "app_answers_over_2_5_s": handled - inside,
            "settle_served": served}


def _store(db: Path, confirmed: set[int]) -> dict[str, Any]:
    with sqlite3.connect(db) as conn:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        rows = conn.execute("SELECT rental_id, available, source FROM rentals").fetchall()
    wrong = [r for r in rows if bool(r[1]) is not is_available(int(r[0]))
             or "/availability" not in r[2]]
    unconfirmed = [r for r in rows if int(r[0]) not in confirmed]
    return {"integrity": integrity, "rows": len(rows), "wrong_rows": len(wrong),
            "rows_never_answered_200": len(unconfirmed)}


async def soak(clients: int, seconds: float, directory: Path,
               door: Sequence[str] = ()) -> dict[str, Any]:
    """Run the soak; return every figure and check."""
    hostile = ["soak_provider", "--port", "0", "--seed", "7",
               "--calm-after", str(round(seconds * CALM_AFTER, 1))]
    db = directory / "soak.sqlite3"
    logs = directory / "gateway.log"
    pids: list[int] = []
    with process(hostile, pids) as (provider, _):
        gateway = ["retrybudget.gateway", "--provider", provider, "--db", str(db), "--port",
                   "0", "--log-level", "warning", "--deadline", str(DEADLINE),
                   "--breaker-cool-down", str(COOL_DOWN), *door]
        with process(gateway, pids, stderr=logs) as (base, _):
            pid = pids[1]
            async with httpx.AsyncClient(timeout=DEADLINE + 10.0, trust_env=False) as http:
                tally = Tally()
                origin = CLOCK.monotonic()
                until = origin + seconds
                memory: list[tuple[float, int]] = []
                fds: list[tuple[float, int]] = []
                rngs = [random.Random(n) for n in range(clients)]
                before = [_cpu_s(p) for p in pids] + [_own_cpu_s()]
                await asyncio.gather(_memory(pid, until, memory, origin, fds),
                                     *(_client(base, until, tally, rngs[n])
                                       for n in range(clients)))
                elapsed = CLOCK.monotonic() - origin
                after = [_cpu_s(p) for p in pids] + [_own_cpu_s()]
                cpu = {name: round(b - a, 1) for name, a, b in
                       zip(("provider", "gateway", "clients"), before, after, strict=True)}
                provided = (await http.get(f"{provider}/__stats")).json()
                settled = await _settled(http, base)
                fds_after = _fds(pid)
    rss_half, rss_end, growth = _memory_growth(memory, seconds)
    fds_half, fds_end, fds_growth = _memory_growth(fds, seconds)
    last_429 = provided["last_429"]
    limited_late = [at for at in tally.rate_limited_started
                    if last_429 is None or at > last_429 + WINDOW]
    store = _store(db, tally.confirmed | set(settled.pop("settle_served")))
    lat = tally.latencies
    return {
        "clients": clients, "seconds": round(elapsed, 1), "answers": tally.answers,
        "answers_per_s": round(tally.answers / elapsed, 1) if elapsed else 0.0,
        "p50_ms": round(percentile(lat, 0.50) * 1000, 1) if lat else None,
        "p99_ms": round(percentile(lat, 0.99) * 1000, 1) if lat else None,
        "max_ms": round(max(lat) * 1000, 1) if lat else None,
        "late": tally.late, "late_share": round(tally.late / tally.answers, 5)
        if tally.answers else 0.0, "no_answer": tally.no_answer,
        "shed": sum(tally.shed.values()), "shed_share": round(
            sum(tally.shed.values()) / tally.answers, 4) if tally.answers else 0.0,
        "shed_reasons": dict(tally.shed),
        "violations": len(tally.violations),
        "violation_kinds": dict(Counter(tally.violations).most_common(5)),
        "statuses": {str(k): v for k, v in sorted(tally.statuses.items())},
        "outcomes": dict(sorted(tally.outcomes.items())),
        "rss_kib_half": round(rss_half), "rss_kib_end": round(rss_end),
        "rss_growth": round(growth, 4),
        "memory_samples": len(memory),
        "fds_half": round(fds_half, 1), "fds_end": round(fds_end, 1),
        "fds_growth": round(fds_growth, 4), "fds_after_load": fds_after,
        "provider_behaviours": provided["counts"],
        "provider_rate_limited_answers": len(tally.rate_limited_started),
        "rate_limited_after_last_429_plus_window": len(limited_late),
        "rate_limited_details": dict(tally.rate_limited_details.most_common(3)),
        "rate_limited_late_by_s": round(max(limited_late) - (last_429 or 0.0), 2)
        if limited_late else None,
        "cpu_s": cpu,
        "gateway_cpu_ms_per_answer": round(cpu["gateway"] * 1000 / tally.answers, 2)
        if tally.answers else None,
        "late_answers": tally.late_answers[:20],
        "app_late": _late_phases(logs),
        **settled, "store": store,
    }


def _late_phases(logs: Path) -> dict[str, Any]:
    """Where the gateway's own late answers (decided after the deadline, by its clock) spent
    their time, from its ``late_answer`` log records: how many, by verdict and status, and the
    worst few with their phases (door wait, provider operation, after the operation)."""
    late = []
    for line in logs.read_text(encoding="utf-8", errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and record.get("event") == "late_answer":
                late.append(record)
    late.sort(key=lambda r: -float(r.get("elapsed_s", 0)))
    keep = ("elapsed_s", "status", "code", "verdict", "door_s", "operation_s",
            "after_operation_s", "lag_now_s", "attempts_s")
    return {"count": len(late),
            "by_verdict": dict(Counter(str(r.get("verdict", "?")).split(" ")[0] for r in late)),
            "worst": [{k: r[k] for k in keep if k in r} for r in late[:10]]}


def checks(result: dict[str, Any]) -> dict[str, bool]:
    """The soak's targets, each met or not."""
    store = result["store"]
    return {
        "no answer outside the contract": result["violations"] == 0 and result["no_answer"] == 0,
        "no provider_rate_limited answer more than one window after the provider's last 429":
            result["rate_limited_after_last_429_plus_window"] == 0,
        f"p99 within the deadline + {MARGIN} s": result["p99_ms"] is not None
        and result["p99_ms"] <= (DEADLINE + MARGIN) * 1000,
        "resident memory flat (< 10 % over the last half)": result["rss_growth"] < 0.10,
        "open descriptors flat (< 10 % over the last half)": result["fds_growth"] < 0.10,
        "breaker and gate let lookups through after the load": result["served_after_load"],
        "health ok": result["health"].get("status") == "ok",
        "store intact, only confirmed facts": (store["integrity"] == "ok"
                                               and store["wrong_rows"] == 0
                                               and store["rows_never_answered_200"] == 0),
        "every answer counted once by the gateway": (
            result["answers_counted_by_gateway"] == result["answers"] + result["settle_lookups"]),
    }


def main(argv: Sequence[str] | None = None) -> int:
    here = str(Path(__file__).resolve().parent)  # where ``python -m soak_provider`` is found
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (here, os.environ.get("PYTHONPATH"))))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=45.0)
    parser.add_argument("--max-in-flight", type=int, default=None,
                        help="the gateway's --max-in-flight (default: the gateway's own)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    door = () if args.max_in_flight is None else ("--max-in-flight", str(args.max_in_flight))
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(soak(args.clients, args.seconds, Path(tmp), door))
    result["checks"] = checks(result)
    text = json.dumps(result, indent=2, default=list)
    if args.json is not None:
        args.json.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0 if all(result["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
