"""Redaction: no secret ever reaches an audit record, a log line, an error or a repr.

Secrets are request headers that carry credentials (``Authorization``,
``Proxy-Authorization``, ``Cookie``/``Set-Cookie``, API-key-like names), token-like
query parameters, and userinfo in URLs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = [
    "REDACTED",
    "SECRET_HEADERS",
    "SECRET_PARAMS",
    "is_secret_header",
    "is_secret_param",
    "redact_headers",
    "redact_url",
]

REDACTED = "[REDACTED]"
"""What stands where a secret was."""

SECRET_HEADERS = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key",
    "x-auth-token", "x-csrf-token", "x-amz-security-token",
})
"""Header names that always carry secrets."""

_SECRET_HEADER_SUFFIXES = ("-token", "-secret", "-key", "-password", "-signature", "-credential")

SECRET_PARAMS = frozenset({
    "access_token", "token", "key", "api_key", "apikey", "signature", "sig", "client_secret",
    "password", "code", "secret", "refresh_token", "id_token", "auth", "x-amz-signature",
    "x-amz-credential", "x-amz-security-token",
})
"""Query parameter names whose values are secrets."""

_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


def is_secret_header(name: str) -> bool:
    """True for a header name that carries credentials."""
    n = name.strip().lower()
    return n in SECRET_HEADERS or n.endswith(_SECRET_HEADER_SUFFIXES)


def is_secret_param(name: str) -> bool:
    """True for a query parameter whose value is a secret."""
    n = name.strip().lower()
    return n in SECRET_PARAMS or n.endswith(("_token", "_secret", "_key", "-token", "-key"))


def redact_headers(
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
) -> list[tuple[str, str]]:
    """Headers with every secret value replaced by :data:`REDACTED`."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [(str(k), REDACTED if is_secret_header(str(k)) else str(v)) for k, v in items]


def redact_url(url: object) -> str:
    """A URL with userinfo and token-like query parameters redacted; never raises."""
    text = str(url)
    try:
        parts = urlsplit(text)
    except ValueError:
        return _USERINFO.sub(f"{REDACTED}@", text.split("?", 1)[0])
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(k, REDACTED if is_secret_param(k) else v) for k, v in pairs], safe="[]"
        )
    fragment = REDACTED if parts.fragment and "=" in parts.fragment else parts.fragment
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))
