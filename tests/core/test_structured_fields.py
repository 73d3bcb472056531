"""The built-in RFC 9651 parser of the IETF RateLimit fields agrees with http-sf.

The built-in parser is kept (no runtime dependency in the pure core) because it is measured
faster than http-sf on the RateLimit fields (``benchmarks/sf_parsers.py``, docs/providers.md
notes the figures); these properties hold it to http-sf's reading.
"""

from __future__ import annotations

import base64
from decimal import Decimal

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from retrybudget.core.headers._structured import _Bytes, _sf_parse, _Token

http_sf = pytest.importorskip("http_sf")

KEYS = st.from_regex(r"[a-z*][a-z0-9_.*-]{0,8}", fullmatch=True)
STRINGS = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12)
TOKENS = st.from_regex(r"[A-Za-z*][A-Za-z0-9:/!#$%&'*+.^_`|~-]{0,8}", fullmatch=True)
INTEGERS = st.integers(min_value=-(10**15) + 1, max_value=10**15 - 1)
DECIMALS = st.decimals(min_value=Decimal("-999999999999.999"),
                       max_value=Decimal("999999999999.999"), places=3,
                       allow_nan=False, allow_infinity=False)
BARE = st.one_of(
    INTEGERS, DECIMALS, STRINGS, TOKENS.map(http_sf.Token), st.booleans(),
    st.binary(max_size=8),
)
PARAMS = st.dictionaries(KEYS, BARE, max_size=3)
MEMBERS = st.lists(st.tuples(BARE, PARAMS), min_size=1, max_size=4)


def _theirs(value: object) -> object:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, http_sf.Token):
        return ("token", str(value))
    if isinstance(value, bytes):
        return ("bytes", value)
    return value


def _ours(value: object) -> object:
    if isinstance(value, _Token):
        return ("token", str(value))
    if isinstance(value, _Bytes):  # RFC 9651 4.2.7: a missing "=" padding is no error
        content = value[1:-1]
        return ("bytes", base64.b64decode(content + "=" * (-len(content) % 4)))
    return value


def _normal_theirs(parsed: list[tuple[object, dict[str, object]]]) -> list[object]:
    return [(_theirs(v), {k: _theirs(p) for k, p in params.items()}) for v, params in parsed]


def _normal_ours(parsed: list[tuple[str | None, object, dict[str, object]]]) -> list[object]:
    return [(_ours(v), {k: _ours(p) for k, p in params.items()}) for _, v, params in parsed]


@given(MEMBERS)
@example([('a"~', {"x": True, "y": False})])  # an escape and the last printable character; both booleans
def test_a_valid_list_reads_as_http_sf_reads_it(members) -> None:
    text = http_sf.ser(members)
    ours = _sf_parse(text, dictionary=False)
    assert ours is not None, text
    assert _normal_ours(ours) == _normal_theirs(http_sf.parse(text.encode(), tltype="list"))


@given(st.dictionaries(KEYS, st.tuples(BARE, PARAMS), min_size=1, max_size=4))
def test_a_valid_dictionary_reads_as_http_sf_reads_it(members) -> None:
    text = http_sf.ser(members)
    ours = _sf_parse(text, dictionary=True)
    assert ours is not None, text
    theirs = http_sf.parse(text.encode(), tltype="dictionary")
    assert [k for k, _, _ in ours] == list(theirs)
    assert _normal_ours(ours) == _normal_theirs(list(theirs.values()))


@given(st.text(alphabet='"abr=;,t 0123456789.?:*\\-', max_size=30))
@example(":00:")  # a byte sequence without its padding: both accept it, as RFC 9651 asks
def test_where_both_accept_any_text_they_agree(text) -> None:
    ours = _sf_parse(text, dictionary=False)
    try:
        theirs = http_sf.parse(text.encode(), tltype="list")
    except Exception:  # http-sf refuses it: the built-in reading may be lenient, never wrong
        return
    if ours is not None:
        assert _normal_ours(ours) == _normal_theirs(theirs)
