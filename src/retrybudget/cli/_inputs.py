"""Reading ``fetch`` input: one URL per line, or JSON lines ``{"id", "url", "headers"}``.

Header values may name an environment variable (``env:GITHUB_TOKEN``); resolved values
live in memory only. Every value that came from the environment, and every value of a
credential header, is a *secret*: the caller hands them to the audit sinks and scrubs
them from results, so none is ever written or printed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from .._cmdline import CliError
from .._files import read_user_text
from ..observe import is_secret_header, redact_url

__all__ = ["ENV_PREFIX", "Op", "parse_header", "read_ops", "resolve_headers"]

ENV_PREFIX = "env:"
"""A header value ``env:NAME`` is read from the environment variable ``NAME``."""

_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_ID = re.compile(r"^[^\x00-\x1f]{1,200}$")


@dataclass(frozen=True, slots=True)
class Op:
    """One logical operation of a fetch job: a GET of ``url`` with ``headers``.

    Attributes:
        id: the operation's id (the JSON line's ``id``, or ``line-N`` for a bare URL).
        url: the URL as given (it may hold a secret: never store or print it; use ``safe_url``).
        headers: resolved request headers (values may be secrets).
        line: the 1-based line of the input file it came from.
    """

    id: str
    url: str
    headers: tuple[tuple[str, str], ...]
    line: int

    @property
    def safe_url(self) -> str:
        """The URL with userinfo and token-like query parameters redacted."""
        return redact_url(self.url)

    @property
    def fingerprint(self) -> str:
        """What identifies the request across runs without its secrets (the redacted URL)."""
        return hashlib.sha256(self.safe_url.encode("utf-8")).hexdigest()[:16]


def parse_header(text: str, where: str) -> tuple[str, str]:
    """Split ``"Name: value"``; raises :class:`CliError` naming ``where`` (never the value)."""
    name, sep, value = text.partition(":")
    name = name.strip()
    if not sep or not _TOKEN.match(name):
        raise CliError(f"{where}: a header is 'Name: value', got one without a valid name")
    return name, value.strip()


def _resolve(name: str, value: object, env: Mapping[str, str], where: str,
             secrets: set[str]) -> str:
    if not isinstance(value, str):
        raise CliError(f"{where}: header {name!r} must be a string")
    if value.startswith(ENV_PREFIX):
        var = value[len(ENV_PREFIX):].strip()
        if not var:
            raise CliError(f"{where}: header {name!r} names no environment variable after 'env:'")
        if var not in env:
            raise CliError(f"{where}: environment variable {var} (for header {name!r}) is not set")
        value = env[var]
        if value:
            secrets.add(value)
    elif is_secret_header(name) and value:
        secrets.add(value)
        # "Bearer abc": the credential alone is a secret too, wherever it appears
        secrets.update(part for part in value.split() if len(part) >= 8)
    if "\r" in value or "\n" in value:
        raise CliError(f"{where}: the value of header {name!r} holds a line break")
    return value


def resolve_headers(
    pairs: Iterable[tuple[str, object]], env: Mapping[str, str], where: str, secrets: set[str]
) -> tuple[tuple[str, str], ...]:
    """Resolve ``env:`` values; adds every secret value to ``secrets``."""
    out = []
    for name, value in pairs:
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise CliError(f"{where}: {name!r} is not a valid header name")
        out.append((name, _resolve(name, value, env, where, secrets)))
    return tuple(out)


def _check_url(url: str, where: str) -> str:
    text = url.strip()
    problem = ""
    try:
        parts = urlsplit(text)
        if parts.scheme not in ("http", "https"):
            problem = "only http and https URLs can be fetched"
        elif not parts.hostname:
            problem = "it names no host"
        elif any(c.isspace() for c in text):
            problem = "it contains white space"
        else:
            _ = parts.port  # raises ValueError for a bad port
    except ValueError as exc:
        problem = str(exc)
    if problem:
        raise CliError(f"{where}: bad URL {redact_url(text)!r}: {problem}")
    return text


def _from_json(raw: str, where: str, env: Mapping[str, str], secrets: set[str],
               base: Sequence[tuple[str, str]], line: int) -> Op:
    try:
        item = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CliError(f"{where}: invalid JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(item, dict):
        raise CliError(f"{where}: a JSON line must be an object with 'id' and 'url'")
    unknown = sorted(set(item) - {"id", "url", "headers"})
    if unknown:
        raise CliError(f"{where}: unknown field(s) {', '.join(unknown)} (known: id, url, headers)")
    op_id, url, headers = item.get("id"), item.get("url"), item.get("headers", {})
    if isinstance(op_id, int) and not isinstance(op_id, bool):
        op_id = str(op_id)
    if not isinstance(op_id, str) or not _ID.match(op_id):
        raise CliError(f"{where}: 'id' must be a non-empty string of at most 200 characters")
    if not isinstance(url, str):
        raise CliError(f"{where}: 'url' must be a string")
    if not isinstance(headers, dict):
        raise CliError(f"{where}: 'headers' must be an object of name: value")
    own = resolve_headers(headers.items(), env, where, secrets)
    names = {name.lower() for name, _ in own}
    merged = tuple(h for h in base if h[0].lower() not in names) + own
    return Op(op_id, _check_url(url, where), merged, line)


def read_ops(
    path: str | Path,
    *,
    env: Mapping[str, str],
    headers: Sequence[tuple[str, str]] = (),
    secrets: set[str],
) -> list[Op]:
    """Read a fetch input file.

    Each non-blank line that does not start with ``#`` is either a URL (its id is
    ``line-N``) or a JSON object ``{"id": ..., "url": ..., "headers": {...}}``; ``headers``
    (already resolved) apply to every operation unless a line sets the same header.

    Raises:
        CliError: naming the file and line of the first problem (unreadable file, bad JSON,
            bad URL, duplicate id, unset environment variable).
    """
    name = str(path)
    try:
        text = read_user_text(path, name)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    ops: list[Op] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{name}:{number}"
        if line.startswith("{"):
            op = _from_json(line, where, env, secrets, headers, number)
        else:
            op = Op(f"line-{number}", _check_url(line, where), tuple(headers), number)
        if op.id in seen:
            raise CliError(f"{where}: duplicate id {op.id!r} (first on line {seen[op.id]})")
        seen[op.id] = number
        ops.append(op)
    if not ops:
        raise CliError(f"{name}: no URLs in the file")
    return ops
