"""The acceptance-fixture format is defined once: the in-process provider and the HTTP
sandbox parse the same scripts, resolve the same placeholders and judge JSON payloads with
the library's one validator."""

from __future__ import annotations

import email.utils
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrybudget import FakeClock
from retrybudget.integrations import json_object
from retrybudget.sandbox import FixtureError as SandboxFixtureError
from retrybudget.sandbox import parse_script as sandbox_parse_script
from retrybudget.sandbox import resolve_placeholders, serve_in_thread
from retrybudget.testing import (
    FixtureError,
    ScriptedProvider,
    ScriptedResponse,
    expand_placeholders,
    json_payload,
    parse_script,
)

WALL = 1_800_000_000.75


def test_the_sandbox_and_the_in_process_provider_share_one_parser() -> None:
    assert sandbox_parse_script is parse_script
    assert SandboxFixtureError is FixtureError


@pytest.mark.parametrize(
    "script",
    [
        [],
        [{"status": 99}],
        [{"status": 200, "surprise": 1}],
        [{"status": 200, "body": {}, "body_text": "x"}],
        [{"reset": True, "status": 200}],
        [{"delay_s": -1}],
        [{"headers": {"X-Bad": "a\r\nb"}}],
    ],
)
def test_both_providers_refuse_a_malformed_script(script: list[dict[str, Any]]) -> None:
    with pytest.raises(FixtureError):
        ScriptedProvider(script, FakeClock())
    with pytest.raises(FixtureError):
        sandbox_parse_script(script)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("{epoch}", "1800000000"),
        ("{epoch+2}", "1800000002"),
        ("{epoch-5}", "1799999995"),
        ("{epoch+-5}", "1799999995"),
        ("{epoch+1.5}", "1800000001"),
        ("{httpdate+2}", email.utils.formatdate(1_800_000_002, usegmt=True)),
        ("at {epoch+1} or {nonsense+1}", "at 1800000001 or {nonsense+1}"),
        ("{epoch+1234567890123}", "{epoch+1234567890123}"),  # over 12 digits: kept as written
    ],
)
def test_one_placeholder_grammar(value: str, expected: str) -> None:
    assert expand_placeholders(value, WALL) == expected
    assert resolve_placeholders(value, WALL) == expected


@given(st.text(alphabet="{}epochttpdate+-.0123456789 x", max_size=30),
       st.floats(min_value=0, max_value=4e9))
def test_the_sandbox_resolves_placeholders_as_the_in_process_provider(value: str, wall: float) -> None:
    assert resolve_placeholders(value, wall) == expand_placeholders(value, wall)


def test_the_in_process_provider_serves_the_resolved_placeholders() -> None:
    clock = FakeClock(wall=WALL)
    provider = ScriptedProvider([{"status": 429, "headers": {"X-Reset": "{epoch+-5}"}}], clock)
    assert provider().headers == {"X-Reset": "1799999995"}


@pytest.mark.parametrize(
    ("text", "ok"),
    [('{"available": true}', True), ("[1, 2]", False), ("not json", False), ("", False)],
)
def test_json_payload_is_the_librarys_json_validator(text: str, ok: bool) -> None:
    response = ScriptedResponse(200, {}, text)
    for validate in (json_payload, json_object()):
        if ok:
            assert validate(response) == {"available": True}
        else:
            with pytest.raises(ValueError):
                validate(response)


def test_a_step_answers_the_same_body_in_process_and_over_http() -> None:
    script: list[dict[str, Any]] = [
        {"status": 200},  # no body: an empty body on both providers
        {"status": 200, "body": {"available": True, "name": "é"}},
        {"status": 200, "body": None},
        {"status": 503, "body_text": "<html>busy</html>"},
    ]
    provider = ScriptedProvider(script, FakeClock())
    in_process = [provider().text for _ in script]
    with serve_in_thread() as sandbox, httpx.Client() as client:
        url = sandbox.load_fixture("bodies", "f", script)
        over_http = [client.get(url).text for _ in script]
    assert in_process == over_http == ["", '{"available":true,"name":"é"}', "null",
                                       "<html>busy</html>"]
