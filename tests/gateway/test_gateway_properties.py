"""Generated provider scripts against the live gateway: nothing unconfirmed ever leaks out.

Each example loads a script of provider answers (statuses with headers and bodies, resets)
into the sandbox, sends one request through the real gateway, and checks the answer
against the script and what the provider actually saw:

- a lookup reports ``available`` only when the provider's last answer confirmed exactly
  that value for that rental; otherwise no ``available`` field anywhere, and nothing stored;
- a reservation is answered 201 and committed only when the provider's one answer
  confirmed it; a write is sent at most once;
- the counters equal the operation's audited attempts: every request the provider saw is
  one of them, and one it did not see got no answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from retrybudget.gateway._store import key_digest
from retrybudget.sandbox import serve_in_thread as serve_sandbox
from tests.support.gateway import Scripted, keys_named, unique

RID = "__RID__"
"""Stands for the example's rental id in generated bodies."""

EXAMPLES = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

retry_after = st.sampled_from(["0", "1", "30", "3600", "-5", "soon", "{httpdate+60}", ""])
headers = st.dictionaries(st.sampled_from(["Retry-After", "X-RateLimit-Remaining"]),
                          retry_after, max_size=2)
rental_ids = st.sampled_from([RID, RID, RID, "someone-else", 7])
stamps = st.one_of(st.none(), st.integers(0, 2_000_000_000), st.floats(allow_nan=False, allow_infinity=False),
                   st.text(max_size=3), st.booleans())
json_values = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5))


def _body(fields: dict[str, Any], *optional: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(fields, optional=dict.fromkeys(optional, json_values))


availability_bodies = st.one_of(
    st.fixed_dictionaries({"rental_id": rental_ids, "available": st.booleans()},
                          optional={"checked_at": stamps}),
    _body({"rental_id": rental_ids}, "available"),
    _body({"available": json_values}),
    st.lists(st.booleans(), max_size=2),
)
reservation_bodies = st.one_of(
    st.fixed_dictionaries({"rental_id": rental_ids, "reserved": st.booleans()},
                          optional={"reservation_id": st.one_of(st.text(max_size=6), st.none())}),
    _body({"rental_id": rental_ids}, "reserved", "reservation_id"),
)


def steps(bodies: st.SearchStrategy[Any], valid: st.SearchStrategy[Any],
          ok: list[int]) -> st.SearchStrategy[dict[str, Any]]:
    """One provider answer: a 2xx with a valid or a generated body, any other status, a reset."""
    confirmed = st.fixed_dictionaries({"status": st.sampled_from(ok), "body": valid})
    answers = st.fixed_dictionaries(
        {"status": st.sampled_from(ok)},
        optional={"body": bodies, "headers": headers})
    text = st.fixed_dictionaries({"status": st.sampled_from(ok),
                                  "body_text": st.sampled_from(["<html>down</html>", "true", "{"])})
    others = st.fixed_dictionaries(
        {"status": st.sampled_from([400, 401, 403, 404, 409, 429, 500, 502, 503, 504])},
        optional={"headers": headers, "body": st.just({"message": "no"})})
    empty = st.just({"status": 204})
    return st.one_of(confirmed, confirmed, answers, text, others, others, empty,
                     st.just({"reset": True}))


lookup_steps = steps(
    availability_bodies,
    st.fixed_dictionaries({"rental_id": st.just(RID), "available": st.booleans()},
                          optional={"checked_at": st.integers(0, 2_000_000_000)}),
    [200, 201])
reservation_steps = steps(
    reservation_bodies,
    st.fixed_dictionaries({"rental_id": st.just(RID), "reserved": st.just(True),
                           "reservation_id": st.text("abc123_", min_size=1, max_size=8)}),
    [200, 201])


def materialise(script: list[dict[str, Any]], rental_id: str) -> list[dict[str, Any]]:
    """The script with the example's rental id in place of :data:`RID`."""
    loaded: list[dict[str, Any]] = json.loads(json.dumps(script).replace(f'"{RID}"',
                                                                        json.dumps(rental_id)))
    return loaded


def confirms_availability(step: dict[str, Any], rental_id: str) -> bool | None:
    """The availability ``step`` confirms for ``rental_id``, or None when it confirms nothing."""
    body = step.get("body")
    if step.get("reset") or not 200 <= step.get("status", 200) < 300 or not isinstance(body, dict):
        return None
    stamp = body.get("checked_at")
    valid_stamp = stamp is None or (isinstance(stamp, (int, float)) and not isinstance(stamp, bool))
    if str(body.get("rental_id")) != rental_id or not valid_stamp:
        return None
    value = body.get("available")
    return value if isinstance(value, bool) else None


def confirms_reservation(step: dict[str, Any], rental_id: str) -> bool:
    """Whether ``step`` confirms a reservation of ``rental_id``."""
    body = step.get("body")
    if step.get("reset") or not 200 <= step.get("status", 200) < 300 or not isinstance(body, dict):
        return False
    reservation_id = body.get("reservation_id")
    return (str(body.get("rental_id")) == rental_id and body.get("reserved") is True
            and isinstance(reservation_id, str) and 0 < len(reservation_id) <= 200)


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scripted]:
    directory = tmp_path_factory.mktemp("props")
    with serve_sandbox() as sandbox, Scripted(sandbox, directory,
                                              audit_path=directory / "audit.jsonl") as gw:
        yield gw


def attempts_seen(scripted: Scripted, body: dict[str, Any],
                  response: httpx.Response) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The requests the provider saw and the operation's audited attempts, checked against
    each other and the counters.

    Every request the provider saw is one of the attempts; an attempt it did not see got no
    answer (a connection that failed on the way, such as a pooled one the provider had
    just closed, is an attempt the provider never saw, and the counters still count it).
    """
    seen = scripted.requests()
    counted = int(response.headers["X-Retrybudget-Attempts"])
    if body["operation_id"] is None:  # answered without a provider operation
        assert body["attempts"] == counted == len(seen) == 0
        return seen, []
    history: list[dict[str, Any]] = scripted.audited(body["operation_id"])["history"]
    answered = [attempt for attempt in history if attempt["status"] is not None]
    assert body["attempts"] == counted == len(history)
    assert len(answered) <= len(seen) <= len(history), (seen, history)
    return seen, history


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    with httpx.Client(trust_env=False, timeout=10.0) as http:
        yield http


@EXAMPLES
@given(script=st.lists(lookup_steps, min_size=1, max_size=4))
def test_a_lookup_never_reports_availability_the_provider_did_not_confirm(
    scripted: Scripted, client: httpx.Client, script: list[dict[str, Any]]
) -> None:
    rental = unique("p")
    scripted.script(materialise(script, rental))
    response = client.get(scripted.url(f"/rentals/{rental}/availability"))
    body = response.json()
    event(f"{response.status_code} {body['outcome']}")
    seen, history = attempts_seen(scripted, body, response)
    assert body["logical_lookups"] == 1
    assert len(history) <= 3
    stored = scripted.query("SELECT available FROM rentals WHERE rental_id = ?", rental)
    if response.status_code == 200:
        answered = scripted.steps[min(len(seen), len(scripted.steps)) - 1]
        confirmed = confirms_availability(answered, rental)
        assert confirmed is not None, (answered, body)
        assert body["available"] is confirmed
        assert stored == [(int(confirmed),)]
    else:
        assert response.status_code in (404, 502, 503)
        assert keys_named(body, "available") == 0
        assert body["stored"] is None
        assert stored == []


@EXAMPLES
@given(script=st.lists(reservation_steps, min_size=1, max_size=3))
def test_a_reservation_is_committed_only_after_the_provider_confirmed_it(
    scripted: Scripted, client: httpx.Client, script: list[dict[str, Any]]
) -> None:
    rental, key = unique("p"), unique("key")
    scripted.script(materialise(script, rental))
    url = scripted.url(f"/rentals/{rental}/reservations")
    response = client.post(url, headers={"Idempotency-Key": key})
    body = response.json()
    event(f"{response.status_code} {body['outcome']}")
    seen, history = attempts_seen(scripted, body, response)
    rows = scripted.query("SELECT state, reservation_id FROM reservations WHERE idempotency_key = ?",
                          key_digest(key))
    if body.get("shed") is not None:  # the door answered alone: a loaded loop ate the budget
        assert (response.status_code, body["code"], body["attempts"]) == (
            503, "gateway_overloaded", 0)
        assert seen == []
        assert body["committed"] is False
        assert rows == []  # nothing claimed, nothing sent
        return
    # sent at most once: never replayed automatically (only a connection that never
    # reached the provider may be tried again)
    assert len(seen) <= len([attempt for attempt in history if attempt["sent"]]) <= 1
    assert [request["idempotency_key"] for request in seen] in ([], [key])
    if seen and confirms_reservation(scripted.steps[0], rental):
        assert response.status_code == 201
        assert body["reserved"] is True
        assert rows == [("confirmed", scripted.steps[0]["body"]["reservation_id"])]
        replay = client.post(url, headers={"Idempotency-Key": key})
        assert replay.json() == {**body, "operation_id": None, "attempts": 0, "waits": 0,
                                 "waited_s": 0.0, "outcome": None, "replayed": True}
        assert len(scripted.requests()) == 1
    else:
        assert response.status_code in (404, 409, 502, 503)
        assert keys_named(body, "reserved") == 0
        assert body["committed"] is False
        assert rows == [("unconfirmed", None)]


def test_examples_run_against_one_live_gateway(scripted: Scripted) -> None:
    assert Path(scripted.config.db_path).exists()
    assert scripted.server.base_url.startswith("http://127.0.0.1:")
