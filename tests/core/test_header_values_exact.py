"""The header value rules in each unit a profile can name, exactly, with each note's header.

``parse_reset(value, now, source=…, unit=…)`` for every unit of ``DELAY_UNITS`` (the
``auto`` guess is covered by ``tests/core/test_headers.py``), and the calendar's edges in
HTTP-dates and RFC 3339 timestamps. Each test kills mutants of the general parser
(``docs/mutation.md``).
"""

from __future__ import annotations

import calendar
import importlib
import math
from email.utils import formatdate

import pytest

from retrybudget.core.headers import (
    MAX_CLOCK_SKEW,
    MAX_HINT_SECONDS,
    MAX_VALUE_CHARS,
    SKEW_EVIDENCE,
    HeaderNote,
    HeaderRules,
    Hint,
    RateLimitInfo,
    parse_rate_limit_headers,
    parse_reset,
    parse_retry_after,
    parse_rfc3339,
)

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def utc(*fields: int) -> float:
    """The epoch of a UTC calendar time, by the standard library (the oracle)."""
    return float(calendar.timegm(fields))
SOURCE = "x-reset"


def hint(value: str, unit: str, now: float = NOW) -> tuple[float, str, str]:
    found = parse_reset(value, now, source=SOURCE, unit=unit)
    assert isinstance(found, Hint), found
    return found.delay, found.source, found.raw


def note(value: str, unit: str) -> tuple[str, str]:
    found = parse_reset(value, NOW, source=SOURCE, unit=unit)
    assert isinstance(found, HeaderNote), found
    assert found.reason
    return found.header, found.value


@pytest.mark.parametrize(("value", "unit", "delay"), [
    ("2500", "ms", 2.5),
    ("2500", "seconds", 2500.0),
    (str(int(NOW) + 25), "epoch", 25.0),
    ("125", "epoch", 0.0),  # an epoch in the past: now
    ("6m0s", "duration", 360.0),
    ("90", "duration", 90.0),  # a plain number of seconds
    ("2027-01-15T08:00:10Z", "rfc3339", 10.0),
    ("2027-01-15T13:30:10+05:30", "rfc3339", 10.0),
    ("2027-01-15T02:30:10-05:30", "rfc3339", 10.0),
])
def test_a_reset_in_its_providers_unit(value: str, unit: str, delay: float) -> None:
    assert hint(value, unit) == (delay, SOURCE, value)


@pytest.mark.parametrize(("value", "unit"), [
    ("Wed, 15 Jan 2027 08:00:10 GMT", "ms"),  # a date is not milliseconds
    ("soon", "ms"),
    ("soon", "epoch"),
    ("soon", "seconds"),
    ("soon", "duration"),
    ("6m0s", "rfc3339"),
    ("soon", "auto"),
    ("", "rfc3339"),
])
def test_a_reset_that_is_not_in_its_unit_is_a_note_naming_the_header(value: str,
                                                                      unit: str) -> None:
    assert note(value, unit) == (SOURCE, value)


def test_each_unit_says_what_it_expected() -> None:
    reasons = {unit: parse_reset("soon", NOW, source=SOURCE, unit=unit)
               for unit in ("ms", "epoch", "seconds", "duration", "rfc3339", "auto")}
    assert all(isinstance(r, HeaderNote) for r in reasons.values())
    assert len({r.reason for r in reasons.values() if isinstance(r, HeaderNote)}) == 6


def test_a_huge_reset_is_clamped_and_says_which_header() -> None:
    found = parse_reset(str(10**12), NOW, source=SOURCE, unit="seconds")
    assert isinstance(found, Hint)
    assert (found.delay, found.source) == (MAX_HINT_SECONDS, SOURCE)
    at_the_cap = parse_reset(str(int(MAX_HINT_SECONDS)), NOW, source=SOURCE, unit="seconds")
    assert isinstance(at_the_cap, Hint)
    assert at_the_cap.delay == MAX_HINT_SECONDS


def test_a_negative_zero_is_the_zero_delay() -> None:
    found = parse_retry_after("-0", NOW)
    assert isinstance(found, Hint)
    assert str(found.delay) == "0.0"  # not -0.0


@pytest.mark.parametrize(("value", "epoch"), [
    ("2027-01-15T00:00:00Z", utc(2027, 1, 15, 0, 0, 0)),
    ("2027-01-15T23:59:59Z", utc(2027, 1, 15, 23, 59, 59)),
    ("2027-01-15T00:01:00Z", utc(2027, 1, 15, 0, 1, 0)),
    ("2027-01-15T00:00:00+23:59", utc(2027, 1, 14, 0, 1, 0)),
])
def test_rfc3339_accepts_the_calendars_edges(value: str, epoch: float) -> None:
    assert parse_rfc3339(value) == epoch


@pytest.mark.parametrize("value", [
    "2027-01-15T24:00:00Z", "2027-01-15T00:60:00Z", "2027-01-15T00:00:61Z",
    "2027-01-15T00:00:00+24:00", "2027-01-15T00:00:00+05:60",
])
def test_rfc3339_refuses_what_is_past_the_edges(value: str) -> None:
    assert parse_rfc3339(value) is None


@pytest.mark.parametrize(("value", "delay"), [
    ("Fri, 15 Jan 2027 00:00:00 GMT", 0.0),  # before NOW: now
    ("Sat, 16 Jan 2027 00:00:00 GMT", utc(2027, 1, 16, 0, 0, 0) - NOW),
    ("Sat, 16 Jan 2027 23:59:60 GMT", utc(2027, 1, 17, 0, 0, 0) - NOW),  # a leap second
])
def test_an_http_date_at_the_calendars_edges(value: str, delay: float) -> None:
    found = parse_retry_after(value, NOW)
    assert isinstance(found, Hint), found
    assert found.delay == delay


@pytest.mark.parametrize("value", [
    "Sat, 16 Jan 2027 24:00:00 GMT", "Sat, 16 Jan 2027 00:60:00 GMT",
    "Sat, 16 Jan 2027 00:00:61 GMT", "Sat, 16 Foo 2027 00:00:00 GMT",
])
def test_an_http_date_past_the_edges_is_a_note(value: str) -> None:
    assert isinstance(parse_retry_after(value, NOW), HeaderNote)


@pytest.mark.parametrize(("value", "delay"), [
    ("2027-01-15T08:00:10.5Z", 10.5), ("2027-01-15T08:00:10.250+00:00", 10.25)])
def test_an_rfc3339_reset_keeps_its_fraction_of_a_second(value: str, delay: float) -> None:
    assert hint(value, "rfc3339") == (delay, SOURCE, value)


def test_a_count_written_as_a_float_is_read_up_to_two_to_the_53() -> None:
    for text, count in (("107.0", 107), ("1e3", 1000), (f"{2.0**53:.1f}", 2**53)):
        parsed = parse_rate_limit_headers({"x-ratelimit-remaining": text}, NOW)
        assert parsed.remaining == count, text
    assert parse_rate_limit_headers({"x-ratelimit-remaining": "1e17"}, NOW).remaining is None


@pytest.mark.parametrize(("value", "unit"), [
    ("", "ms"), ("", "auto"), ("-5", "ms"), ("nan", "ms"), ("-5", "seconds"), ("inf", "epoch"),
    ("-6m", "duration"), ("-1.5s", "auto"),
])
def test_every_reset_note_names_its_header_and_value(value: str, unit: str) -> None:
    assert note(value, unit) == (SOURCE, value)


@pytest.mark.parametrize("value", ["", "soon", "-1", "inf", "NaN", "Sat, 16 Foo 2027 00:00:00 GMT"])
def test_every_retry_after_note_names_its_header_and_value(value: str) -> None:
    found = parse_retry_after(value, NOW, source="x-retry")
    assert isinstance(found, HeaderNote), found
    assert (found.header, found.value) == ("x-retry", value)
    assert found.reason


@pytest.mark.parametrize(("value", "delay"), [("0s", 0.0), ("500ms", 0.5), ("1s", 1.0)])
def test_a_duration_of_zero_or_under_a_second_is_a_delay(value: str, delay: float) -> None:
    assert hint(value, "duration") == (delay, SOURCE, value)
    assert hint(value, "auto") == (delay, SOURCE, value)


@pytest.mark.parametrize(("value", "epoch"), [
    ("Sat, 16 Jan 2027 08:00:00 GMT", utc(2027, 1, 16, 8, 0, 0)),  # IMF-fixdate
    ("Saturday, 16-Jan-27 08:00:00 GMT", utc(2027, 1, 16, 8, 0, 0)),  # rfc850
    ("Sat Jan 16 08:00:00 2027", utc(2027, 1, 16, 8, 0, 0)),  # asctime
    ("Sat, 16 Jan 2027 09:00:00 +0100", utc(2027, 1, 16, 8, 0, 0)),  # a numeric zone
    ("Sat, 16 Dec 2027 08:00:00 GMT", utc(2027, 12, 16, 8, 0, 0)),
])
def test_each_http_date_form_is_read_to_the_second(value: str, epoch: float) -> None:
    found = parse_retry_after(value, NOW)
    assert isinstance(found, Hint), found
    assert found.requested == epoch - NOW  # the delay asked (December is clamped to a week)


def test_a_float_count_just_past_two_to_the_53_is_refused() -> None:
    past = f"{2.0**53 + 2:.1f}"
    assert parse_rate_limit_headers({"x-ratelimit-remaining": past}, NOW).remaining is None


def test_an_overflowing_delay_is_clamped_and_asked_as_the_cap() -> None:
    assert parse_retry_after("1e400", NOW) == Hint(MAX_HINT_SECONDS, "retry-after", "1e400",
                                                   MAX_HINT_SECONDS)


def test_each_clamped_value_has_its_own_note_naming_its_header() -> None:
    for value in ("99999999", "88888888"):
        notes = parse_rate_limit_headers({"retry-after": value}, NOW).notes
        assert [(n.header, n.value) for n in notes] == [("retry-after", value)]
    notes = parse_rate_limit_headers({"x-ratelimit-reset-after": "99999999"}, NOW).notes
    assert [(n.header, n.value) for n in notes] == [("x-ratelimit-reset-after", "99999999")]


def test_an_http_date_names_its_header_and_an_empty_count_its_own() -> None:
    found = parse_retry_after("Sat, 16 Jan 2027 08:00:00 GMT", NOW, source="x-retry")
    assert isinstance(found, Hint)
    assert found.source == "x-retry"
    notes = parse_rate_limit_headers({"x-ratelimit-remaining": "", "x-ratelimit-limit": "5"},
                                     NOW).notes
    assert [(n.header, n.value) for n in notes] == [("x-ratelimit-remaining", "")]
    assert all(n.reason for n in notes)


# ------------------------------------------------ the provider's Date and the IETF RateLimit fields

PROVIDER_CLOCK = HeaderRules(provider_clock=True)


def test_a_date_that_is_no_http_date_is_a_note_and_the_local_clock_is_used() -> None:
    headers = (("date", "not a date"), ("x-ratelimit-reset", str(int(NOW) + 30)),
               ("x-ratelimit-remaining", "0"))
    for given in (headers, dict(headers)):
        info = parse_rate_limit_headers(given, NOW, PROVIDER_CLOCK)
        assert info.reset == Hint(30.0, "x-ratelimit-reset", str(int(NOW) + 30))
        assert [(n.header, n.value) for n in info.notes] == [("date", "not a date")]
        assert all(n.reason for n in info.notes)
        assert SKEW_EVIDENCE not in dict(info.evidence)


@pytest.mark.parametrize(("ahead", "noted", "skew"), [
    (MAX_CLOCK_SKEW, False, "+600s"),  # the bound itself is no clamp
    (MAX_CLOCK_SKEW + 1, True, "+600s"),
    (-MAX_CLOCK_SKEW, False, "-600s"),
    (-MAX_CLOCK_SKEW - 1, True, "-600s"),
])
def test_a_clock_skew_is_clamped_only_past_its_bound(ahead: float, noted: bool,
                                                     skew: str) -> None:
    date = formatdate(NOW + ahead, usegmt=True)
    headers = (("date", date), ("x-ratelimit-reset", str(int(NOW) + 1200)),
               ("x-ratelimit-remaining", "0"))
    # a tuple of plain pairs is read by the fast reader, a dict by the general one: both agree
    for given in (headers, dict(headers)):
        info = parse_rate_limit_headers(given, NOW, PROVIDER_CLOCK)
        assert dict(info.evidence)[SKEW_EVIDENCE] == skew
        assert [(n.header, n.value) for n in info.notes] == ([("date", date)] if noted else [])
        assert all(n.reason for n in info.notes)
        assert info.reset is not None
        assert info.reset.delay == 1200.0 - math.copysign(MAX_CLOCK_SKEW, ahead)


def test_an_ietf_list_reset_names_its_header_and_the_whole_field() -> None:
    field = '"a";r=5;t=10, "b";r=2;t=30'
    info = parse_rate_limit_headers({"ratelimit": field}, NOW)
    assert info.reset == Hint(30.0, "ratelimit", field)
    assert (info.remaining, info.resource, info.limit, info.notes) == (2, "b", None, ())


def test_an_ietf_list_tie_keeps_the_first_item_when_one_has_no_reset() -> None:
    # equal remaining: the longer reset wins; a reset of 0 and none tie, so the first is kept
    for field, resource in (('"a";r=5;t=0, "b";r=5', "a"), ('"a";r=5, "b";r=5;t=0', "a"),
                            ('"a";r=5;t=1, "b";r=5', "a"), ('"a";r=5, "b";r=5;t=1', "b")):
        info = parse_rate_limit_headers({"ratelimit": field}, NOW)
        assert (info.resource, info.remaining) == (resource, 5), field


def test_an_ietf_dictionary_reset_names_its_header_and_the_whole_field() -> None:
    field = "limit=100, remaining=5, reset=10"
    info = parse_rate_limit_headers({"ratelimit": field}, NOW)
    assert info.reset == Hint(10.0, "ratelimit", field)
    assert (info.limit, info.remaining, info.window, info.notes) == (100, 5, None, ())


def test_an_ietf_dictionary_takes_the_window_of_the_policy_with_its_limit() -> None:
    info = parse_rate_limit_headers(
        {"ratelimit": "limit=100, remaining=5", "ratelimit-policy": "50;w=1, 100;w=60"}, NOW)
    assert (info.limit, info.remaining, info.window) == (100, 5, 60.0)


def test_an_ietf_dictionary_keeps_its_own_limit_over_the_policys() -> None:
    info = parse_rate_limit_headers(
        {"ratelimit": "limit=100, remaining=5", "ratelimit-policy": "50;w=1"}, NOW)
    assert (info.limit, info.remaining, info.window, info.conflicts) == (100, 5, 1.0, ())


def test_an_ietf_dictionary_without_a_limit_takes_the_policys_and_names_it() -> None:
    info = parse_rate_limit_headers(
        {"ratelimit": "remaining=5", "ratelimit-policy": "100;w=60"}, NOW)
    assert (info.limit, info.remaining, info.window, info.conflicts) == (100, 5, 60.0, ())
    over = parse_rate_limit_headers(
        {"ratelimit": "remaining=200", "ratelimit-policy": "100;w=60"}, NOW)
    assert (over.limit, over.remaining) == (100, 200)
    assert [c.fields for c in over.conflicts] == [("ratelimit", "ratelimit-policy")]


@pytest.mark.parametrize(("field", "resource"), [
    (r'"say \"hi\"";r=5', 'say "hi"'),  # an escape and a space: the character-by-character path
    (r'"a\\b c";r=5', "a\\b c"),
])
def test_an_ietf_policy_name_with_escapes_is_read_exactly(field: str, resource: str) -> None:
    info = parse_rate_limit_headers({"ratelimit": field}, NOW)
    assert (info.resource, info.remaining, info.notes) == (resource, 5, ())


@pytest.mark.parametrize("field", [
    r'"a\Xb";r=5',  # only \" and \\ are escapes (RFC 9651 section 4.2.5)
    '"""";r=5',  # a quote inside a string must be escaped
    '"a\x01b";r=5',  # a control character is no string character
])
def test_an_ietf_policy_name_that_is_no_sf_string_is_a_note(field: str) -> None:
    info = parse_rate_limit_headers((("ratelimit", field),), NOW)
    assert (info.resource, info.remaining) == (None, None)
    assert [(n.header, n.value) for n in info.notes] == [("ratelimit", field)]


def test_an_ietf_dictionary_without_a_limit_takes_the_first_windowed_policy() -> None:
    info = parse_rate_limit_headers(
        {"ratelimit": "remaining=5", "ratelimit-policy": "50;w=1, 100;w=60"}, NOW)
    assert (info.limit, info.remaining, info.window) == (50, 5, 1.0)


def test_an_ietf_dictionary_takes_a_lone_policy_without_a_window() -> None:
    info = parse_rate_limit_headers({"ratelimit": "remaining=5", "ratelimit-policy": "100"}, NOW)
    assert (info.limit, info.remaining, info.window, info.notes) == (100, 5, None, ())


def test_an_ietf_list_item_takes_only_the_policy_of_its_name() -> None:
    policies = '"a";q=10;w=60, "b";q=20;w=1'
    for field, limit, window in (('"b";r=5', 20, 1.0), ('"a";r=5', 10, 60.0), ('"c";r=5', None, None)):
        info = parse_rate_limit_headers({"ratelimit": field, "ratelimit-policy": policies}, NOW)
        assert (info.limit, info.window, info.remaining) == (limit, window, 5), field
    # unnamed policies are no name's; a lone one is the field's
    info = parse_rate_limit_headers(
        {"ratelimit": '"b";r=5', "ratelimit-policy": "50;w=1, 100;w=60"}, NOW)
    assert (info.limit, info.window) == (None, None)
    info = parse_rate_limit_headers({"ratelimit": '"b";r=5', "ratelimit-policy": "100;w=60"}, NOW)
    assert (info.limit, info.window) == (100, 60.0)


def test_an_ietf_item_with_a_malformed_parameter_is_a_note() -> None:
    field = '"a";r=5;x=@@'
    info = parse_rate_limit_headers({"ratelimit": field}, NOW)
    assert (info.resource, info.remaining) == (None, None)
    assert [(n.header, n.value) for n in info.notes] == [("ratelimit", field)]


def test_remaining_equal_to_the_limit_is_no_conflict() -> None:
    info = parse_rate_limit_headers({"x-ratelimit-limit": "5", "x-ratelimit-remaining": "5"}, NOW)
    assert (info.limit, info.remaining, info.conflicts) == (5, 5, ())


@pytest.mark.parametrize(("value", "used", "limit", "remaining", "conflict"), [
    ("40/40", 40, 40, 0, False),
    ("41/40", 41, 40, 0, True),
    (" 3 / 40 ", 3, 40, 37, False),
])
def test_a_shopify_call_limit_is_read_exactly(value: str, used: int, limit: int, remaining: int,
                                              conflict: bool) -> None:
    name = "x-shopify-shop-api-call-limit"
    info = parse_rate_limit_headers({name: value}, NOW)
    assert (info.used, info.limit, info.remaining, info.notes) == (used, limit, remaining, ())
    assert [c.fields for c in info.conflicts] == ([(name,)] if conflict else [])
    assert all(c.detail for c in info.conflicts)


def test_a_shopify_call_limit_that_is_no_pair_is_a_note_naming_its_header() -> None:
    info = parse_rate_limit_headers({"x-shopify-shop-api-call-limit": "forty"}, NOW)
    assert (info.used, info.limit, info.remaining) == (None, None, None)
    assert [(n.header, n.value) for n in info.notes] == [("x-shopify-shop-api-call-limit",
                                                          "forty")]
    assert all(n.reason for n in info.notes)


def test_an_empty_resource_is_a_note_naming_its_header() -> None:
    info = parse_rate_limit_headers({"x-ratelimit-resource": "", "x-ratelimit-remaining": "1"},
                                    NOW)
    assert (info.resource, info.remaining) == (None, 1)
    assert [(n.header, n.value) for n in info.notes] == [("x-ratelimit-resource", "")]
    assert all(n.reason for n in info.notes)


def test_resets_that_name_the_same_instant_keep_the_first_header() -> None:
    for first, second in (("x-ratelimit-reset", "x-ratelimit-reset-after"),
                          ("x-ratelimit-reset-after", "x-ratelimit-reset")):
        values = {"x-ratelimit-reset": str(int(NOW) + 30), "x-ratelimit-reset-after": "30"}
        headers = {first: values[first], second: values[second], "x-ratelimit-remaining": "0"}
        info = parse_rate_limit_headers(headers, NOW)
        # the family's own order decides, not the order of the headers
        assert info.reset == Hint(30.0, "x-ratelimit-reset", str(int(NOW) + 30))


@pytest.mark.parametrize(("unit", "value", "expected"), [
    ("ms", "1500", Hint(1.5, "x-wait", "1500")),
    ("seconds", "1500", Hint(1500.0, "x-wait", "1500")),
    ("epoch", str(int(NOW) + 30), Hint(30.0, "x-wait", str(int(NOW) + 30))),
    ("epoch", "125", Hint(0.0, "x-wait", "125")),  # an instant long gone, not 125 s (auto)
    ("duration", "1m30s", Hint(90.0, "x-wait", "1m30s")),
    ("rfc3339", "2027-01-15T08:00:45Z", Hint(45.0, "x-wait", "2027-01-15T08:00:45Z")),
    ("auto", "45", Hint(45.0, "x-wait", "45")),
])
def test_a_delay_header_is_read_in_the_unit_its_rules_name(unit: str, value: str,
                                                           expected: Hint) -> None:
    rules = HeaderRules(delays=(("x-wait", unit),), provider_clock=False)
    info = parse_rate_limit_headers({"x-wait": value}, NOW, rules)
    assert (info.retry_after, info.notes) == (expected, ())


def test_a_tuple_that_is_not_yet_normalized_reads_as_its_normalized_form() -> None:
    expected = parse_rate_limit_headers({"ratelimit": '"a";r=5', "retry-after": "7"}, NOW)
    assert expected.retry_after == Hint(7.0, "retry-after", "7")
    for headers in ((("RateLimit", '"a";r=5'), ("retry-after", "7")),
                    (("RATELIMIT", '"a";r=5'), ("RETRY-AFTER", "7")),
                    ((" ratelimit ", '"a";r=5'), ("retry-after", "7")),
                    (("ratelimit", ' "a";r=5 '), ("retry-after", " 7")),
                    (("ratelimit", '"a";r=5'), ("retry-after", 7)),
                    (7, ("ratelimit", '"a";r=5'), ("retry-after", "7"))):  # no pair: skipped
        assert parse_rate_limit_headers(headers, NOW) == expected, headers


def test_a_tuple_with_a_vendor_header_not_yet_normalized_reads_as_its_normalized_form() -> None:
    # the fast reader takes plain vendor families; a name it cannot use as is goes to the
    # general reader, which normalizes it
    expected = RateLimitInfo(limit=5, remaining=0, evidence=(("x-ratelimit-remaining", "0"),
                                                             ("x-ratelimit-limit", "5")))
    for headers in ((("x-ratelimit-remaining", "0"), ("x-ratelimit-limit", "5")),
                    (("X-RateLimit-Remaining", "0"), ("x-ratelimit-limit", "5")),
                    ((" x-ratelimit-remaining", "0"), ("x-ratelimit-limit", "5"))):
        assert parse_rate_limit_headers(headers, NOW) == expected, headers


def test_a_long_resource_or_an_odd_date_reads_the_same_from_a_tuple() -> None:
    # a list is always read by the general reader, a tuple of plain pairs may be read fast
    long = "r" * (MAX_VALUE_CHARS + 1)
    date = formatdate(NOW + 30, usegmt=True)
    later = formatdate(NOW + 90, usegmt=True)
    remaining = ("x-ratelimit-remaining", "1")
    for headers, resource, skew in (
        ([("x-ratelimit-resource", long), remaining], long[:MAX_VALUE_CHARS], None),
        ([("date", f" {date}"), remaining], None, "+30s"),
        ([("date", date), ("date", later), remaining], None, "+30s"),  # the first Date counts
    ):
        info = parse_rate_limit_headers(tuple(headers), NOW, PROVIDER_CLOCK)
        assert info == parse_rate_limit_headers(headers, NOW, PROVIDER_CLOCK), headers
        assert (info.resource, info.remaining) == (resource, 1)
        assert dict(info.evidence).get(SKEW_EVIDENCE) == skew
        assert all(len(value) <= MAX_VALUE_CHARS for _, value in info.evidence)


@pytest.mark.parametrize("pair", [
    ("x-ratelimit-remaining", "-1"),  # no count: a note
    ("x-ratelimit-remaining", "1_000"),  # int() would take it, a count does not
    ("x-ratelimit-remaining", " 5"),
    ("x-ratelimit-remaining", "1" * 19),  # past 18 digits: no count
    ("x-ratelimit-resource", " core "),
])
def test_a_value_the_fast_reader_cannot_use_as_is_reads_the_same_from_a_tuple(
        pair: tuple[str, str]) -> None:
    headers = [pair, ("x-ratelimit-limit", "10")]
    info = parse_rate_limit_headers(tuple(headers), NOW)
    assert info == parse_rate_limit_headers(headers, NOW)
    assert info.limit == 10
    assert info.remaining == (5 if pair[1] == " 5" else None)
    assert info.resource == ("core" if pair[1] == " core " else None)


@pytest.mark.parametrize(("unit", "value", "delay"), [
    ("ms", "1500", 1.5),
    ("seconds", "1500", 1500.0),
    ("epoch", str(int(NOW) + 30), 30.0),
    ("rfc3339", "45", None),  # no RFC 3339 timestamp: a note
    ("auto", "1000000000", 0.0),  # the epoch threshold itself is an epoch, long gone
    ("auto", "999999999", MAX_HINT_SECONDS),  # just under it: seconds, clamped to a week
])
def test_a_plain_vendor_reset_is_read_in_its_unit_from_a_tuple(unit: str, value: str,
                                                               delay: float | None) -> None:
    rules = HeaderRules(resets=(("x-ratelimit-reset", unit),), provider_clock=False)
    headers = [("x-ratelimit-reset", value), ("x-ratelimit-remaining", "0")]
    info = parse_rate_limit_headers(tuple(headers), NOW, rules)
    assert info == parse_rate_limit_headers(headers, NOW, rules)
    assert (info.reset.delay if info.reset else None, info.remaining) == (delay, 0)
    assert [n.header for n in info.notes] == (["x-ratelimit-reset"] if unit == "rfc3339"
                                              or delay == MAX_HINT_SECONDS else [])


# Several families in one response: the most restrictive binds, the others fill its gaps ----

GITHUB_AND_IETF = {
    "x-ratelimit-limit": "5000", "x-ratelimit-remaining": "4000", "x-ratelimit-used": "1000",
    "x-ratelimit-resource": "core", "x-ratelimit-reset": str(int(NOW) + 600),
    "ratelimit-limit": "100", "ratelimit-remaining": "0", "ratelimit-reset": "30",
    "ratelimit-policy": "100;w=60",
}


def test_an_exhausted_family_binds_and_the_others_fill_in_what_it_does_not_say() -> None:
    info = parse_rate_limit_headers(GITHUB_AND_IETF, NOW)
    # the IETF quota is spent: its limit, remaining and reset; GitHub's used and resource,
    # which the IETF fields do not give; the IETF policy's window
    assert (info.limit, info.remaining, info.used, info.window, info.resource) == (
        100, 0, 1000, 60.0, "core")
    assert info.reset == Hint(30.0, "ratelimit-reset", "30")


def test_of_two_exhausted_families_the_one_with_the_latest_reset_binds() -> None:
    # GitHub's family names no reset, the IETF one resets in half a second: a family without
    # a reset ranks below any reset, so the IETF limit is the one reported
    info = parse_rate_limit_headers({"x-ratelimit-limit": "50", "x-ratelimit-remaining": "0",
                                     "ratelimit-limit": "100", "ratelimit-remaining": "0",
                                     "ratelimit-reset": "0.5"}, NOW)
    assert (info.limit, info.remaining) == (100, 0)
    assert info.reset == Hint(0.5, "ratelimit-reset", "0.5")


def test_with_none_exhausted_the_smallest_remaining_binds_with_its_own_limit() -> None:
    info = parse_rate_limit_headers({"x-ratelimit-limit": "50", "x-ratelimit-remaining": "40",
                                     "ratelimit-limit": "100", "ratelimit-remaining": "7",
                                     "ratelimit-reset": "30"}, NOW)
    assert (info.limit, info.remaining) == (100, 7)


# The IETF separate fields (-01..-06) ---------------------------------------------------------


@pytest.mark.parametrize(("name", "expected"), [
    ("ratelimit-limit", (30, None, None)),
    ("ratelimit-remaining", (None, 30, None)),
    ("ratelimit-reset", (None, None, 30.0)),
])
def test_each_separate_ietf_field_is_read_on_its_own(name: str,
                                                     expected: tuple[object, ...]) -> None:
    info = parse_rate_limit_headers({name: "30"}, NOW)
    assert (info.limit, info.remaining, None if info.reset is None else info.reset.delay) == (
        expected)


def test_separate_ietf_remaining_over_its_limit_names_both_fields() -> None:
    info = parse_rate_limit_headers({"ratelimit-limit": "10", "ratelimit-remaining": "20",
                                     "ratelimit-reset": "5"}, NOW)
    assert [c.fields for c in info.conflicts] == [("ratelimit-remaining", "ratelimit-limit")]


def test_separate_ietf_fields_take_the_window_of_the_policy_with_their_limit() -> None:
    # the second policy's quota is the limit: its window, not the first windowed policy's
    info = parse_rate_limit_headers({"ratelimit-limit": "100", "ratelimit-remaining": "20",
                                     "ratelimit-reset": "5",
                                     "ratelimit-policy": "10;w=1, 100;w=60"}, NOW)
    assert info.window == 60.0


def test_a_malformed_ietf_policy_is_a_note_with_its_reason() -> None:
    info = parse_rate_limit_headers({"ratelimit-limit": "100", "ratelimit-remaining": "20",
                                     "ratelimit-reset": "5", "ratelimit-policy": "??"}, NOW)
    assert [(n.header, n.value) for n in info.notes] == [("ratelimit-policy", "??")]
    assert all(n.reason for n in info.notes)


# The fast reader's reach and its fallbacks ------------------------------------------------


@pytest.mark.parametrize("prefix", ["x-ratelimit-", "x-rate-limit-"])
def test_each_plain_vendor_family_is_read_without_the_general_reader(
        prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    headers_module = importlib.import_module("retrybudget.core.headers._read")
    general = headers_module._parse_general
    calls: list[object] = []
    monkeypatch.setattr(headers_module, "_parse_general",
                        lambda *a: (calls.append(a), general(*a))[1])
    headers = ((f"{prefix}limit", "900"), (f"{prefix}remaining", "899"))
    info = parse_rate_limit_headers(headers, NOW)
    assert (info.limit, info.remaining, calls) == (900, 899, [])


def test_a_tuple_holding_an_item_that_is_no_pair_is_read_by_the_general_reader() -> None:
    headers = (("x-ratelimit-limit", "5"), ("x-ratelimit-remaining", "2"), ("a", "b", "c"))
    info = parse_rate_limit_headers(headers, NOW)  # type: ignore[arg-type]
    assert (type(info), info.limit, info.remaining) == (RateLimitInfo, 5, 2)


def test_without_the_provider_clock_a_skewed_date_changes_nothing() -> None:
    headers = {"date": formatdate(NOW + 100, usegmt=True),
               "x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 60)}
    info = parse_rate_limit_headers(headers, NOW, HeaderRules(provider_clock=False))
    assert info.reset is not None
    assert info.reset.delay == 60.0
    assert SKEW_EVIDENCE not in [name for name, _ in info.evidence]


class _Hostile:
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_a_value_whose_text_cannot_be_read_is_an_empty_value() -> None:
    info = parse_rate_limit_headers({"x-ratelimit-remaining": _Hostile(),  # type: ignore[dict-item]
                                     "x-ratelimit-limit": "5"}, NOW)
    assert [(n.header, n.value) for n in info.notes] == [("x-ratelimit-remaining", "")]
    assert info.limit == 5
