"""The reference gateway under a real uvicorn server, against the sandbox provider over loopback.

Every row of the contract (docs/design.md: the interactive contract and the outcome mapping), the stored-facts
rule, reservations, the breaker, exact per-lookup counters under concurrency, and operations.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from starlette.applications import Starlette

from retrybudget import SYSTEM_CLOCK, PolicyError
from retrybudget.gateway import GatewayConfig, JsonLogFormatter, serve_in_thread
from retrybudget.gateway.__main__ import build_parser, main
from retrybudget.gateway._store import key_digest
from retrybudget.sandbox import Faults, SandboxConfig, SandboxServer, is_available
from retrybudget.sandbox import serve_in_thread as serve_sandbox
from tests.support.gateway import Scripted, available, keys_named, reserved, unique

PROBLEM = "application/problem+json"
SECRET = "Bearer sk-live-gatewaysecret-0123456789abcdef"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    with serve_sandbox() as server:
        yield server


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gateway")


@pytest.fixture(scope="module")
def scripted(sandbox: SandboxServer, data_dir: Path) -> Iterator[Scripted]:
    """The shared gateway: 2 s deadline, attempts cut at 0.3 s so a hung one leaves room."""
    with Scripted(sandbox, data_dir, attempt_timeout=0.3) as gateway:
        yield gateway


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(trust_env=False, timeout=10.0) as http:
        yield http


def lookup(gateway: Scripted, client: httpx.Client, rental_id: str) -> tuple[httpx.Response, float]:
    started = SYSTEM_CLOCK.monotonic()
    response = client.get(gateway.url(f"/rentals/{rental_id}/availability"))
    return response, SYSTEM_CLOCK.monotonic() - started


def assert_counters(response: httpx.Response, attempts: int, outcome: str | None,
                    logical: str = "logical_lookups") -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    assert body[logical] == 1
    assert body["attempts"] == attempts
    assert response.headers["X-Retrybudget-Attempts"] == str(attempts)
    assert body["outcome"] == outcome
    assert response.headers["X-Retrybudget-Outcome"] == (outcome or "none")
    assert response.headers["X-Retrybudget-Waits"] == str(body["waits"])
    return body


def stored_rows(gateway: Scripted, rental_id: str) -> list[tuple[Any, ...]]:
    return gateway.query("SELECT available, confirmed_at FROM rentals WHERE rental_id = ?",
                         rental_id)


# the contract, row by row ---------------------------------------------------------------

Script = Callable[[str], list[dict[str, Any]]]

OK_ROWS: list[tuple[str, Script, bool, int]] = [
    ("200 available", lambda r: [available(r, True)], True, 1),
    ("200 booked", lambda r: [available(r, False, checked_at=1_800_000_000)], False, 1),
    ("503,503,200", lambda r: [{"status": 503}, {"status": 503}, available(r)], True, 3),
    ("502,504,200", lambda r: [{"status": 502}, {"status": 504}, available(r)], True, 3),
    ("reset,200", lambda r: [{"reset": True}, available(r)], True, 2),
    ("timeout,200", lambda r: [{"delay_s": 2.0, **available(r, False)}, available(r)], True, 2),
]


@pytest.mark.parametrize(("script", "value", "attempts"),
                         [row[1:] for row in OK_ROWS], ids=[row[0] for row in OK_ROWS])
def test_confirmed_availability_is_answered_and_stored(
    scripted: Scripted, client: httpx.Client, script: Script, value: bool, attempts: int
) -> None:
    rental = unique("r")
    scripted.script(script(rental))
    response, _ = lookup(scripted, client, rental)
    assert response.status_code == 200, response.text
    body = assert_counters(response, attempts, "ok")
    assert len(scripted.requests()) == attempts
    assert body["available"] is value
    assert body["source"] == "provider"
    assert body["recorded"] is True
    assert body["waits"] == attempts - 1
    assert stored_rows(scripted, rental) == [(int(value), body["confirmed_at"])]


FAIL_ROWS: list[tuple[str, Script, int, str, str, int]] = [
    ("503 x3", lambda r: [{"status": 503}], 503, "provider_unavailable", "exhausted", 3),
    ("reset x3", lambda r: [{"reset": True}], 503, "provider_unavailable", "exhausted", 3),
    ("502,503,504", lambda r: [{"status": 502}, {"status": 503}, {"status": 504}, available(r)],
     503, "provider_unavailable", "exhausted", 3),
    ("404", lambda r: [{"status": 404, "body": {"message": "no"}}, available(r)],
     404, "not_found", "not_found", 1),
    ("400", lambda r: [{"status": 400}, available(r)], 502, "provider_rejected", "rejected", 1),
    ("401", lambda r: [{"status": 401}, available(r)], 502, "provider_rejected", "rejected", 1),
    ("403", lambda r: [{"status": 403, "body": {"message": "forbidden"}}, available(r)],
     502, "provider_rejected", "rejected", 1),
    ("500", lambda r: [{"status": 500}, available(r)], 502, "provider_unexpected", "unexpected", 1),
    ("302", lambda r: [{"status": 302, "headers": {"Location": "/elsewhere"}}],
     502, "provider_unexpected", "unexpected", 1),
    ("200 not JSON", lambda r: [{"status": 200, "body_text": "<html>maintenance</html>"},
                                available(r)],
     502, "provider_invalid_payload", "invalid_payload", 1),
    ("200 no available", lambda r: [{"status": 200, "body": {"rental_id": r}}, available(r)],
     502, "provider_invalid_payload", "invalid_payload", 1),
    ("200 available as text", lambda r: [{"status": 200, "body": {"rental_id": r,
                                                                  "available": "true"}}],
     502, "provider_invalid_payload", "invalid_payload", 1),
    ("200 another rental", lambda r: [available("someone-else", True)],
     502, "provider_invalid_payload", "invalid_payload", 1),
    ("200 a list", lambda r: [{"status": 200, "body": [{"rental_id": r, "available": True}]}],
     502, "provider_invalid_payload", "invalid_payload", 1),
    ("204", lambda r: [{"status": 204}], 502, "provider_invalid_payload", "invalid_payload", 1),
]


@pytest.mark.parametrize(("script", "status", "code", "outcome", "attempts"),
                         [row[1:] for row in FAIL_ROWS], ids=[row[0] for row in FAIL_ROWS])
def test_provider_failures_map_to_problems(
    scripted: Scripted, client: httpx.Client, script: Script, status: int, code: str,
    outcome: str, attempts: int,
) -> None:
    rental = unique("r")
    scripted.script(script(rental))
    response, elapsed = lookup(scripted, client, rental)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    assert len(scripted.requests()) == attempts  # what the provider saw: exactly the script's
    # an attempt cut at 0.3 s before the provider read its request (a loaded machine: the
    # connection not yet made) fails as a timeout and counts once more; nothing else may
    cut = response.json()["attempts"] - attempts
    assert 0 <= cut <= 3 - attempts, response.json()
    body = assert_counters(response, attempts + cut, outcome)
    assert body["code"] == code
    assert body["type"].endswith(code)
    assert body["status"] == status
    assert body["title"]
    assert body["detail"]
    assert body["stored"] is None
    assert keys_named(body, "available") == 0
    assert stored_rows(scripted, rental) == []
    assert body["waited_s"] <= scripted.config.deadline  # every wait paid out of the budget
    assert elapsed < scripted.config.deadline + 10.0  # real clock: generous, a loaded machine


@pytest.mark.parametrize("retry_after", ["3600", "{httpdate+120}", "0", "soon", "-5"])
def test_429_fails_fast_with_one_attempt_whatever_retry_after_says(
    scripted: Scripted, client: httpx.Client, retry_after: str
) -> None:
    rental = unique("r")
    scripted.script([{"status": 429, "headers": {"Retry-After": retry_after}}, available(rental)])
    response, elapsed = lookup(scripted, client, rental)
    assert response.status_code == 503
    body = assert_counters(response, 1, "rate_limited")
    assert body["code"] == "provider_rate_limited"
    assert body["waits"] == 0
    assert body["waited_s"] == 0
    assert len(scripted.requests()) == 1
    assert elapsed < 10.0  # real clock, generous: "no sleep" is checked on waits/waited_s
    assert keys_named(body, "available") == 0
    if retry_after in ("3600", "{httpdate+120}"):
        hint = int(response.headers["Retry-After"])
        assert 100 <= hint <= 3600
        assert body["retry_at"] > 0


def test_429_closes_the_gate_for_later_lookups_without_provider_requests(
    scripted: Scripted, client: httpx.Client
) -> None:
    rental = unique("r")
    scripted.script([{"status": 429, "headers": {"Retry-After": "60"}}, available(rental)])
    first, _ = lookup(scripted, client, rental)
    second, _ = lookup(scripted, client, rental)
    assert first.json()["attempts"] == 1
    body = assert_counters(second, 0, "rate_limited")
    assert body["code"] == "provider_rate_limited"
    assert len(scripted.requests()) == 1
    assert 1 <= int(second.headers["Retry-After"]) <= 60


def test_hung_provider_is_cut_inside_the_deadline(scripted: Scripted, client: httpx.Client) -> None:
    rental = unique("r")
    scripted.script([{"delay_s": 30.0, **available(rental)}])
    response, elapsed = lookup(scripted, client, rental)
    assert response.status_code == 503
    body = response.json()
    assert body["code"] == "provider_unavailable"
    assert body["outcome"] in ("exhausted", "deadline")
    assert body["attempts"] == len(scripted.requests()) <= 3
    assert body["waited_s"] <= scripted.config.deadline
    # real clock, generous (a loaded machine): far under the 30 s hang, which was cut
    assert elapsed < scripted.config.deadline + 10.0


def test_invalid_rental_id_is_refused_before_the_provider(
    scripted: Scripted, client: httpx.Client
) -> None:
    scripted.script([available("x")])
    response, _ = lookup(scripted, client, "..")
    assert response.status_code in (400, 404)
    response, _ = lookup(scripted, client, "a" * 65)
    assert response.status_code == 400
    assert_counters(response, 0, None)
    assert response.json()["code"] == "invalid_rental_id"
    assert scripted.requests() == []


# stored facts ------------------------------------------------------------------------------


def test_failure_shows_the_stored_fact_labelled_and_never_as_live(
    scripted: Scripted, client: httpx.Client
) -> None:
    rental = unique("r")
    scripted.script([available(rental, True)])
    confirmed = lookup(scripted, client, rental)[0].json()

    scripted.script([{"status": 503}])
    response, _ = lookup(scripted, client, rental)
    assert response.status_code == 503
    body = response.json()
    assert "available" not in body
    assert keys_named(body, "available") == 0
    stored = body["stored"]
    assert stored["available_when_confirmed"] is True
    assert stored["confirmed_at"] == confirmed["confirmed_at"]
    assert stored["confirmed_at_iso"].endswith("Z")
    assert stored["source"].endswith(f"/rentals/{rental}/availability")
    assert "not live" in stored["note"]

    # A payload that fails validation never replaces the stored fact.
    scripted.script([{"status": 200, "body": {"rental_id": rental, "available": "no"}}])
    assert lookup(scripted, client, rental)[0].json()["code"] == "provider_invalid_payload"
    assert stored_rows(scripted, rental) == [(1, confirmed["confirmed_at"])]

    # A newer confirmation does.
    scripted.script([available(rental, False)])
    again = lookup(scripted, client, rental)[0].json()
    assert again["available"] is False
    assert stored_rows(scripted, rental) == [(0, again["confirmed_at"])]


# the breaker ------------------------------------------------------------------------------


def test_open_breaker_answers_without_provider_requests(
    sandbox: SandboxServer, data_dir: Path, client: httpx.Client
) -> None:
    run = unique("run")
    base = sandbox.load_fixture(run, "down", [{"status": 503}])
    config = GatewayConfig(provider=base, db_path=data_dir / f"{run}.sqlite3",
                           breaker_failures=2, breaker_cool_down=30)
    with serve_in_thread(config) as gateway:
        url = gateway.url("/rentals/7/availability")
        exhausted = [client.get(url).json() for _ in range(2)]
        # a fresh key's retry budget is its floor (3 retries): the second lookup gets one
        assert [b["attempts"] for b in exhausted] == [3, 2]
        assert sandbox.stats(run)["count"] == 5
        for _ in range(3):
            response = client.get(url)
            assert response.status_code == 503
            body = assert_counters(response, 0, "circuit_open")
            assert body["code"] == "provider_unavailable"
            assert int(response.headers["Retry-After"]) >= 1
        assert sandbox.stats(run)["count"] == 5  # the provider saw nothing more
        health = client.get(gateway.url("/healthz")).json()
        assert health["breaker"] == {"opened": 1, "refused": 3}


# concurrency ----------------------------------------------------------------------------


def test_concurrent_lookups_keep_exact_per_lookup_counters(data_dir: Path) -> None:
    faults = Faults(seed=11, error_rate=0.3, error_statuses=(502, 503, 504), reset_rate=0.1)
    run = unique("run")
    with serve_sandbox(SandboxConfig(faults=faults)) as faulty:
        # Room for all 50 at once: the door sheds none for capacity, and a deadline long
        # enough that a loaded machine does not eat every lookup's budget before it starts
        # (a shed lookup sends nothing; the counters are what this test is about).
        config = GatewayConfig(provider=faulty.base_url, db_path=data_dir / f"{run}.sqlite3",
                               provider_headers={"X-Sandbox-Run": run}, max_in_flight=50,
                               deadline=10.0)
        with serve_in_thread(config) as gateway:

            async def all_lookups() -> list[httpx.Response]:
                limits = httpx.Limits(max_connections=50)
                async with httpx.AsyncClient(limits=limits, timeout=10.0, trust_env=False) as http:
                    return await asyncio.gather(*(
                        http.get(gateway.url(f"/rentals/{i}/availability")) for i in range(1, 51)))

            responses = asyncio.run(all_lookups())
        seen = Counter(r["path"] for r in faulty.stats(run)["requests"])
    outcomes: Counter[str | None] = Counter()
    for rental_id, response in enumerate(responses, start=1):
        body = response.json()
        outcomes[body["outcome"]] += 1
        assert body["logical_lookups"] == 1
        assert body["attempts"] == int(response.headers["X-Retrybudget-Attempts"])
        # Never fewer than the provider saw; more only by an attempt abandoned at its deadline
        # before the provider read it (a loaded machine), never by a resend it did not count.
        assert seen[f"/rentals/{rental_id}/availability"] <= body["attempts"] <= 3, rental_id
        if response.status_code == 200:
            assert body["available"] is is_available(rental_id)
        else:
            assert keys_named(body, "available") == 0
    assert sum(b.json()["attempts"] for b in responses) >= sum(seen.values())
    # 30 % faults and 10 % resets, three attempts each: most lookups the door admitted end ok
    admitted = 50 - outcomes[None]
    assert admitted >= 1
    assert outcomes["ok"] >= admitted // 2
    assert max(seen.values()) <= 3


# reservations ---------------------------------------------------------------------------


def reserve(gateway: Scripted, client: httpx.Client, rental_id: str, key: str | None,
            body: dict[str, Any] | None = None) -> httpx.Response:
    headers = {} if key is None else {"Idempotency-Key": key}
    return client.post(gateway.url(f"/rentals/{rental_id}/reservations"), headers=headers,
                       json=body)


def reservation_state(gateway: Scripted, key: str) -> str | None:
    rows = gateway.query("SELECT state FROM reservations WHERE idempotency_key = ?",
                         key_digest(key))
    return rows[0][0] if rows else None


def test_idempotency_keys_are_stored_hashed(scripted: Scripted, client: httpx.Client) -> None:
    key = "idem-" + unique("Kx9")
    scripted.script([reserved("7")])
    assert reserve(scripted, client, "7", key).status_code == 201
    assert reserve(scripted, client, "7", key).headers["Idempotent-Replayed"] == "true"
    assert reservation_state(scripted, key) == "confirmed"
    stored = b"".join(path.read_bytes() for path in Path(scripted.config.db_path).parent.iterdir()
                      if path.name.startswith(Path(scripted.config.db_path).name))
    assert key.encode() not in stored


def test_reservation_replay_returns_the_first_result_and_the_provider_sees_one_post(
    sandbox: SandboxServer, data_dir: Path, client: httpx.Client
) -> None:
    run = unique("run")
    config = GatewayConfig(provider=sandbox.base_url, db_path=data_dir / f"{run}.sqlite3",
                           provider_headers={"X-Sandbox-Run": run})
    with serve_in_thread(config) as gateway:
        url = gateway.url("/rentals/7/reservations")
        key = unique("key")
        first = client.post(url, headers={"Idempotency-Key": key}, json={"guest": "ada"})
        again = client.post(url, headers={"Idempotency-Key": key}, json={"guest": "ada"})
    assert first.status_code == again.status_code == 201
    one, two = first.json(), again.json()
    assert one["reserved"] is True
    assert one["replayed"] is False
    assert_counters(first, 1, "ok", "logical_operations")
    assert_counters(again, 0, None, "logical_operations")
    assert two["replayed"] is True
    assert again.headers["Idempotent-Replayed"] == "true"
    assert two["reservation_id"] == one["reservation_id"]
    posts = [r for r in sandbox.stats(run)["requests"] if r["method"] == "POST"]
    assert [(r["idempotency_key"], r["status"]) for r in posts] == [(key, 201)]


def test_reservation_needs_an_idempotency_key(scripted: Scripted, client: httpx.Client) -> None:
    scripted.script([reserved("7")])
    for key in (None, "", "x" * 256, "tab\tkey"):
        response = reserve(scripted, client, "7", key)
        assert response.status_code == 400
        assert response.headers["content-type"] == PROBLEM
        assert response.json()["code"] == "idempotency_key_required"
        assert_counters(response, 0, None, "logical_operations")
    bad_body = client.post(scripted.url("/rentals/7/reservations"), content=b"[1, 2]",
                           headers={"Idempotency-Key": unique("k")})
    assert bad_body.json()["code"] == "invalid_request_body"
    assert scripted.requests() == []


def test_reusing_a_key_for_another_request_is_a_conflict(
    scripted: Scripted, client: httpx.Client
) -> None:
    rental, key = unique("r"), unique("key")
    scripted.script([reserved(rental)])
    assert reserve(scripted, client, rental, key, {"guest": "ada"}).status_code == 201
    for other_rental, body in ((unique("r"), {"guest": "ada"}), (rental, {"guest": "bob"})):
        response = reserve(scripted, client, other_rental, key, body)
        assert response.status_code == 409
        assert response.json()["code"] == "idempotency_key_conflict"
    assert len(scripted.requests()) == 1


RESERVE_FAILURES: list[tuple[str, Script, int, str, str]] = [
    ("503 not replayed", lambda r: [{"status": 503}, reserved(r)], 503, "provider_unavailable",
     "not_retried"),
    ("reset after send", lambda r: [{"reset": True}, reserved(r)], 503, "provider_unavailable",
     "not_retried"),
    ("429", lambda r: [{"status": 429, "headers": {"Retry-After": "30"}}], 503,
     "provider_rate_limited", "rate_limited"),
    ("404", lambda r: [{"status": 404}], 404, "not_found", "not_found"),
    ("400", lambda r: [{"status": 400}], 502, "provider_rejected", "rejected"),
    ("500", lambda r: [{"status": 500}], 502, "provider_unexpected", "unexpected"),
    ("409 from provider", lambda r: [{"status": 409}], 502, "provider_unexpected", "unexpected"),
    ("201 without reserved", lambda r: [{"status": 201, "body": {"rental_id": r}}], 502,
     "provider_invalid_payload", "invalid_payload"),
    ("201 without id", lambda r: [{"status": 201, "body": {"rental_id": r, "reserved": True}}],
     502, "provider_invalid_payload", "invalid_payload"),
    ("201 another rental", lambda r: [reserved("someone-else")], 502, "provider_invalid_payload",
     "invalid_payload"),
    ("declined", lambda r: [{"status": 200, "body": {"rental_id": r, "reserved": False}}], 409,
     "reservation_declined", "ok"),
]


@pytest.mark.parametrize(("script", "status", "code", "outcome"),
                         [row[1:] for row in RESERVE_FAILURES],
                         ids=[row[0] for row in RESERVE_FAILURES])
def test_unconfirmed_reservations_are_sent_once_and_never_committed(
    scripted: Scripted, client: httpx.Client, script: Script, status: int, code: str, outcome: str
) -> None:
    rental, key = unique("r"), unique("key")
    scripted.script(script(rental))
    response = reserve(scripted, client, rental, key)
    assert response.status_code == status, response.text
    body = assert_counters(response, 1, outcome, "logical_operations")
    assert body["code"] == code
    assert body["committed"] is False
    assert keys_named(body, "reserved") == 0
    assert len(scripted.requests()) == 1  # a write is never sent twice automatically
    assert reservation_state(scripted, key) == "unconfirmed"


def test_a_retry_with_the_same_key_after_an_unknown_outcome_forwards_the_same_key(
    scripted: Scripted, client: httpx.Client
) -> None:
    rental, key = unique("r"), unique("key")
    scripted.script([{"reset": True}, reserved(rental, "res_after_retry")])
    assert reserve(scripted, client, rental, key).status_code == 503
    retried = reserve(scripted, client, rental, key)
    assert retried.status_code == 201
    assert retried.json()["reservation_id"] == "res_after_retry"
    assert [r["idempotency_key"] for r in scripted.requests()] == [key, key]
    assert reservation_state(scripted, key) == "confirmed"
    assert reserve(scripted, client, rental, key).json()["replayed"] is True
    assert len(scripted.requests()) == 2


def test_a_concurrent_request_with_the_same_key_waits_its_turn(
    sandbox: SandboxServer, data_dir: Path
) -> None:
    rental, key = unique("r"), unique("key")
    # A gateway of its own with a 10 s deadline and no attempt cap: the provider holds the
    # first request 1.5 s, well inside its budget however much a loaded loop's lag reserves,
    # and the second is sent once the provider holds the first (counted, not timed).
    with Scripted(sandbox, data_dir, attempt_timeout=None, deadline=10.0) as scripted:
        scripted.script([{"delay_s": 1.5, **reserved(rental)}])
        url = scripted.url(f"/rentals/{rental}/reservations")
        answers = _race_two_posts(url, key, lambda: bool(scripted.requests()))
        assert len(scripted.requests()) == 1
    assert [r.status_code for r in answers] == [201, 409]
    held = answers[1]
    assert held.json()["code"] == "reservation_in_progress"
    assert int(held.headers["Retry-After"]) >= 1


def _race_two_posts(url: str, key: str, pending: Callable[[], bool]) -> list[httpx.Response]:
    """Two POSTs with one key, the second sent once ``pending()`` says the first is held at the
    provider (polled, at most 500 times); sorted by status."""

    async def both() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=30.0, trust_env=False) as http:
            first = asyncio.ensure_future(http.post(url, headers={"Idempotency-Key": key}))
            for _ in range(500):
                await SYSTEM_CLOCK.async_sleep(0.01)
                if pending():
                    break
            second = await http.post(url, headers={"Idempotency-Key": key})
            return [await first, second]

    return sorted(asyncio.run(both()), key=lambda r: r.status_code)


def test_a_write_is_retried_only_when_it_was_never_sent(data_dir: Path, client: httpx.Client) -> None:
    with socket.socket() as sock:  # bound, never listening: held, so connecting is refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = GatewayConfig(provider=f"http://127.0.0.1:{port}",
                               db_path=data_dir / "closed.sqlite3")
        with serve_in_thread(config) as gateway:
            key = unique("key")
            response = client.post(gateway.url("/rentals/7/reservations"),
                                   headers={"Idempotency-Key": key})
    assert response.status_code == 503
    body = assert_counters(response, 3, "exhausted", "logical_operations")
    assert body["committed"] is False


def test_a_gateway_failure_is_a_problem_and_commits_nothing(
    sandbox: SandboxServer, data_dir: Path, client: httpx.Client
) -> None:
    run = unique("run")
    base = sandbox.load_fixture(run, "never", [reserved("7")])
    server = serve_in_thread(GatewayConfig(provider=base, db_path=data_dir / f"{run}.sqlite3"))
    gateway = cast(Starlette, server.app).state.gateway

    async def broken(*args: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    gateway.store.claim_reservation = broken
    with server:
        response = client.post(server.url("/rentals/7/reservations"),
                               headers={"Idempotency-Key": unique("key")})
    assert response.status_code == 500
    assert response.headers["content-type"] == PROBLEM
    assert_counters(response, 0, None, "logical_operations")
    assert response.json()["code"] == "internal_error"
    assert sandbox.stats(run)["count"] == 0


# operations -------------------------------------------------------------------------------


def test_metrics_health_audit_and_logs_carry_no_secret(
    sandbox: SandboxServer, data_dir: Path, client: httpx.Client,
    caplog: pytest.LogCaptureFixture,
) -> None:
    run = unique("run")
    base = sandbox.load_fixture(run, "ops", [{"status": 503}, available("7"), {"status": 401}])
    audit = data_dir / f"{run}.jsonl"
    config = GatewayConfig(provider=base, db_path=data_dir / f"{run}.sqlite3", audit_path=audit,
                           provider_headers={"Authorization": SECRET})
    caplog.set_level(logging.INFO, logger="retrybudget")
    with serve_in_thread(config) as gateway:
        ok = client.get(gateway.url("/rentals/7/availability"))
        rejected = client.get(gateway.url("/rentals/7/availability"))
        assert (ok.status_code, rejected.status_code) == (200, 502)
        health = client.get(gateway.url("/healthz"))
        metrics = client.get(gateway.url("/metrics"))
    assert health.json()["status"] == "ok"
    text = metrics.text
    assert metrics.headers["content-type"].startswith("text/plain")
    assert re.search(r'retrybudget_gateway_responses_total\{code="",route="availability",'
                     r'status="200"\} 1\.0', text)
    assert 'code="provider_rejected"' in text
    attempts = re.findall(r'^retrybudget_attempts_total\{[^}]*\} (\S+)$', text, re.MULTILINE)
    assert sum(float(a) for a in attempts) == 3.0  # 2 + 1: sums of per-lookup counters
    assert "retrybudget_gateway_request_duration_seconds_bucket" in text

    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [r["outcome"] for r in records] == ["ok", "rejected"]
    assert [r["attempts"] for r in records] == [2, 1]
    assert "sk-live" not in audit.read_text()

    answers = [r for r in caplog.records if getattr(r, "event", None) == "answer"]
    assert [(vars(r)["status"], vars(r)["attempts"]) for r in answers] == [(200, 2), (502, 1)]
    for record in caplog.records:
        assert "sk-live" not in JsonLogFormatter((SECRET,)).format(record)
    # The provider received the header; nothing else did.
    assert sandbox.stats(run)["count"] == 3


def test_json_log_formatter_scrubs_secrets() -> None:
    record = logging.LogRecord("retrybudget.gateway", logging.INFO, __file__, 1,
                               "called with %s", ("token=abc123",), None)
    record.route = "availability"
    record.header = SECRET
    line = json.loads(JsonLogFormatter((SECRET,)).format(record))
    assert line["route"] == "availability"
    assert line["level"] == "info"
    assert "abc123" not in line["message"]
    assert "sk-live" not in json.dumps(line)


def test_config_refuses_unusable_values(tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite3"
    bad: dict[str, Any]
    base: dict[str, Any] = {"provider": "http://127.0.0.1:1", "db_path": db}
    for bad in ({"provider": "ftp://x"}, {"provider": "http://x?q=1"}, {"deadline": 0},
                {"max_attempts": 0}, {"attempt_timeout": -1},
                {"availability_path": "/rentals/availability"},
                {"provider_headers": {"Bad Name": "x"}},
                {"provider_headers": {"X-A": "line\nbreak"}}):
        with pytest.raises(PolicyError):
            GatewayConfig(**{**base, **bad})
    config = GatewayConfig(provider="http://127.0.0.1:1/base/", db_path=db)
    assert config.url(config.availability_path, "7") == "http://127.0.0.1:1/base/rentals/7/availability"
    policy = config.policy()
    assert (policy.max_attempts, policy.deadline, policy.rate_limit.value) == (3, 2.0, "fail_fast")
    assert not policy.may_retry("POST", has_idempotency_key=True, sent=True)


# the command ------------------------------------------------------------------------------


def test_command_line_parser_and_bad_options(tmp_path: Path) -> None:
    import argparse

    parser = build_parser(argparse.ArgumentParser(prog="retrybudget gateway"))
    args = parser.parse_args(["--provider", "http://127.0.0.1:1", "--db", "x.sqlite3",
                              "--provider-header", "X-Api-Version: 2"])
    assert args.provider_header == [("X-Api-Version", "2")]
    assert main(["--provider", "ftp://nowhere", "--db", str(tmp_path / "x.sqlite3")]) == 2
    assert main(["--provider", "http://127.0.0.1:1", "--db", str(tmp_path / "x.sqlite3"),
                 "--provider-header-env", "Authorization=RETRYBUDGET_UNSET_VARIABLE"]) == 2


def test_python_dash_m_serves_until_stopped(sandbox: SandboxServer, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "GATEWAY_TEST_AUTH": SECRET}
    command = [sys.executable, "-m", "retrybudget.gateway", "--provider", sandbox.base_url,
               "--db", str(tmp_path / "cli.sqlite3"), "--port", "0",
               "--provider-header-env", "Authorization=GATEWAY_TEST_AUTH"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.match(r"gateway listening on (http://\S+)", line)
        assert match, line
        with httpx.Client(base_url=match.group(1), trust_env=False, timeout=10.0) as http:
            assert http.get("/healthz").json()["status"] == "ok"
            response = http.get("/rentals/3/availability")
        assert response.status_code == 200
        assert response.json()["available"] is is_available(3)
    finally:
        proc.send_signal(signal.SIGINT)  # a graceful stop, as Ctrl-C
        try:
            _, stderr = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
    assert proc.returncode == 0
    logs = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert any(entry.get("event") == "answer" and entry.get("attempts") == 1 for entry in logs)
    assert "sk-live" not in stderr


def test_the_gateway_package_exports_documented_names() -> None:
    import types

    import retrybudget.gateway as package

    public = {name for name in dir(package) if not name.startswith("_")
              and not isinstance(getattr(package, name), types.ModuleType)}
    assert set(package.__all__) == public
    for name in package.__all__:
        value = getattr(package, name)
        if callable(value):
            assert (value.__doc__ or "").strip(), name


def test_every_answer_of_the_router_is_no_store(scripted: Scripted, client: httpx.Client) -> None:
    scripted.script([available("5")])
    answers = [
        client.get(scripted.url("/rentals/5/availability")),  # a live answer
        client.get(scripted.url("/rentals/%20/availability")),  # a local problem
        client.get(scripted.url("/no/such/route")),  # the router's own 404
        client.delete(scripted.url("/rentals/5/availability")),  # the router's own 405
        client.get(scripted.url("/healthz")),
        client.get(scripted.url("/metrics")),
    ]
    assert [a.status_code for a in answers] == [200, 400, 404, 405, 200, 200]
    for answer in answers:
        assert answer.headers.get_list("cache-control") == ["no-store"], answer.request.url


def test_a_busy_store_never_holds_a_failure_answer_past_the_deadline(
    scripted: Scripted, client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    gateway = scripted.server.app.state.gateway

    async def stuck(rental_id: str) -> None:
        await asyncio.sleep(30)  # a store queue far longer than any deadline

    monkeypatch.setattr(gateway.store, "stored_fact", stuck)
    scripted.script([{"status": 404}])
    response, elapsed = lookup(scripted, client, "busy-store")
    assert response.status_code == 404
    assert response.json()["stored"] is None  # not read in time: none shown, none invented
    # real clock, real server: generous (the deadline is 2 s, the stuck read 30 s)
    assert elapsed < scripted.config.deadline + 10.0
