"""The sandbox provider, exercised over real loopback HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests

from retrybudget._clock import FakeClock
from retrybudget.sandbox import (
    MALFORMED_BODY,
    RUN_HEADER,
    Faults,
    FixtureError,
    RateLimit,
    SandboxConfig,
    SandboxServer,
    create_app,
    is_available,
    load_fixture_file,
    parse_script,
    resolve_placeholders,
    serve_in_thread,
)

SRC = Path(__file__).resolve().parents[2] / "src"
RESET_ERRORS = (httpx.ReadError, httpx.RemoteProtocolError)

ACCEPTANCE_FILE = SRC / "retrybudget" / "data" / "acceptance.json"
ACCEPTANCE_CASES: list[dict[str, Any]] = json.loads(ACCEPTANCE_FILE.read_text(encoding="utf-8"))["cases"]


# fixtures ------------------------------------------------------------------


def _run_id() -> str:
    return f"run-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxServer]:
    """One real-clock sandbox shared by the tests that need no special configuration."""
    with serve_in_thread() as server:
        yield server


@pytest.fixture(scope="module")
def fake_clock() -> FakeClock:
    return FakeClock(monotonic=1000.0, wall=1_800_000_000.0)


@pytest.fixture(scope="module")
def fake_sandbox(fake_clock: FakeClock) -> Iterator[SandboxServer]:
    """A sandbox whose time is a fake clock: exact placeholders, instant delays."""
    with serve_in_thread(clock=fake_clock) as server:
        yield server


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(trust_env=False, timeout=10.0) as http:
        yield http


# health and records ----------------------------------------------------------


def test_health(sandbox: SandboxServer, client: httpx.Client) -> None:
    response = client.get(sandbox.url("/_health"))
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert sandbox.base_url.startswith("http://127.0.0.1:")


def test_availability_is_deterministic(sandbox: SandboxServer, client: httpx.Client) -> None:
    before = int(time.time())
    for rental_id in (1, 2, 3, 99):
        response = client.get(sandbox.url(f"/rentals/{rental_id}/availability"))
        assert response.status_code == 200
        body = response.json()
        assert body["rental_id"] == rental_id
        assert body["available"] is is_available(rental_id)
        assert before <= body["checked_at"] <= int(time.time())
    assert is_available(1)
    assert not is_available(3)


@pytest.mark.parametrize("rental", ["0", "101", "abc", "-1", "1.5"])
def test_unknown_rental_is_404_json(sandbox: SandboxServer, client: httpx.Client, rental: str) -> None:
    response = client.get(sandbox.url(f"/rentals/{rental}/availability"))
    assert response.status_code == 404
    assert "not found" in response.json()["message"]


def test_unknown_route_is_404_json(sandbox: SandboxServer, client: httpx.Client) -> None:
    response = client.get(sandbox.url("/nowhere"))
    assert response.status_code == 404
    assert response.json() == {"message": "Not Found"}


def test_list_rentals(sandbox: SandboxServer, client: httpx.Client) -> None:
    response = client.get(sandbox.url("/rentals"), params={"offset": 95, "limit": 10})
    body = response.json()
    assert response.status_code == 200
    assert body["total"] == 100
    assert [r["rental_id"] for r in body["rentals"]] == [96, 97, 98, 99, 100]
    assert body["rentals"][0]["available"] is is_available(96)


def test_reservations_replay_an_idempotency_key(sandbox: SandboxServer, client: httpx.Client) -> None:
    run = _run_id()
    url = sandbox.url("/rentals/5/reservations")
    headers = {RUN_HEADER: run, "Idempotency-Key": "key-1"}
    first = client.post(url, headers=headers)
    again = client.post(url, headers=headers)
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    assert first.json()["reserved"] is True
    assert first.json()["rental_id"] == 5
    assert "idempotent-replayed" not in first.headers
    assert again.headers["idempotent-replayed"] == "true"
    other = client.post(url, headers={RUN_HEADER: run, "Idempotency-Key": "key-2"})
    plain = client.post(url, headers={RUN_HEADER: run})
    ids = {first.json()["reservation_id"], other.json()["reservation_id"]}
    ids.add(plain.json()["reservation_id"])
    assert len(ids) == 3
    reused = client.post(
        sandbox.url("/rentals/6/reservations"), headers={RUN_HEADER: run, "Idempotency-Key": "key-1"}
    )
    assert reused.status_code == 409
    stats = sandbox.stats(run)
    assert stats["reservations"] == 3
    assert [r["idempotency_key"] for r in stats["requests"]] == ["key-1", "key-1", "key-2", None, "key-1"]


# scripted fixtures -------------------------------------------------------------


def _expected_headers(step: dict[str, Any], wall: float) -> dict[str, str]:
    return {
        name.lower(): resolve_placeholders(str(value), wall)
        for name, value in step.get("headers", {}).items()
    }


def _check_step(response: httpx.Response, step: dict[str, Any], wall: float) -> None:
    assert response.status_code == step.get("status", 200)
    for name, value in _expected_headers(step, wall).items():
        assert response.headers[name] == value
    if "body" in step:
        assert response.headers["content-type"] == "application/json"
        assert response.json() == step["body"]
    elif "body_text" in step:
        assert response.text == step["body_text"]
    else:
        assert response.content == b""


@pytest.mark.parametrize("case", ACCEPTANCE_CASES, ids=[c["id"] for c in ACCEPTANCE_CASES])
def test_acceptance_script_is_served_step_by_step(
    fake_sandbox: SandboxServer, fake_clock: FakeClock, client: httpx.Client, case: dict[str, Any]
) -> None:
    run = _run_id()
    url = fake_sandbox.load_fixture(run, case["id"], case["script"])
    script: list[dict[str, Any]] = case["script"]
    served = [*script, script[-1]]  # past the end, the last step again
    for step in served:
        sleeps_before = len(fake_clock.sleeps)
        if step.get("reset"):
            with pytest.raises(RESET_ERRORS):
                client.get(url)
        else:
            response = client.get(url)
            _check_step(response, step, fake_clock.wall())
        if step.get("delay_s"):
            assert step["delay_s"] in fake_clock.sleeps[sleeps_before:]
    stats = fake_sandbox.stats(run)
    statuses = [None if s.get("reset") else s.get("status", 200) for s in served]
    assert [r["status"] for r in stats["requests"]] == statuses
    assert {r["fixture_id"] for r in stats["requests"]} == {case["id"]}


def test_placeholders_use_the_clock_and_allow_negative_offsets(
    fake_sandbox: SandboxServer, fake_clock: FakeClock, client: httpx.Client
) -> None:
    headers = {
        "x-reset": "{epoch+2}",
        "x-past": "{epoch-5}",
        "x-past2": "{epoch+-5}",
        "x-now": "{epoch}",
        "retry-after": "{httpdate+2}",
        "x-text": "at {epoch+1} or {nonsense+1}",
        "x-fraction": "{epoch+1.5}",
    }
    url = fake_sandbox.load_fixture(_run_id(), "ph", [{"status": 429, "headers": headers}])
    response = client.get(url)
    now = int(fake_clock.wall())
    assert response.headers["x-reset"] == str(now + 2)
    assert response.headers["x-past"] == response.headers["x-past2"] == str(now - 5)
    assert response.headers["x-now"] == str(now)
    assert response.headers["x-fraction"] == str(now + 1)
    assert response.headers["retry-after"] == formatdate(now + 2, usegmt=True)
    assert response.headers["x-text"] == f"at {now + 1} or {{nonsense+1}}"
    assert response.headers["date"] == formatdate(now, usegmt=True)


def test_real_clock_delay_and_placeholders(sandbox: SandboxServer, client: httpx.Client) -> None:
    script: list[dict[str, Any]] = [
        {"status": 503, "delay_s": 0.4},
        {"status": 429, "headers": {"x-ratelimit-reset": "{epoch+2}"}},
    ]
    url = sandbox.load_fixture(_run_id(), "slow", script)
    started = time.monotonic()
    assert client.get(url).status_code == 503
    assert time.monotonic() - started >= 0.4
    before = int(time.time())
    reset = int(client.get(url).headers["x-ratelimit-reset"])
    assert before + 2 <= reset <= int(time.time()) + 2


def test_a_client_that_gives_up_ends_the_delay(sandbox: SandboxServer) -> None:
    run = _run_id()
    url = sandbox.load_fixture(run, "slow", [{"status": 503, "delay_s": 30}])
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(url, timeout=0.3, trust_env=False)
    deadline = time.monotonic() + 30.0  # real clock: a bound on polling, generous when loaded
    while sandbox.stats(run)["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.02)
    stats = sandbox.stats(run)
    assert stats["in_flight"] == 0
    assert stats["requests"][0]["status"] == 503  # what the script served, to nobody


def test_stopping_cuts_off_requests_in_progress() -> None:
    server = serve_in_thread()
    server.start()
    run = _run_id()
    url = server.load_fixture(run, "slow", [{"status": 200, "delay_s": 3600}])
    errors: list[BaseException] = []

    def wait_for_answer() -> None:
        try:
            httpx.get(url, timeout=30.0, trust_env=False)
        except httpx.TransportError as exc:
            errors.append(exc)

    waiter = threading.Thread(target=wait_for_answer)
    waiter.start()
    deadline = time.monotonic() + 30.0  # real clock: a bound on polling, generous when loaded
    while server.stats(run)["in_flight"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    server.stop()
    waiter.join(30.0)
    assert not waiter.is_alive()
    # real clock, generous for a loaded machine: the answer was due in an hour
    assert time.monotonic() - started < 15.0
    assert len(errors) == 1
    assert isinstance(errors[0], RESET_ERRORS)


def test_reset_is_a_connection_error_for_requests(sandbox: SandboxServer) -> None:
    url = sandbox.load_fixture(_run_id(), "A12", [{"reset": True}, {"status": 200, "body": {}}])
    with requests.Session() as session:
        session.trust_env = False
        with pytest.raises(requests.ConnectionError):
            session.get(url, timeout=5)
        assert session.get(url, timeout=5).status_code == 200


async def test_reset_with_an_async_client(sandbox: SandboxServer) -> None:
    url = sandbox.load_fixture(_run_id(), "A12", [{"reset": True}, {"status": 204}])
    async with httpx.AsyncClient(trust_env=False, timeout=5.0) as http:
        with pytest.raises(RESET_ERRORS):
            await http.get(url)
        assert (await http.get(url)).status_code == 204


def test_fixture_any_method_and_subpath(sandbox: SandboxServer, client: httpx.Client) -> None:
    script: list[dict[str, Any]] = [{"status": 202}, {"status": 409}, {"status": 200, "body": [1, 2]}]
    url = sandbox.load_fixture(run := _run_id(), "f", script)
    assert client.post(url + "/rentals/1/reservations", json={"x": 1}).status_code == 202
    assert client.request("PATCH", url + "/a/b").status_code == 409
    assert client.delete(url).json() == [1, 2]
    assert client.put(url).json() == [1, 2]
    methods = [r["method"] for r in sandbox.stats(run)["requests"]]
    assert methods == ["POST", "PATCH", "DELETE", "PUT"]


def test_unknown_fixture_is_404(sandbox: SandboxServer, client: httpx.Client) -> None:
    run = _run_id()
    response = client.get(sandbox.url(f"/fx/{run}/missing"))
    assert response.status_code == 404
    assert sandbox.stats(run)["requests"][0]["status"] == 404


def test_reloading_a_fixture_rewinds_it(sandbox: SandboxServer, client: httpx.Client) -> None:
    run = _run_id()
    url = sandbox.load_fixture(run, "f", [{"status": 503}, {"status": 200}])
    assert client.get(url).status_code == 503
    sandbox.load_fixture(run, "f", [{"status": 502}, {"status": 200}])
    assert client.get(url).status_code == 502


def test_parallel_runs_do_not_share_a_script(sandbox: SandboxServer, client: httpx.Client) -> None:
    one, two = _run_id(), _run_id()
    url_one = sandbox.load_fixture(one, "A01", [{"status": 503}, {"status": 200}])
    url_two = sandbox.load_fixture(two, "A01", [{"status": 429}, {"status": 201}])
    assert client.get(url_one).status_code == 503
    assert client.get(url_two).status_code == 429
    assert client.get(url_two).status_code == 201
    assert client.get(url_one).status_code == 200
    assert sandbox.stats(one)["count"] == sandbox.stats(two)["count"] == 2


@pytest.mark.parametrize(
    "script",
    [
        [],
        [{"status": 99}],
        [{"status": 200, "body": {}, "body_text": "x"}],
        [{"status": 200, "delay": 1}],
        [{"reset": True, "status": 200}],
        [{"status": 200, "headers": {"Content-Length": "5"}}],
        [{"status": 200, "headers": {"X-Bad": "a\r\nb"}}],
        [{"status": 204, "body": {}}],
        [{"status": 200, "delay_s": -1}],
        "not a list",
    ],
)
def test_invalid_scripts_are_refused(sandbox: SandboxServer, script: Any) -> None:
    with pytest.raises(ValueError, match="HTTP 400"):
        sandbox.load_fixture(_run_id(), "bad", script)
    with pytest.raises(FixtureError):
        parse_script(script)


def test_put_fixture_requires_a_script_object(sandbox: SandboxServer, client: httpx.Client) -> None:
    url = sandbox.url(f"/_fixtures/{_run_id()}/f")
    assert client.put(url, content=b"not json").status_code == 400
    assert client.put(url, json=[{"status": 200}]).status_code == 400
    assert client.put(url, json={"script": [{"status": 200}]}).status_code == 201


def test_stats_record_every_request_without_secrets(sandbox: SandboxServer, client: httpx.Client) -> None:
    run = _run_id()
    url = sandbox.load_fixture(run, "r", [{"status": 503}, {"reset": True}])
    secret = "Bearer ghp_not-a-real-token"
    headers = {"Authorization": secret, "Cookie": "session=abc", "Idempotency-Key": "idem-7"}
    started = time.time()
    assert client.get(url, headers=headers).status_code == 503
    for _ in range(2):  # past the end of the script the reset repeats
        with pytest.raises(RESET_ERRORS):
            client.get(url, headers=headers)
    client.get(sandbox.url("/rentals/2/availability"), headers={RUN_HEADER: run, **headers})
    stats = sandbox.stats(run)
    assert stats["count"] == 4
    assert [r["status"] for r in stats["requests"]] == [503, None, None, 200]
    assert stats["by_status"] == {"200": 1, "503": 1, "reset": 2}
    assert stats["busiest_window"]["count"] >= 2
    assert stats["in_flight"] == 0
    first = stats["requests"][0]
    assert set(first) == {
        "method",
        "path",
        "arrival",
        "arrival_mono",
        "status",
        "idempotency_key",
        "fixture_id",
    }
    assert first["path"] == f"/fx/{run}/r"
    assert first["idempotency_key"] == "idem-7"
    assert first["fixture_id"] == "r"
    assert stats["requests"][3]["fixture_id"] is None
    assert started - 1 <= first["arrival"] <= time.time()
    arrivals = [r["arrival_mono"] for r in stats["requests"]]
    assert arrivals == sorted(arrivals)
    text = json.dumps(stats)
    assert "ghp_" not in text
    assert "session=abc" not in text


def test_control_routes_are_not_recorded(sandbox: SandboxServer, client: httpx.Client) -> None:
    run = _run_id()
    sandbox.load_fixture(run, "f", [{"status": 200}])
    client.get(sandbox.url(f"/_stats/{run}"))
    client.get(sandbox.url("/_health"), headers={RUN_HEADER: run})
    assert sandbox.stats(run)["count"] == 0


def test_invalid_run_header_is_400(sandbox: SandboxServer, client: httpx.Client) -> None:
    response = client.get(sandbox.url("/rentals/1/availability"), headers={RUN_HEADER: "a b"})
    assert response.status_code == 400


# rate limits ---------------------------------------------------------------------


def _limited(clock: FakeClock, rate_limit: RateLimit, **config: Any) -> SandboxServer:
    return serve_in_thread(SandboxConfig(rate_limit=rate_limit, **config), clock=clock)


def test_github_limit_counts_down_then_429(client: httpx.Client) -> None:
    clock = FakeClock(wall=1_800_000_030.5)  # window [1_800_000_000, 1_800_000_060)
    with _limited(clock, RateLimit(limit=3, window_s=60)) as sandbox:
        url = sandbox.url("/rentals/1/availability")
        remaining = []
        for _ in range(3):
            response = client.get(url)
            assert response.status_code == 200
            assert response.headers["x-ratelimit-limit"] == "3"
            assert response.headers["x-ratelimit-reset"] == "1800000060"
            assert response.headers["x-ratelimit-resource"] == "core"
            remaining.append(int(response.headers["x-ratelimit-remaining"]))
            assert int(response.headers["x-ratelimit-used"]) == 3 - remaining[-1]
        assert remaining == [2, 1, 0]
        limited = client.get(url)
        assert limited.status_code == 429
        assert limited.headers["retry-after"] == "30"
        assert limited.headers["x-ratelimit-remaining"] == "0"
        # another run has its own quota; the next window restores this one
        other = client.get(url, headers={RUN_HEADER: "other"})
        assert other.headers["x-ratelimit-remaining"] == "2"
        clock.advance(30)
        renewed = client.get(url)
        assert renewed.status_code == 200
        assert renewed.headers["x-ratelimit-remaining"] == "2"
        assert renewed.headers["x-ratelimit-reset"] == "1800000120"
        stats = sandbox.stats()
        assert stats["busiest_window"] == {"window_s": 60, "limit": 3, "count": 4}


def test_github_403_has_remaining_zero_and_no_retry_after(client: httpx.Client) -> None:
    clock = FakeClock(wall=1_800_000_000.0)
    with _limited(clock, RateLimit(limit=1, window_s=10, github_403=True)) as sandbox:
        url = sandbox.url("/rentals")
        assert client.get(url).status_code == 200
        limited = client.get(url)
        assert limited.status_code == 403
        assert limited.headers["x-ratelimit-remaining"] == "0"
        assert limited.headers["x-ratelimit-reset"] == "1800000010"
        assert "retry-after" not in limited.headers
        assert limited.json()["message"].startswith("API rate limit exceeded")


def test_ietf_headers(client: httpx.Client) -> None:
    clock = FakeClock(wall=1_800_000_004.2)
    with _limited(clock, RateLimit(limit=2, window_s=10, style="ietf")) as sandbox:
        url = sandbox.url("/rentals/2/availability")
        first = client.get(url)
        assert first.headers["ratelimit"] == '"default";r=1;t=6'
        assert first.headers["ratelimit-policy"] == '"default";q=2;w=10'
        assert "x-ratelimit-remaining" not in first.headers
        assert client.get(url).headers["ratelimit"] == '"default";r=0;t=6'
        limited = client.get(url)
        assert limited.status_code == 429
        assert limited.headers["retry-after"] == "6"
        assert limited.headers["ratelimit"] == '"default";r=0;t=6'


@pytest.mark.parametrize(("style", "retry_after"), [("retry-after", "5"), ("bare", None)])
def test_plain_styles(client: httpx.Client, style: Any, retry_after: str | None) -> None:
    clock = FakeClock(wall=1_800_000_000.0)
    with _limited(clock, RateLimit(limit=1, window_s=5, style=style)) as sandbox:
        url = sandbox.url("/rentals/2/availability")
        ok = client.get(url)
        assert ok.status_code == 200
        assert not any(h.startswith(("x-ratelimit", "ratelimit")) for h in ok.headers)
        limited = client.get(url)
        assert limited.status_code == 429
        assert limited.headers.get("retry-after") == retry_after


def test_style_none_is_no_limit(client: httpx.Client) -> None:
    with _limited(FakeClock(), RateLimit(limit=0, style="none")) as sandbox:
        assert client.get(sandbox.url("/rentals/1/availability")).status_code == 200


@pytest.mark.parametrize("status", [403, 429])
async def test_secondary_limit_on_concurrent_requests(status: Any) -> None:
    config = SandboxConfig(
        max_concurrent=2,
        secondary_status=status,
        secondary_retry_after_s=7,
        rate_limit=RateLimit(limit=100, window_s=60),
        faults=Faults(latency_s=0.5),
    )
    async with serve_in_thread(config) as sandbox:
        limits = httpx.Limits(max_connections=20)
        async with httpx.AsyncClient(trust_env=False, timeout=5.0, limits=limits) as http:
            url = sandbox.url("/rentals/1/availability")
            responses = await asyncio.gather(*(http.get(url) for _ in range(6)))
        statuses = sorted(r.status_code for r in responses)
        assert statuses == [200, 200] + [status] * 4
        rejected = [r for r in responses if r.status_code == status]
        for response in rejected:
            assert response.headers["retry-after"] == "7"
            assert "secondary rate limit" in response.json()["message"]
            assert int(response.headers["x-ratelimit-remaining"]) > 0
        stats = sandbox.stats()
        assert stats["max_in_flight"] >= 3
        assert stats["count"] == 6


# faults ------------------------------------------------------------------------


def _outcomes(sandbox: SandboxServer, run: str, n: int) -> list[str]:
    outcomes: list[str] = []
    with httpx.Client(trust_env=False, timeout=5.0, headers={RUN_HEADER: run}) as http:
        for i in range(n):
            try:
                response = http.get(sandbox.url(f"/rentals/{i % 50 + 1}/availability"))
            except RESET_ERRORS:
                outcomes.append("reset")
                continue
            if response.text == MALFORMED_BODY:
                outcomes.append("malformed")
            else:
                outcomes.append(str(response.status_code))
    return outcomes


def test_seeded_faults_are_reproducible() -> None:
    faults = Faults(seed=7, error_rate=0.3, error_statuses=(502, 503), reset_rate=0.1, malformed_rate=0.1)
    config = SandboxConfig(faults=faults)
    with serve_in_thread(config, clock=FakeClock()) as sandbox:
        first = _outcomes(sandbox, "a", 40)
        other_run = _outcomes(sandbox, "b", 40)
    with serve_in_thread(config, clock=FakeClock()) as sandbox:
        second = _outcomes(sandbox, "a", 40)
        stats = sandbox.stats("a")
    assert first == second
    assert other_run != first
    assert {"200", "502", "503", "reset", "malformed"} <= set(first)
    assert stats["by_status"].get("reset", 0) == first.count("reset")


def test_a_slow_body_arrives_whole_one_byte_at_a_time(client: httpx.Client) -> None:
    clock = FakeClock()
    config = SandboxConfig(faults=Faults(slow_body_rate=1.0, slow_body_s=3.0))
    with serve_in_thread(config, clock=clock) as sandbox:
        with client.stream("GET", sandbox.url("/rentals/1/availability")) as response:
            chunks = list(response.iter_raw())
    body = b"".join(chunks)
    assert response.status_code == 200
    assert json.loads(body)["rental_id"] == 1
    # every byte waited for its share of slow_body_s on the app's clock
    assert len(clock.sleeps) == len(body)
    assert sum(clock.sleeps) == pytest.approx(3.0)


def test_fault_rates_with_slow_bodies_must_not_exceed_one() -> None:
    with pytest.raises(ValueError, match="slow_body_rate"):
        Faults(error_rate=0.5, slow_body_rate=0.6)


def test_outage_windows(client: httpx.Client) -> None:
    clock = FakeClock()
    config = SandboxConfig(faults=Faults(outages=((10.0, 20.0),)))
    with serve_in_thread(config, clock=clock) as sandbox:
        url = sandbox.url("/rentals/1/availability")
        assert client.get(url).status_code == 200
        clock.advance(10)
        assert client.get(url).status_code == 503
        clock.advance(9.9)
        assert client.get(url).status_code == 503
        clock.advance(0.1)
        assert client.get(url).status_code == 200


def test_faulted_reservation_is_not_made(client: httpx.Client) -> None:
    config = SandboxConfig(faults=Faults(error_rate=1.0))
    with serve_in_thread(config, clock=FakeClock()) as sandbox:
        response = client.post(sandbox.url("/rentals/1/reservations"))
        assert response.status_code == 503
        assert sandbox.stats()["reservations"] == 0


# serving -----------------------------------------------------------------------


def test_only_loopback_hosts() -> None:
    with pytest.raises(ValueError, match="loopback"):
        serve_in_thread(host="0.0.0.0").start()
    with pytest.raises(ValueError, match="loopback"):
        serve_in_thread(host="example.com").start()


def test_server_stops_cleanly(client: httpx.Client) -> None:
    server = serve_in_thread()
    with server:
        url = server.url("/_health")
        assert client.get(url).status_code == 200
    with pytest.raises(httpx.TransportError):
        httpx.get(url, timeout=1.0, trust_env=False)
    server.stop()  # a second stop is harmless


def test_preloaded_fixtures_from_an_acceptance_file(tmp_path: Path, client: httpx.Client) -> None:
    fixtures = load_fixture_file(ACCEPTANCE_FILE)
    assert set(fixtures) == {c["id"] for c in ACCEPTANCE_CASES}
    with serve_in_thread(fixtures=fixtures) as sandbox:
        assert client.get(sandbox.url("/fx/default/A17")).status_code == 500
        assert client.get(sandbox.url("/fx/default/A17")).status_code == 200
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"cases": [{"id": "X", "script": [{"status": 1}]}]}))
    with pytest.raises(FixtureError, match="'X'"):
        load_fixture_file(path)


async def test_without_the_reset_extension_the_app_raises() -> None:
    app = create_app()
    app.state.sandbox.load_fixture("r", "f", parse_script([{"reset": True}]))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://sandbox") as http:
        with pytest.raises(ConnectionResetError):
            await http.get("/fx/r/f")


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="window_s"):
        RateLimit(window_s=0)
    with pytest.raises(ValueError, match="style"):
        RateLimit(style="loud")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exceed 1"):
        Faults(error_rate=0.6, reset_rate=0.6)
    with pytest.raises(ValueError, match="5xx"):
        Faults(error_statuses=(429,))
    with pytest.raises(ValueError, match="outage"):
        Faults(outages=((5.0, 1.0),))
    with pytest.raises(ValueError, match="max_concurrent"):
        SandboxConfig(max_concurrent=0)


def _answers_health(base: str) -> bool:
    try:
        return httpx.get(base + "/_health", timeout=0.5, trust_env=False).is_success
    except httpx.TransportError:
        return False


def _reported_base(log: Path, process: subprocess.Popen[bytes], within: float) -> str | None:
    """The address the sandbox reports once bound (it picks its own port), or None."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and process.poll() is None:
        for line in log.read_text().splitlines():
            if line.startswith("sandbox listening on "):
                return line.removeprefix("sandbox listening on ").strip()
        time.sleep(0.05)
    return None


def test_command_line_starts(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    command = [
        sys.executable, "-m", "retrybudget.sandbox", "--port", "0",
        "--limit", "20", "--window", "1", "--style", "github", "--seed", "1",
        "--fixtures", str(ACCEPTANCE_FILE),
    ]  # fmt: skip
    log = tmp_path / "sandbox.log"
    with log.open("w") as output, subprocess.Popen(command, env=env, stdout=output, stderr=output) as process:
        try:
            # the port is the one the sandbox bound and holds (port 0), read from its own line;
            # real clock: a generous 60 s for a loaded machine to start Python
            base = _reported_base(log, process, 60.0)
            assert base is not None, log.read_text()
            assert base.startswith("http://127.0.0.1:"), base
            deadline = time.monotonic() + 60.0
            healthy = False
            while not healthy and time.monotonic() < deadline and process.poll() is None:
                healthy = _answers_health(base)
                if not healthy:
                    time.sleep(0.05)
            assert healthy, log.read_text()
            with httpx.Client(trust_env=False, timeout=5.0) as http:
                assert http.get(base + "/fx/default/A01").status_code == 503
                limited = http.get(base + "/rentals/1/availability")
                assert limited.headers["x-ratelimit-limit"] == "20"
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
    assert f"sandbox listening on {base}" in log.read_text()


def test_command_line_refuses_bad_options(tmp_path: Path) -> None:
    from retrybudget.sandbox.__main__ import build_parser, config_from_args, main

    assert main(["--host", "10.1.2.3", "--port", "0"]) == 2
    assert main(["--port", "0", "--fixtures", str(tmp_path / "missing.json")]) == 2
    args = build_parser().parse_args(["--limit", "5", "--style", "ietf", "--outage", "1:2"])
    config = config_from_args(args)
    assert config.rate_limit == RateLimit(limit=5, window_s=60, style="ietf")
    assert config.faults.outages == ((1.0, 2.0),)
    none = config_from_args(build_parser().parse_args(["--limit", "5", "--style", "none"]))
    assert none.rate_limit is None
