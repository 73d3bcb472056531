"""User profiles: derived in code, loaded from TOML, checked by ``retrybudget check --profile``."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import retrybudget as rb
from retrybudget import Backoff, Jitter, Kind, Policy, Reason, ResponseSeen, WaitReason
from retrybudget._profile_file import profile_from_toml
from retrybudget.core.classify import classify
from retrybudget.core.profiles import BODY_LIMIT, profile_from_mapping
from retrybudget.testing import ScriptedProvider, json_payload
from tests.support.cli import one_line_error, run_cli

NOW = 1_800_000_000.0
OK = {"status": 200, "body": {"available": True}}

ACME = '''
name = "acme"
base = "generic"
transient = [500, 502, 503, 504]
retry_hint = "x-acme-retry"
bucket_header = "x-acme-bucket"

[[delay]]
header = "x-acme-wait-ms"
unit = "ms"

[[delay]]
header = "retry-after"
unit = "seconds"

[[reset]]
header = "x-ratelimit-reset"
unit = "epoch"

[[body]]
pattern = '"code"\\s*:\\s*"SLOW_DOWN"'
kind = "rate_limited"
statuses = [400]
delay = '"wait_s"\\s*:\\s*([0-9.]+)'
'''


def write(tmp_path: Path, text: str, name: str = "acme.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_toml_profile_declares_statuses_delays_hints_body_and_bucket(tmp_path) -> None:
    acme = rb.load_profile(write(tmp_path, ACME))
    assert acme.name == "acme"
    assert acme.delay_headers == (("x-acme-wait-ms", "ms"), ("retry-after", "seconds"))
    seen = classify(acme, ResponseSeen.of(429, {"x-acme-wait-ms": "2500",
                                                 "x-acme-bucket": "search"}), NOW)
    assert seen.hint is not None
    assert (seen.kind, seen.hint.delay, seen.rate.resource) == (Kind.RATE_LIMITED, 2.5, "search")
    assert classify(acme, ResponseSeen.of(500, {"x-acme-retry": "false"}), NOW).kind is \
        Kind.REJECTED
    assert classify(acme, ResponseSeen.of(400, {"x-acme-retry": "true"}), NOW).kind is \
        Kind.TRANSIENT
    body = classify(acme, ResponseSeen.of(400, message='{"code": "SLOW_DOWN", "wait_s": 4}'),
                    NOW)
    assert body.kind is Kind.RATE_LIMITED
    assert body.hint is not None
    assert body.hint.delay == 4.0
    reset = classify(acme, ResponseSeen.of(429, {"x-ratelimit-remaining": "0",
                                                  "x-ratelimit-reset": "130"}), 100.0)
    assert reset.hint is not None
    assert reset.hint.delay == 30.0  # an epoch, as the file says, though it is small


def test_a_toml_profile_drives_a_real_operation(tmp_path, clock) -> None:
    acme = rb.load_profile(write(tmp_path, ACME))
    policy = Policy(profile=acme, validator=json_payload, deadline=60,
                    backoff=Backoff(base=0.5, jitter=Jitter.NONE))
    script = [{"status": 503, "headers": {"x-acme-wait-ms": "1500"}}, OK]
    outcome = rb.Retrier(policy=policy, clock=clock, random=random.Random(0)).call(
        ScriptedProvider(script, clock))
    assert outcome.reason is Reason.OK
    assert [(w.seconds, w.reason, w.source) for w in outcome.waits] == [
        (1.5, WaitReason.RETRY_AFTER, "x-acme-wait-ms")]


def test_a_profile_derived_in_code_equals_the_same_profile_from_toml() -> None:
    in_code = rb.get_profile("generic").derive(
        "acme", transient=frozenset({500, 502, 503, 504}),
        delay_headers=(("x-acme-wait-ms", "ms"),))
    from_toml = profile_from_toml(
        'name = "acme"\ntransient = [500, 502, 503, 504]\n'
        '[[delay]]\nheader = "x-acme-wait-ms"\nunit = "ms"\n')
    assert in_code == from_toml


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nonsense = 1\n", "unknown key(s) nonsense"),
        ("transient = [999]\n", "999 is not an HTTP status code"),
        ('transient = "503"\n', "transient must be a list"),
        ('[[delay]]\nheader = "x"\nunit = "fortnights"\n', "unknown unit 'fortnights'"),
        ('[[body]]\npattern = "("\nkind = "rate_limited"\n', "invalid pattern"),
        ('[[body]]\npattern = "x"\nkind = "maybe"\n', "body signal kind"),
        ('base = "nobody"\n', "unknown provider profile 'nobody'"),
        ("x = [\n", "invalid TOML"),
    ],
)
def test_a_bad_profile_file_is_a_typed_error(tmp_path, text, message) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        rb.load_profile(write(tmp_path, text, "bad.toml"))


def test_a_missing_profile_file_names_itself(tmp_path) -> None:
    with pytest.raises(ValueError, match="no such profile file"):
        rb.load_profile(tmp_path / "absent.toml")


def test_profile_from_mapping_takes_json_shaped_data_too() -> None:
    profile = profile_from_mapping({"base": "stripe", "name": "stripe-eu",
                                    "hosts": ["api.eu.stripe.example"]})
    assert profile.retry_hint_headers == ("stripe-should-retry",)
    assert profile.hosts == ("api.eu.stripe.example",)


def test_check_refuses_a_bad_profile_file_in_one_line(tmp_path) -> None:
    path = write(tmp_path, 'transient = ["x"]\n', "bad.toml")
    line = one_line_error(run_cli("check", "--profile", str(path), "--only", "A01"))
    assert str(path) in line
    assert "transient must be a list of status codes" in line


def test_check_runs_the_cases_with_a_user_profile(tmp_path) -> None:
    path = write(tmp_path, ACME)
    result = run_cli("check", "--profile", str(path), "--only", "A01", "--only", "A07",
                     "--json", timeout=120)
    assert result.returncode == 0, (result.stdout, result.stderr)
    document = json.loads(result.stdout)
    assert document["passed"] is True
    assert document["policy"] == f"profile {path}"
    assert {r["id"] for r in document["results"]} == {"A01", "A07"}


# The mapping's shapes, entry by entry ----------------------------------------------------------

def test_a_delay_entry_without_a_unit_is_in_seconds_and_an_entry_is_checked_whole() -> None:
    profile = profile_from_mapping({"delay": [{"header": "x-wait"}]})
    assert profile.delay_headers == (("x-wait", "seconds"),)
    for entry in ({"header": "x-wait", "unit": "ms", "scale": 2}, {"unit": "ms"}):
        with pytest.raises(ValueError, match="each entry has a header and a unit"):
            profile_from_mapping({"delay": [entry]})


def test_a_body_entry_keeps_every_field_it_names() -> None:
    profile = profile_from_mapping({"body": [{
        "pattern": "slow down", "kind": "delay", "statuses": [429], "delay": r"wait ([0-9]+)",
        "unit": "ms", "methods": ["POST"], "source": "https://example.test/limits"}]})
    assert profile.body_signals == (rb.BodySignal(
        "slow down", "delay", frozenset({429}), r"wait ([0-9]+)", "ms", frozenset({"POST"}),
        "https://example.test/limits"),)


@pytest.mark.parametrize(("entry", "message"), [
    ({"pattern": "x", "kind": "transient", "scale": 2}, "unknown key"),
    ({"pattern": "x"}, "needs a pattern and a kind"),
    ({"kind": "transient"}, "needs a pattern and a kind"),
])
def test_a_body_entry_with_a_key_too_many_or_too_few_is_refused(entry, message) -> None:
    with pytest.raises(ValueError, match=message):
        profile_from_mapping({"body": [entry]})


def test_auto_is_named_auto_falls_back_to_generic_and_unions_what_it_may_pick() -> None:
    acme = rb.get_profile("generic").derive("acme", rate_limited=frozenset({420, 429}),
                                            conditional_rate_limited=frozenset({403, 451}),
                                            transient=frozenset({599}))
    picker = rb.auto({"api.acme.test": acme})
    assert picker.name == "auto"
    assert picker.resolve("https://elsewhere.test/x").name == "generic"
    assert picker.resolve("https://api.acme.test/x") is acme
    assert {420, 429} <= picker.rate_limited
    assert {403, 451} <= picker.conditional_rate_limited
    assert {599, 529, 503} <= picker.transient


def test_a_body_signals_methods_are_upper_case() -> None:
    assert rb.BodySignal("x", "transient", methods=frozenset({"post"})).methods == {"POST"}


def test_the_long_keys_and_the_default_name_of_a_mapping() -> None:
    profile = profile_from_mapping({"delay_headers": [["x-wait", "ms"]],
                                    "reset_units": [["x-reset", "epoch"]]})
    assert (profile.name, profile.delay_headers, profile.reset_units) == (
        "custom", (("x-wait", "ms"),), (("x-reset", "epoch"),))


@pytest.mark.parametrize(("data", "message"), [
    ({"transient": [True]}, "must be a list of status codes"),
    ({"rate_limit_floor": "2"}, "must be a number"),
])
def test_a_mapping_value_of_the_wrong_type_is_refused(data, message) -> None:
    with pytest.raises(ValueError, match=message):
        profile_from_mapping(data)


@pytest.mark.parametrize("url", [
    "https://discord.com/api/v10/channels/1/messages/7?a=1?b=2#f#g",
    "/api/v10/channels/1/messages/7",
    "/api/v10/channels/1/messages/7#f",
])
def test_a_route_ignores_the_host_the_query_and_the_fragment(url) -> None:
    key = rb.get_profile("discord").coordination_key("bot", url, "get")
    assert key == "bot#GET /api/v10/channels/1/messages/{id}"


def test_auto_resolves_a_relative_url_to_generic() -> None:
    assert rb.auto().resolve("/relative/path").name == "generic"


def test_a_profiles_statuses_are_100_to_599_and_its_name_is_not_empty() -> None:
    generic = rb.get_profile("generic")
    assert generic.derive("x", ok=frozenset({100, 599})).ok == {100, 599}
    for bad in (99, 600):
        with pytest.raises(ValueError, match="not an HTTP status"):
            generic.derive("x", ok=frozenset({bad}))
    with pytest.raises(ValueError, match="non-empty name"):
        generic.derive("")


def test_a_profiles_waits_are_bounded_to_an_hour_and_its_longest_wait_is_kept() -> None:
    generic = rb.get_profile("generic")
    assert generic.derive("x", reset_slack=3600).reset_slack == 3600
    with pytest.raises(ValueError, match="between 0 and 3600"):
        generic.derive("x", reset_slack=3600.5)
    assert generic.derive("x", longest_wait=30).longest_wait == 30.0


def test_with_ok_adds_to_the_profile_and_to_every_profile_auto_may_pick() -> None:
    picker = rb.auto().with_ok([304])
    assert 304 in picker.ok
    assert 304 in picker.resolve("https://api.github.com/user").ok
    assert rb.get_profile("github").with_ok([304]).ok == rb.get_profile("github").ok | {304}


def test_the_bodies_a_profile_reads() -> None:
    generic = rb.get_profile("generic")
    openai = rb.get_profile("openai")
    assert set(range(400, 600)) <= openai.body_statuses()  # its quota messages: any error
    assert {399, 600}.isdisjoint(openai.body_statuses())
    assert openai.body_statuses() <= rb.auto().body_statuses()
    secondary = generic.derive("x", secondary_patterns=("slow down",))
    assert {429, 403} <= secondary.body_statuses()
    signalled = generic.derive("x", body_signals=(
        rb.BodySignal("x", "transient", frozenset({200, 300, 429})),))
    assert signalled.body_statuses() == {300, 429}  # a 2xx body: reads_body()


def test_the_headers_a_profile_reads_besides_the_families() -> None:
    hinted = rb.get_profile("generic").derive("x", retry_hint_headers=("x-hint",))
    assert "x-hint" in hinted.header_names()
    assert "x-should-retry" in rb.auto().header_names()  # OpenAI's, through auto()


def test_a_coordination_key_is_bounded() -> None:
    slack = rb.get_profile("slack")
    assert slack.coordination_key("k", "https://slack.com/api/" + "a" * 150) == "k#" + "a" * 100
    discord = rb.get_profile("discord")
    long_url = "https://discord.com/api/" + "/".join(["messages"] * 40)
    for method in ("GET", None):
        key = discord.coordination_key("k", long_url, method)
        assert len(key) == 300
        assert key.startswith("k#GET /api/messages/" if method else "k#/api/messages/")


def test_which_bodies_are_read() -> None:
    generic = rb.get_profile("generic")
    assert (generic.reads_body(200), generic.reads_body(404)) == (False, False)
    assert rb.get_profile("openai").reads_body(500) is True
    # a 300 is no 2xx: read when its status is one a pattern speaks of
    odd = generic.derive("x", rate_limited=frozenset({300, 429}), secondary_patterns=("slow",))
    assert odd.reads_body(300) is True
    # GitHub's GraphQL rate limit in a 200: POST only, and through auto() too
    github = rb.get_profile("github")
    assert (github.reads_body(200, "POST"), github.reads_body(200, "GET")) == (True, False)
    assert rb.auto().reads_body(200, "POST") is True
    anymethod = generic.derive("x", body_signals=(rb.BodySignal("x", "transient",
                                                                frozenset({200})),))
    assert anymethod.reads_body(200, "GET") is True


@pytest.mark.parametrize(("field", "accepted", "refused"), [
    ("rate_limit_multiplier", (1.0, 10.0), (0.99, 10.01)),
    ("body_limit", (0, BODY_LIMIT), (-1, BODY_LIMIT + 1, True)),
    ("longest_wait", (0.5, 7 * 24 * 3600.0), (0.0, 7 * 24 * 3600.0 + 1)),
    ("write_pacing", (0.0, 3600.0), (-0.5, 3600.5)),
])
def test_a_profiles_numbers_are_checked_at_their_edges(field, accepted, refused) -> None:
    generic = rb.get_profile("generic")
    for value in accepted:
        assert getattr(generic.derive("x", **{field: value}), field) == value
    for value in refused:
        with pytest.raises(ValueError, match=field):
            generic.derive("x", **{field: value})


def test_a_profiles_names_and_clock_are_normalised() -> None:
    profile = rb.get_profile("generic").derive(
        "x", idempotency_header=" Idempotency-Key ", sources=["https://example.test"],
        provider_clock=False)
    assert (profile.idempotency_header, profile.sources) == (
        "Idempotency-Key", ("https://example.test",))
    assert profile.header_rules.provider_clock is False
    assert rb.get_profile("generic").derive("y", provider_clock=True).header_rules.provider_clock


@pytest.mark.parametrize("url", [
    "https://discord.com/api/v10/channels/1/messages?limit=5",
    "https://discord.com/api/v10/channels/1/messages?a=1?b=2",
    "https://discord.com/api/v10/channels/1/messages#top",
    "https://discord.com/api/v10/channels/1/messages#a#b",
])
def test_a_routes_last_word_is_kept_without_its_query_or_fragment(url) -> None:
    key = rb.get_profile("discord").coordination_key("bot", url, "GET")
    assert key == "bot#GET /api/v10/channels/1/messages"


@pytest.mark.parametrize("entry", [["x-wait", "ms", "extra"], "ab"])
def test_a_delay_entry_that_is_no_pair_is_refused(entry) -> None:
    with pytest.raises(ValueError, match="each entry is a"):
        profile_from_mapping({"delay": [entry]})


def test_a_profile_file_names_the_sdk_headers_auto_picks_it_by(tmp_path) -> None:
    acme = rb.load_profile(write(tmp_path, 'name = "acme"\nhosts = ["api.acme.example"]\n'
                                           'sdk_headers = ["X-Acme-SDK"]\nsdk_paths = ["^/v2/"]\n'))
    assert (acme.sdk_headers, acme.sdk_paths) == (("x-acme-sdk",), ("^/v2/",))
    auto = rb.auto({"api.acme.example": acme})
    assert auto.resolve("http://gateway.internal/v2/things", {"x-acme-sdk": "1.0"}) is acme
    assert auto.resolve("http://gateway.internal/v1/things", {"x-acme-sdk": "1.0"}).name == "generic"
    with pytest.raises(ValueError, match="sdk_paths"):
        rb.load_profile(write(tmp_path, 'name = "acme"\nsdk_paths = ["("]\n', "bad.toml"))
