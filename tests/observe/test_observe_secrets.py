"""Redaction, and the property that no secret reaches a record, a log line, an error or a repr."""

from __future__ import annotations

import json
import logging
import random
import string
import tempfile
import traceback
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrybudget import CallInterpreter, FakeClock, Policy, Retrier, RetryBudgetError
from retrybudget.core.actions import Attempt, AttemptResult, RequestInfo
from retrybudget.observe import (
    REDACTED,
    SECRET_PARAMS,
    AuditHook,
    CallbackAuditSink,
    Hook,
    JsonlAuditSink,
    LoggingAuditSink,
    StatsAggregator,
    audit_record,
    is_secret_header,
    operation_stats,
    redact_headers,
    redact_text,
    redact_url,
    review_report,
    scrub,
)
from retrybudget.testing import ScriptedResponse, json_payload

# Strategies ---------------------------------------------------------------------------------

ALPHABET = string.ascii_letters + string.digits


@st.composite
def secrets(draw: st.DrawFn, prefixes: tuple[str, ...] = ("", "ghp_", "sk_live_", "xoxb-",
                                                         "tok-")) -> str:
    """A credential: random, long enough never to occur in the library's own output."""
    prefix = draw(st.sampled_from(prefixes))
    body = draw(st.text(ALPHABET, min_size=16, max_size=40).filter(_credential_like))
    return prefix + body


def _credential_like(text: str) -> bool:
    """Mixed case and digits, like a real token: never a word of the library's own output
    (class names carry no digits; operation ids and hex carry no capitals)."""
    return (len(set(text)) >= 6 and sum(c.isdigit() for c in text) >= 2
            and any(c.isupper() for c in text) and any(c.islower() for c in text))


STATUSES = st.sampled_from([200, 401, 403, 407, 429, 500, 502, 503])

CREDENTIAL_WORDS = [("access", "token"), ("api", "token"), ("auth", "token"),
                    ("client", "secret"), ("refresh", "token"), ("session", "token"),
                    ("private", "key"), ("authorization",), ("api", "key"), ("id", "token")]


def _spell(words: tuple[str, ...], style: str) -> str:
    if style == "camel":
        return words[0] + "".join(word.title() for word in words[1:])
    if style == "pascal":
        return "".join(word.title() for word in words)
    if style == "kebab":
        return "-".join(words)
    if style == "upper":
        return "_".join(words).upper()
    return "_".join(words)


SPELLINGS = sorted({_spell(words, style) for words in CREDENTIAL_WORDS
                    for style in ("camel", "pascal", "kebab", "snake", "upper")})
"""Every credential name of the issue, in every spelling: accessToken, Access-Token…"""

credential_names = st.sampled_from(SPELLINGS)
plain_params = st.sampled_from(["page", "per_page", "q", "sort", "cursor", "limit", "lang"])


# Unit tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [
    "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Api-Key", "api-key",
    "apikey", "X-Auth-Token", "X-Client-Secret", "X-Signing-Key", "private-token",
    "X-Amz-Security-Token", "x_api_key",
])
def test_secret_headers(name: str) -> None:
    assert is_secret_header(name)
    assert redact_headers({name: "v", "Accept": "json"}) == [(name, REDACTED), ("Accept", "json")]


@pytest.mark.parametrize("name", ["Content-Type", "Retry-After", "X-RateLimit-Remaining",
                                  "Accept", "User-Agent"])
def test_ordinary_headers_are_kept(name: str) -> None:
    assert not is_secret_header(name)


@pytest.mark.parametrize("param", sorted(SECRET_PARAMS | {"X-My-Token", "private_key"}))
def test_token_like_query_parameters(param: str) -> None:
    url = f"https://api.example.com/v1/items?page=2&{param}=s3cr3tvalue&q=a%20b"
    assert redact_url(url) == f"https://api.example.com/v1/items?page=2&{param}={REDACTED}&q=a%20b"


@pytest.mark.parametrize(("url", "expected"), [
    ("https://user:pw@h.example/p", f"https://{REDACTED}@h.example/p"),
    ("https://user@h.example", f"https://{REDACTED}@h.example"),
    ("user:pw@h.example/p", f"{REDACTED}@h.example/p"),
    ("https://h.example/p?a=1;token=t", f"https://h.example/p?a=1;token={REDACTED}"),
    ("https://h.example/p?ACCESS_TOKEN=t", f"https://h.example/p?ACCESS_TOKEN={REDACTED}"),
    ("https://h.example/p?acc%65ss_token=t", f"https://h.example/p?acc%65ss_token={REDACTED}"),
    ("https://h.example/cb#access_token=t&x=1", f"https://h.example/cb#{REDACTED}"),
    ("http://[::1/x?token=t&page=2", f"http://[::1/x?token={REDACTED}&page=2"),
    (f"https://{REDACTED}@h.example/p?page=2", f"https://{REDACTED}@h.example/p?page=2"),
    ("https://h.example/p?key", "https://h.example/p?key"),
])
def test_urls(url: str, expected: str) -> None:
    assert redact_url(url) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("Authorization: Bearer abc.def", f"Authorization: {REDACTED}"),
    ("cookie: a=b; c=d", f"cookie: {REDACTED}"),
    ("got bearer abc123 back", f"got bearer {REDACTED} back"),
    ("Basic dXNlcjpwYXNzd29yZA==", f"Basic {REDACTED}"),
    ('{"token": "abc", "n": 1}', f'{{"token": "{REDACTED}", "n": 1}}'),
    ("see https://me:pw@h/?api_key=z&page=2&code=7",
     f"see https://{REDACTED}@h/?api_key={REDACTED}&page=2&code={REDACTED}"),
    ("password: hunter2 ok", f"password: {REDACTED} ok"),
    ("ghp_abcdefghijklmnop1234 sk-abcdefghijklmnopqrst", f"{REDACTED} {REDACTED}"),
    ("AKIAABCDEFGHIJKLMNOP", REDACTED),
    ("status code: 503; waiting 1.000s", "status code: 503; waiting 1.000s"),
    ("retry-after+x-ratelimit-reset: retry-after says 1s", "retry-after+x-ratelimit-reset: "
                                                          "retry-after says 1s"),
])
def test_text(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_known_secrets_are_removed_raw_and_percent_encoded() -> None:
    secret = "p@ss word/1"
    text = f"a {secret} b p%40ss%20word%2F1 c p%40ss+word%2F1"
    assert redact_text(text, [secret]) == f"a {REDACTED} b {REDACTED} c {REDACTED}"
    assert scrub({"k": [secret, (1, f"x{secret}")]}, [secret]) == {
        "k": [REDACTED, [1, f"x{REDACTED}"]]}


@pytest.mark.parametrize("name", SPELLINGS)
def test_credential_names_are_read_by_meaning_in_every_channel(name: str) -> None:
    value = "Zq81xYw0Lm55Tt"
    assert is_secret_header(name)
    assert redact_headers({name: value}) == [(name, REDACTED)]
    url = f"https://api.example.com/v1?page=2&{name}={value}"
    assert redact_url(url) == f"https://api.example.com/v1?page=2&{name}={REDACTED}"
    assert redact_text(f"{name}={value}&page=2") == f"{name}={REDACTED}&page=2"  # a form
    for text in (json.dumps({"message": "denied", name: value, "page": 2}),  # a JSON body
                 f"{name}: {value}"):  # a header echoed in a message
        assert value not in redact_text(text), text


@pytest.mark.parametrize("name", ["page", "per_page", "keyword", "monkey", "X-RateLimit-Reset",
                                  "Retry-After", "Content-Type", "tokens_used"])
def test_ordinary_names_are_not_credentials(name: str) -> None:
    assert not is_secret_header(name)
    assert redact_url(f"https://h.example/?{name}=7") == f"https://h.example/?{name}=7"


urls = st.builds(
    lambda scheme, user, host, path, params, fragment: (
        f"{scheme}{user}{host}{path}" + ("?" + "&".join(f"{k}={v}" for k, v in params)
                                         if params else "") + fragment),
    st.sampled_from(["https://", "http://", ""]),
    st.sampled_from(["", "user@", "user:pw@", f"{REDACTED}@", "a:b:c@"]),
    st.sampled_from(["h.example", "h.example:8443", "[::1]", "[::1"]),
    st.sampled_from(["", "/", "/v1/items", "/users/@me", "/a;b"]),
    st.lists(st.tuples(credential_names | plain_params | st.sampled_from(sorted(SECRET_PARAMS)),
                       st.text(ALPHABET, min_size=1, max_size=12)), max_size=4),
    st.sampled_from(["", "#top", "#access_token=x", f"#{REDACTED}"]),
)


@given(urls | st.text())
def test_redact_url_is_idempotent(url: str) -> None:
    once = redact_url(url)
    assert redact_url(once) == once


@given(host=st.sampled_from(["https://h.example", f"https://{REDACTED}@h.example",
                             "https://u:p@h.example"]),
       plain=st.lists(st.tuples(plain_params, st.text(ALPHABET, min_size=1, max_size=8)),
                      min_size=1, max_size=3),
       secret_params=st.lists(st.tuples(credential_names, secrets()), min_size=1, max_size=3))
def test_no_generated_secret_survives_and_plain_parameters_do(
    host: str, plain: list[tuple[str, str]], secret_params: list[tuple[str, str]]
) -> None:
    pairs = [*plain, *secret_params]
    url = f"{host}/v1?" + "&".join(f"{k}={v}" for k, v in pairs)
    redacted = redact_url(url)
    for name, value in plain:
        assert f"{name}={value}" in redacted
    for _, value in secret_params:
        assert value not in redacted
        assert value not in redact_text(f"GET {url} failed")
    assert redact_url(redacted) == redacted


@given(st.text())
def test_redaction_never_raises_and_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once
    redact_url(text)


@given(secrets(), st.text(max_size=30), st.text(max_size=30))
def test_a_registered_secret_never_survives(secret: str, before: str, after: str) -> None:
    assert secret not in redact_text(before + secret + after, [secret])


# The property -------------------------------------------------------------------------------


class Capture(logging.Handler):
    """Every log line, formatted, with its structured extra."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(logging.Formatter().format(record))
        self.lines.append(json.dumps(getattr(record, "audit", None)))


class QuotingHook(Hook):
    """A hook whose error quotes the Authorization header it was handed."""

    def __init__(self, secret: str) -> None:
        self.secret = secret

    def on_outcome(self, outcome: Any, request: Any) -> None:
        raise RuntimeError(f"could not forward; Authorization: Bearer {self.secret}")


def run_scenario(secret: str, status: int, param: str, raise_error: bool,
                 sink_secrets: tuple[str, ...], echo_evidence: bool) -> tuple[Any, list[str]]:
    """One operation whose URL, headers, provider answers and errors all carry the secret.

    Returns the outcome and every text the library produced: the JSONL file, log lines,
    callback records, stats, the report, the outcome's repr (unless the secret was echoed
    in rate-limit evidence, which the outcome keeps) and the error's text and repr.
    """
    raw_url = f"https://svc:{secret}@api.example.com/v1/items?{param}={secret}&page=2"
    sent = {"Authorization": f"Bearer {secret}", "X-Api-Key": secret, "Cookie": f"s={secret}"}
    echoed = {**sent, "Set-Cookie": f"session={secret}", "WWW-Authenticate": f"Bearer {secret}",
              "Retry-After": "1", "X-Request-Token": secret}
    if echo_evidence:
        echoed["x-ratelimit-resource"] = secret
    body = json.dumps({"message": f"bad credentials {secret}", "echo": sent,
                       param: secret, "form": f"{param}={secret}&page=2"})

    def provider() -> ScriptedResponse:
        if raise_error:
            raise ConnectionError(f"cannot reach {raw_url} with {sent}")
        return ScriptedResponse(status, echoed, body if status >= 400 else f"<p>{secret}</p>")

    clock = FakeClock()
    interpreter = CallInterpreter(validator=json_payload)

    def perform(attempt: Attempt) -> AttemptResult:
        try:
            value = provider()
        except ConnectionError as exc:
            return AttemptResult(interpreter.error(exc), None, exc)
        return AttemptResult(interpreter.value(value), value, None)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "audit.jsonl"
        got: list[dict[str, Any]] = []
        sinks = (JsonlAuditSink(path, secrets=sink_secrets),
                 LoggingAuditSink(level=logging.DEBUG, secrets=sink_secrets),
                 CallbackAuditSink(got.append, secrets=sink_secrets))
        stats = StatsAggregator()
        hooks = (AuditHook(*sinks, policy=Policy(), clock=clock), stats, QuotingHook(secret))
        capture = Capture()
        root = logging.getLogger()
        old_level = root.level
        root.addHandler(capture)
        root.setLevel(logging.DEBUG)
        try:
            request = RequestInfo(method="GET", key="api.example.com", url=raw_url, job_id="J1")
            retrier = Retrier(policy=Policy(), clock=clock, hooks=hooks, method="GET",
                              random=random.Random(0))
            outcome = retrier.run(perform, request)
        finally:
            root.removeHandler(capture)
            root.setLevel(old_level)
        sinks[0].close()
        texts = [path.read_text("utf-8"), *capture.lines, json.dumps(got),
                 json.dumps(stats.totals()), json.dumps(operation_stats(outcome, request)),
                 json.dumps(review_report(got))]
    if not echo_evidence:
        texts.append(repr(outcome))
    try:
        outcome.unwrap()
    except RetryBudgetError as err:
        texts += [str(err), repr(err), *traceback.format_exception_only(type(err), err)]
    return outcome, texts


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(secret=secrets(), status=STATUSES,
       param=st.sampled_from(sorted(SECRET_PARAMS)) | credential_names,
       raise_error=st.booleans())
def test_no_secret_reaches_records_logs_errors_or_reprs(
    secret: str, status: int, param: str, raise_error: bool
) -> None:
    # nothing registered: structure and patterns alone keep every secret out
    outcome, texts = run_scenario(secret, status, param, raise_error, (), echo_evidence=False)
    assert outcome.attempts >= 1
    for text in texts:
        assert secret not in text


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=25)
@given(secret=secrets(prefixes=("", "tok-")), status=st.sampled_from([429, 503]))
def test_a_secret_echoed_in_rate_limit_headers_is_scrubbed_once_registered(
    secret: str, status: int
) -> None:
    outcome, texts = run_scenario(secret, status, "token", False, (secret,), echo_evidence=True)
    assert secret in json.dumps(audit_record(outcome))  # the evidence holds it before the sinks
    for text in texts:
        assert secret not in text
