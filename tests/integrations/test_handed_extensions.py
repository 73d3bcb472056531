"""A handed-over httpx response's extensions build the stats and outcome when first read, and
behave as the dict built at hand-over in every other way.

Any sequence of dict operations (reads, whole-dict reads, changes) gives the same results, in
the same order, on the lazy extensions as on a plain dict holding the stats and the outcome
from the start; httpx's own reads build nothing; the entries are built once.
"""

from __future__ import annotations

import copy
import pickle
import threading
import time
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import retrybudget as rb
from retrybudget import FakeClock
from retrybudget.integrations import OUTCOME, STATS, outcome_of, stats_of
from retrybudget.integrations import _handed as handed_module
from retrybudget.integrations.httpx import RetryTransport
from tests.support.strategies import assert_reached, examples, reached, tried

PROP = "test_the_lazy_extensions_behave_as_the_eager_dict"
URL = "https://api.example.com/rentals/1"
KEYS = (STATS, OUTCOME, "http_version", "reason_phrase", "network_stream", "other")
MUTATIONS = frozenset({"setitem", "delitem", "pop", "popitem", "setdefault", "update", "clear",
                       "ior"})


class Canned(httpx.BaseTransport):
    """A 200 with httpx's own extensions, as its HTTP transport hands them over."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"ok": True}, request=request,
                              extensions={"http_version": b"HTTP/1.1", "reason_phrase": b"OK"})


def _handed() -> tuple[dict[str, Any], dict[str, Any]]:
    """A response's lazy extensions, and the plain dict holding what they build, eagerly."""
    transport = RetryTransport(Canned(), retrier=rb.Retrier(policy=rb.Policy(), clock=FakeClock()))
    lazy = transport.handle_request(httpx.Request("GET", URL)).extensions
    assert type(lazy) is handed_module._HandedExtensions
    pending = lazy._pending  # what they are built from: build the eager twin from the same
    outcome = pending if isinstance(pending, rb.Outcome) else handed_module.first_ok(pending)
    eager = {**dict(dict.items(lazy)), STATS: outcome.stats(), OUTCOME: outcome}
    return lazy, eager


OPERATIONS = st.sampled_from([
    "getitem", "get", "contains", "len", "iter", "reversed", "keys", "values", "items", "eq",
    "ne", "eq reflected",
    "repr", "dict", "unpack", "copy", "copy.copy", "pickle", "or", "ror", "setitem", "delitem",
    "pop", "popitem", "setdefault", "update", "clear", "ior",
])


def _unpickled(mapping: dict[str, Any]) -> tuple[type, list[str]]:
    """What a pickled copy comes back as: its type and keys."""
    loaded = pickle.loads(pickle.dumps(mapping))  # noqa: S301 - our own bytes
    return type(loaded), list(loaded)


def _apply(mapping: dict[str, Any], operation: str, key: str, value: int,
           reference: dict[str, Any]) -> object:
    """Apply one dict operation; what it returned (or the type of what it raised).
    ``reference``: what the extensions held at hand-over (``==`` compares with it)."""
    try:
        if operation == "getitem":
            return mapping[key]
        if operation == "get":
            return mapping.get(key, "default")
        if operation == "contains":
            return key in mapping
        simple = {"len": len, "iter": list, "reversed": lambda m: list(reversed(m)),
                  "repr": repr, "dict": dict, "unpack": lambda m: {**m}, "copy": dict.copy,
                  "copy.copy": lambda m: (type(copy.copy(m)), copy.copy(m)),
                  "pickle": _unpickled,
                  "keys": lambda m: list(m.keys()), "values": lambda m: list(m.values()),
                  "items": lambda m: list(m.items()), "eq": lambda m: m == reference,
                  "ne": lambda m: m != reference, "eq reflected": lambda m: reference == m,
                  "or": lambda m: m | {key: value}, "ror": lambda m: {key: value} | m,
                  "popitem": lambda m: m.popitem(), "clear": lambda m: m.clear()}
        if operation in simple:
            return simple[operation](mapping)
        if operation == "setitem":
            mapping[key] = value
            return None
        if operation == "delitem":
            del mapping[key]
            return None
        if operation == "pop":
            return mapping.pop(key, "default")
        if operation == "setdefault":
            return mapping.setdefault(key, value)
        if operation == "update":
            mapping.update({key: value})
            return None
        mapping |= {key: value}  # ior
        return None
    except Exception as exc:  # the same error on both sides is what is compared
        return type(exc)


@settings(max_examples=examples(300))
@given(st.lists(st.tuples(OPERATIONS, st.sampled_from(KEYS), st.integers(0, 3)), max_size=6))
def test_the_lazy_extensions_behave_as_the_eager_dict(steps: list[tuple[str, str, int]]) -> None:
    tried(PROP)
    lazy, eager = _handed()
    reference = dict(eager)
    for number, (operation, key, value) in enumerate(steps):
        if number == 0:
            reached(PROP, "changed before read" if operation in MUTATIONS else "read first")
        assert (_apply(lazy, operation, key, value, reference)
                == _apply(eager, operation, key, value, reference)), (operation, key)
    assert list(lazy.items()) == list(eager.items())
    assert lazy == eager


def test_the_lazy_extensions_reached_their_checks() -> None:
    assert_reached(PROP, ("changed before read", "read first"))


def test_httpx_reads_build_nothing_and_the_entries_are_built_once() -> None:
    transport = RetryTransport(Canned(), retrier=rb.Retrier(policy=rb.Policy(), clock=FakeClock()))
    with httpx.Client(transport=transport) as client:
        response = client.get(URL)  # the client reads http_version and reason_phrase
    extensions = response.extensions
    assert (response.http_version, response.reason_phrase) == ("HTTP/1.1", "OK")
    assert "network_stream" not in extensions
    assert STATS in extensions
    assert extensions._pending is not None  # nothing built yet
    outcome = extensions[OUTCOME]
    assert extensions._pending is None
    assert extensions[OUTCOME] is outcome is outcome_of(response)
    assert stats_of(response) is extensions[STATS] == outcome.stats()
    assert outcome.value is response


def test_a_response_read_whole_first_has_the_entries_in_their_place() -> None:
    transport = RetryTransport(Canned(), retrier=rb.Retrier(policy=rb.Policy(), clock=FakeClock()))
    extensions = transport.handle_request(httpx.Request("GET", URL)).extensions
    extensions["mine"] = 1  # a change builds them first: they stay before what it adds
    assert list(extensions) == ["http_version", "reason_phrase", STATS, OUTCOME, "mine"]
    assert extensions[STATS]["outcome"] == "ok"


def _read_at_once(extensions: dict[str, Any], readers: int) -> list[object]:
    """The outcome each of ``readers`` threads read from ``extensions``, all started at once
    (half by ``[]``, half by ``get``); a reader that raised adds nothing."""
    start = threading.Barrier(readers)
    seen: list[object] = []

    def read(by_get: bool) -> None:
        start.wait()
        seen.append(extensions.get(OUTCOME) if by_get else extensions[OUTCOME])

    threads = [threading.Thread(target=read, args=(n % 2 == 1,)) for n in range(readers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return seen


def test_threads_reading_one_response_at_once_see_one_outcome(monkeypatch: pytest.MonkeyPatch,
                                                              ) -> None:
    real = handed_module.first_ok

    def slow(at: Any) -> rb.Outcome[Any]:
        time.sleep(0.002)  # widens the window a second reader could slip through
        return real(at)

    monkeypatch.setattr(handed_module, "first_ok", slow)
    transport = RetryTransport(Canned(), retrier=rb.Retrier(policy=rb.Policy(), clock=FakeClock()))
    for _ in range(5):
        seen = _read_at_once(transport.handle_request(httpx.Request("GET", URL)).extensions, 6)
        assert len(seen) == 6  # no reader found the entries missing
        assert seen[0] is not None
        assert all(outcome is seen[0] for outcome in seen)
