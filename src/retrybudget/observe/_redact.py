"""Redaction: no secret ever reaches an audit record, a log line, an error or a repr.

Secrets are request headers that carry credentials (``Authorization``,
``Proxy-Authorization``, ``Cookie``/``Set-Cookie``, API-key-like names), token-like
query parameters, and userinfo in URLs. Those are removed by *structure*
(:func:`redact_headers`, :func:`redact_url`), and names are read by *meaning*: case and
separators do not matter (``accessToken``, ``access-token``, ``ACCESS_TOKEN`` and
``AccessToken`` are one name), and a name whose last word is ``token``, ``secret``, ``key``,
``password``, ``signature`` or ``credential`` is a credential's (``privateKey``,
``x-session-token``). :func:`redact_text` is the last line of
defence that every audit sink applies to every string it writes: it removes the secret
values the application registered, and text that looks like a credential (bearer and
basic credentials, ``token=…`` pairs, userinfo, well-known token formats).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import quote, quote_plus, unquote_plus

__all__ = [
    "REDACTED",
    "SECRET_HEADERS",
    "SECRET_PARAMS",
    "is_secret_header",
    "is_secret_param",
    "redact_headers",
    "redact_text",
    "redact_url",
    "scrub",
]

REDACTED = "[REDACTED]"
"""What stands where a secret was."""

SECRET_HEADERS = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key",
    "apikey", "x-apikey", "x-auth-token", "x-csrf-token", "x-amz-security-token", "token",
    "secret", "password",
})
"""Header names that always carry secrets."""

SECRET_PARAMS = frozenset({
    "access_token", "token", "key", "api_key", "apikey", "signature", "sig", "client_secret",
    "password", "passwd", "pwd", "code", "secret", "refresh_token", "id_token", "auth", "jwt",
    "session", "sessionid", "assertion", "client_assertion", "credential", "credentials",
    "x-amz-signature", "x-amz-credential", "x-amz-security-token", "authorization",
})
"""Query parameter names whose values are secrets (any case or separator: see the module)."""

_SECRET_WORDS = frozenset({"token", "secret", "key", "password", "passwd", "signature",
                           "credential", "credentials"})
"""A name of two words or more whose last word is one of these carries a secret."""

_SECRET_ENDINGS = ("token", "secret", "password", "passwd", "signature", "credential",
                   "credentials")
"""A name run together (``APITOKEN``) that ends in one of these carries a secret too."""

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NOT_WORD = re.compile(r"[^a-z0-9]+")

_QUERY_SEPARATORS = re.compile(r"([&;])")

_CREDENTIAL_NAMES = (
    r"apikey|jwt|authorization|[\w-]*(?:token|secret|password|passwd|signature|credentials?)"
    r"|[\w-]*(?:[-_]key|(?-i:[a-z0-9]K(?:ey|EY)))"
)
"""Names whose value is a secret in ``name=value`` and ``name: value`` text alike."""

_CREDENTIAL_PARAMS = _CREDENTIAL_NAMES + r"|key|sig|pwd|code|session|sessionid|auth"
"""Shorter names, secret in ``name=value`` (query strings, forms) but too common in prose."""

# Credential-shaped text, for redact_text. Each pattern keeps its group 1 (the label and its
# separator) and replaces the rest of the match with REDACTED.
_TEXT_PATTERNS: tuple[re.Pattern[str], ...] = (
    # userinfo inside a URL: scheme://user:pass@host
    re.compile(r"(://)[^/@\s\"'<>]+(?=@)"),
    # Authorization-like header lines: "Authorization: Bearer abc", "Cookie: a=b; c=d"
    re.compile(
        r"(?i)\b((?:(?:proxy-)?authorization|set-cookie|cookie)\"?\s*:\s*"
        r"|(?:x-api-key|api[-_]?key)\s*:\s*)[^\r\n]+"
    ),
    # Bearer / Basic credentials wherever they stand
    re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9\-._~+/]+=*"),
    re.compile(r"(?i)\b(basic\s+)[A-Za-z0-9+/]{8,}={0,2}"),
    # query strings and forms: token=…, key=…, code=…
    re.compile(rf"(?i)(?<![\w-])((?:{_CREDENTIAL_PARAMS})=)[^\s\"'&;,#<>]+"),
    # "token": "…" (JSON) and token: … (text)
    re.compile(rf"(?i)(?<![\w-])((?:{_CREDENTIAL_NAMES})[\"']?\s*:\s*[\"']?)[^\s\"'&;,#<>]+"),
    # well-known token formats (GitHub, Slack, Stripe, OpenAI-style, AWS access keys, JWTs)
    re.compile(r"\b()(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,})"),
    re.compile(r"\b()xox[abposr]-[A-Za-z0-9-]{8,}"),
    re.compile(r"\b()[rs]k_(?:live|test)_[A-Za-z0-9]{8,}"),
    re.compile(r"\b()sk-[A-Za-z0-9_-]{16,}"),
    re.compile(r"\b()AKIA[0-9A-Z]{16}\b"),
    re.compile(r"\b()eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
)


def _words(name: str) -> list[str]:
    """A name's words, lower case: ``accessToken``, ``Access-Token`` → ``[access, token]``."""
    return [word for word in _NOT_WORD.split(_CAMEL.sub(" ", name).lower()) if word]


def _compact(names: frozenset[str]) -> frozenset[str]:
    return frozenset("".join(_words(name)) for name in names)


_HEADER_NAMES = _compact(SECRET_HEADERS)
_PARAM_NAMES = _compact(SECRET_PARAMS)


def _is_secret_name(name: str, exact: frozenset[str]) -> bool:
    words = _words(name)
    compact = "".join(words)
    return bool(words) and (compact in exact or compact.endswith(_SECRET_ENDINGS)
                            or (len(words) > 1 and words[-1] in _SECRET_WORDS))


def is_secret_header(name: str) -> bool:
    """True for a header name that carries credentials (any case, any separator)."""
    return _is_secret_name(name, _HEADER_NAMES)


def is_secret_param(name: str) -> bool:
    """True for a query or form parameter whose value is a secret (any case, any separator)."""
    return _is_secret_name(name, _PARAM_NAMES)


def redact_headers(
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
) -> list[tuple[str, str]]:
    """Headers with every secret value replaced by :data:`REDACTED`."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [(str(k), REDACTED if is_secret_header(str(k)) else str(v)) for k, v in items]


def _redact_query(query: str) -> str:
    """Replace secret parameter values; every other byte of the query is kept as it was.

    Both ``&`` and ``;`` separate parameters (some servers accept either).
    """
    pieces = _QUERY_SEPARATORS.split(query)
    for i in range(0, len(pieces), 2):
        name, eq, _ = pieces[i].partition("=")
        if eq and is_secret_param(unquote_plus(name)):
            pieces[i] = f"{name}={REDACTED}"
    return "".join(pieces)


def redact_url(url: object) -> str:
    """A URL with userinfo and token-like query parameters redacted; never raises.

    Idempotent: ``redact_url(redact_url(u)) == redact_url(u)``; every byte that is not a
    secret is kept as it was (``?page=2`` survives). A fragment holding ``=`` (an OAuth
    implicit-flow token, say) is dropped whole. Secrets inside the path (a webhook URL's
    token segment) are not recognised by structure: register such values with the sinks
    (:func:`redact_text`'s ``secrets``).
    """
    try:
        text = str(url)
    except Exception:  # a hostile __str__ must not break redaction
        return REDACTED
    rest, hash_, fragment = text.partition("#")
    head, mark, query = rest.partition("?")
    scheme, slashes, after = head.partition("://")
    if not slashes:
        scheme, after = "", head
    authority, slash, path = after.partition("/")
    if "@" in authority and (slashes or not authority.startswith(("/", "\\"))):
        authority = f"{REDACTED}@{authority.rpartition('@')[2]}"
    if query:
        query = _redact_query(query)
    if "=" in fragment:
        fragment = REDACTED
    return f"{scheme}{slashes}{authority}{slash}{path}{mark}{query}{hash_}{fragment}"


def _secret_forms(secrets: Iterable[str]) -> list[str]:
    forms: set[str] = set()
    for secret in secrets:
        if not isinstance(secret, str) or not secret:
            continue
        forms.update((secret, quote(secret, safe=""), quote_plus(secret, safe="")))
    return sorted(forms, key=len, reverse=True)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """Remove secrets from free text; the last line of defence, applied by every sink.

    Args:
        text: any text (a log message, an error detail, a header value).
        secrets: secret values the application knows (API keys, tokens, passwords). Each is
            removed wherever it appears, raw or percent-encoded. Every non-empty value is
            honoured, however short, so register real secrets only.

    Returns:
        The text with each known secret and each credential-shaped run (bearer and basic
        credentials, ``token=…`` pairs, Authorization/Cookie lines, userinfo, GitHub,
        Slack, Stripe and OpenAI-style tokens, AWS access key ids, JWTs) replaced by
        :data:`REDACTED`. Idempotent; never raises.
    """
    return _redact(str(text), _secret_forms(secrets))


def _redact(text: str, forms: list[str]) -> str:
    for form in forms:
        text = text.replace(form, REDACTED)
    for pattern in _TEXT_PATTERNS:
        text = pattern.sub(lambda m: f"{m.group(1)}{REDACTED}", text)
    return text


def scrub(value: object, secrets: Iterable[str] = ()) -> object:
    """A copy of JSON-like data with :func:`redact_text` applied to every string in it.

    Mapping keys are kept as they are (they are field names, not data) unless they are
    strings that contain a known secret. Tuples become lists; other scalars pass through.
    """
    return _scrub(value, _secret_forms(secrets))


def _scrub(value: object, forms: list[str]) -> object:
    if isinstance(value, str):
        return _redact(value, forms)
    if isinstance(value, Mapping):
        return {
            (_redact(k, forms) if isinstance(k, str) and any(f in k for f in forms) else k):
                _scrub(v, forms)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_scrub(v, forms) for v in value]
    return value
