"""IETF structured fields (RFC 9651): the subset the ``RateLimit`` headers use."""

from __future__ import annotations

import re


class _Token(str):
    """An sf-token bare item, told apart from an sf-string."""

    __slots__ = ()


class _Bytes(str):
    """An sf-binary bare item, still base64 (``pk``)."""

    __slots__ = ()


_Bare = bool | int | float | str
_Member = tuple[str | None, _Bare, dict[str, _Bare]]

_SF_KEY_RE = re.compile(r"[a-z*][a-z0-9_.*-]*")
_SF_INT_RE = re.compile(r"-?[0-9]{1,15}")
_SF_DECIMAL_RE = re.compile(r"-?[0-9]{1,12}\.[0-9]{1,3}")
_SF_TOKEN_RE = re.compile(r"[A-Za-z*][A-Za-z0-9:/!#$%&'*+.^_`|~-]*")
_SF_BYTES_RE = re.compile(r":[A-Za-z0-9+/=]*:")
_SF_DICT_START_RE = re.compile(r"\s*[a-z*][a-z0-9_.*-]*\s*=")


_SF_SIMPLE_STRING_RE = re.compile(r'"[^"\\]*"')


def _sf_split(text: str, sep: str) -> list[str] | None:
    """Split on ``sep`` outside double-quoted strings; None if a string is unterminated."""
    if '"' not in text:
        return text.split(sep)
    if "\\" not in text:  # the common case: plain quoted names, none holding ``sep``
        strings = _SF_SIMPLE_STRING_RE.findall(text)
        if text.count('"') == 2 * len(strings) and not any(sep in q for q in strings):
            return text.split(sep)
    parts: list[str] = []
    buf: list[str] = []
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == sep:
            parts.append("".join(buf))
            buf = []
            continue
        buf.append(ch)
    if in_string:
        return None
    parts.append("".join(buf))
    return parts


_SF_PLAIN_STRING_RE = re.compile(r'"([ !#-\[\]-~]*)"')


def _sf_string(text: str) -> str | None:
    plain = _SF_PLAIN_STRING_RE.fullmatch(text)  # no escapes: the usual policy name
    if plain is not None:
        return plain.group(1)
    if len(text) < 2 or not text.endswith('"'):
        return None
    out: list[str] = []
    escaped = False
    for ch in text[1:-1]:
        if escaped:
            if ch not in '"\\':
                return None
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"' or not " " <= ch <= "~":
            return None
        else:
            out.append(ch)
    return None if escaped else "".join(out)


def _sf_bare(text: str) -> _Bare | None:
    """One RFC 9651 bare item (no inner lists), or None if malformed."""
    if text.startswith('"'):
        return _sf_string(text)
    if text in ("?0", "?1"):
        return text == "?1"
    if _SF_INT_RE.fullmatch(text):
        return int(text)
    if _SF_DECIMAL_RE.fullmatch(text):
        return float(text)
    if _SF_BYTES_RE.fullmatch(text):
        return _Bytes(text)
    if _SF_TOKEN_RE.fullmatch(text):
        return _Token(text)
    return None


_SF_INT_PARAM_RE = re.compile(r"\s*([a-z*][a-z0-9_.*-]*)=(-?[0-9]{1,15})\s*")


def _sf_key_value(text: str) -> tuple[str, _Bare] | None:
    simple = _SF_INT_PARAM_RE.fullmatch(text)  # ``key=integer``: nearly every parameter
    if simple is not None:
        return simple.group(1), int(simple.group(2))
    key, eq, rest = text.strip().partition("=")
    key = key.strip()
    if _SF_KEY_RE.fullmatch(key) is None:
        return None
    value = _sf_bare(rest.strip()) if eq else True
    return None if value is None else (key, value)


def _sf_parse(text: str, *, dictionary: bool) -> list[_Member] | None:
    """A structured-field list (or dictionary) of items with parameters; None if malformed."""
    members = _sf_split(text, ",")
    if members is None:
        return None
    out: list[_Member] = []
    for member in members:
        parts = _sf_split(member.strip(), ";")
        if parts is None:
            return None
        key: str | None = None
        if dictionary:
            pair = _sf_key_value(parts[0])
            if pair is None:
                return None
            key, value = pair
        else:
            bare = _sf_bare(parts[0].strip())
            if bare is None:
                return None
            value = bare
        params: dict[str, _Bare] = {}
        for part in parts[1:]:
            param = _sf_key_value(part)
            if param is None:
                return None
            params[param[0]] = param[1]
        out.append((key, value, params))
    return out


def _sf_uint(value: _Bare | None) -> int | None:
    """A non-negative sf-integer, or None (booleans are not integers here)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _is_name(value: _Bare) -> bool:
    return isinstance(value, str) and not isinstance(value, _Bytes)
