"""The first-attempt fast path gives up nothing: the same outcome, stats, sleeps and samples.

``Retrier.call`` / ``acall`` skip the generic flow for an uncoordinated, unobserved operation
whose first attempt returns a plain value. Each property here runs the same scripted callable
through the fast path and through the generic flow (``Retrier.run`` with the same performer)
on twin fake clocks and twin seeded random sources, and asserts everything observable is
equal: every Outcome field, its stats, its repr, the clock's sleeps and the random state.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import pickle
import random
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import retrybudget as rb
from retrybudget import FakeClock
from retrybudget._drivers import Begun, _interpret
from retrybudget.core.actions import AttemptResult
from retrybudget.core.classify import ResponseSeen
from retrybudget.core.decide import Stop
from retrybudget.core.outcome import Outcome
from tests.support.strategies import examples, header_sets, policies

# One scripted attempt: what the callable does (and how long it takes on the fake clock).
behaviours = st.sampled_from(["plain", "object", "connection", "timeout", "bug", "response"])
attempt_steps = st.tuples(behaviours, st.sampled_from([0.0, 0.001, 0.5, 3.0]))


class _Response:
    """A returned object read as an HTTP response (status and headers)."""

    def __init__(self, status: int) -> None:
        self.status_code = status
        self.headers = {"retry-after": "1"}
        self.text = "busy"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Response) and other.status_code == self.status_code

    def __hash__(self) -> int:
        return self.status_code


def _script(clock: FakeClock, steps: list[tuple[str, float]]) -> Any:
    """A callable that plays ``steps`` in order (the last one again once they run out)."""
    calls = iter(range(10**6))

    def fn() -> object:
        kind, took = steps[min(next(calls), len(steps) - 1)]
        clock.advance(took)
        if kind == "plain":
            return {"ok": True}
        if kind == "object":
            return rb.attempt_timeout()  # a float: the attempt's own timeout
        if kind == "connection":
            raise ConnectionResetError("reset")
        if kind == "timeout":
            raise TimeoutError("slow")
        if kind == "bug":
            raise KeyError("bug")
        return _Response(503)

    return fn


def _twins(policy: rb.Policy, start: float, seed: int, **options: Any) -> tuple[rb.Retrier, ...]:
    return tuple(
        rb.Retrier(policy=policy, clock=FakeClock(monotonic=start), random=random.Random(seed),
                   **options)
        for _ in range(2)
    )


def _same(fast: Outcome[Any], slow: Outcome[Any]) -> None:
    """Every field equal (the ids aside: each operation has its own), errors by type."""
    assert type(fast.error) is type(slow.error)
    fast_fields = {f.name: getattr(fast, f.name) for f in dataclasses.fields(Outcome)}
    slow_fields = {f.name: getattr(slow, f.name) for f in dataclasses.fields(Outcome)}
    for fields in (fast_fields, slow_fields):
        fields.pop("operation_id")
        fields.pop("error")
    assert fast_fields == slow_fields
    assert {**fast.stats(), "operation_id": ""} == {**slow.stats(), "operation_id": ""}
    assert repr(fast).replace(fast.operation_id, "") == repr(slow).replace(slow.operation_id, "")
    assert isinstance(fast, Outcome)


@given(policy=policies(), start=st.floats(0, 1e6, allow_nan=False), seed=st.integers(0, 99),
       steps=st.lists(attempt_steps, min_size=1, max_size=4))
def test_call_fast_path_matches_the_generic_flow(
    policy: rb.Policy, start: float, seed: int, steps: list[tuple[str, float]]
) -> None:
    fast, slow = _twins(policy, start, seed)
    got = fast.call(_script(fast.clock, steps))  # type: ignore[arg-type]
    want = slow.run(slow._performer(_script(slow.clock, steps), (), {}))  # type: ignore[arg-type]
    _same(got, want)
    assert fast.clock.sleeps == slow.clock.sleeps  # type: ignore[attr-defined]
    assert fast.random.getstate() == slow.random.getstate()


@given(policy=policies(), start=st.floats(0, 1e6, allow_nan=False), seed=st.integers(0, 99),
       steps=st.lists(attempt_steps, min_size=1, max_size=3))
def test_acall_fast_path_matches_the_generic_flow(
    policy: rb.Policy, start: float, seed: int, steps: list[tuple[str, float]]
) -> None:
    fast, slow = _twins(policy, start, seed)
    script_fast, script_slow = _script(fast.clock, steps), _script(slow.clock, steps)  # type: ignore[arg-type]

    async def run_fast() -> object:
        return script_fast()

    async def run_slow() -> object:
        return script_slow()

    async def both() -> tuple[Outcome[Any], Outcome[Any]]:
        interp = slow._interpreter

        async def perform(attempt: Any) -> Any:
            from retrybudget.core.actions import AttemptResult

            token = _interpret._ATTEMPT_TIMEOUT.set(attempt.timeout)
            try:
                value = await run_slow()
            except Exception as exc:
                return AttemptResult(interp.error(exc), None, exc)
            finally:
                _interpret._ATTEMPT_TIMEOUT.reset(token)
            return AttemptResult(interp.value(value), value, None)

        return await fast.acall(run_fast), await slow.arun(perform)

    got, want = asyncio.run(both())
    _same(got, want)
    assert fast.clock.sleeps == slow.clock.sleeps  # type: ignore[attr-defined]


@given(policy=policies(), start=st.floats(0, 1e6, allow_nan=False))
def test_a_validator_and_the_timeout_keyword_keep_the_same_outcome(
    policy: rb.Policy, start: float
) -> None:
    def fetch(timeout: float | None = None) -> dict[str, float | None]:
        return {"timeout": timeout}

    validated = policy.replace(validator=lambda payload: "timeout" in payload)
    fast, slow = _twins(validated, start, 1, timeout_kwarg="timeout")
    _same(fast.call(fetch), slow.run(slow._performer(fetch, (), {})))


def test_a_first_attempt_success_reads_as_an_outcome_everywhere() -> None:
    clock = FakeClock()
    outcome = rb.Retrier(policy=rb.Policy(), clock=clock).call(lambda: 42)
    plain = dataclasses.replace(outcome)
    assert type(plain) is Outcome  # replace, copy and pickle give a plain Outcome
    assert plain == outcome
    assert outcome == plain
    assert hash(plain) == hash(outcome)
    assert type(copy.copy(outcome)) is Outcome
    assert pickle.loads(pickle.dumps(outcome)) == outcome  # noqa: S301 - our own bytes
    assert dataclasses.replace(outcome, detail="changed").detail == "changed"
    assert dataclasses.asdict(outcome)["history"][0]["decision"] == "stop"
    assert repr(outcome).startswith("Outcome(reason=<Reason.OK: 'ok'>")
    assert (outcome.ok, outcome.value, outcome.attempts, outcome.waits) == (True, 42, 1, ())
    assert outcome.history[0].timeout == 10.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.detail = "x"  # type: ignore[misc]


def test_hooks_and_coordinators_take_the_generic_flow() -> None:
    seen: list[Outcome[Any]] = []

    class Hook:
        def on_outcome(self, outcome: Outcome[Any], request: object) -> None:
            seen.append(outcome)

    retrier = rb.Retrier(policy=rb.Policy(), clock=FakeClock(), hooks=(Hook(),))
    outcome = retrier.call(lambda: 1)
    assert seen == [outcome]
    assert type(outcome) is Outcome
    coordinated = rb.Retrier(policy=rb.Policy(), clock=FakeClock(),
                             coordinator=rb.MemoryCoordinator(), hooks=(Hook(),))
    assert type(coordinated.call(lambda: 1)) is Outcome


response_steps = st.tuples(
    st.sampled_from([200, 201, 204, 301, 404, 429, 403, 503]),
    header_sets(),
    st.sampled_from(["", "validator returned False"]),
    st.sampled_from([None, "POST", "GET"]),
    st.sampled_from([0.0, 0.25, 2.0]),
)


def _performer(retrier: rb.Retrier, clock: FakeClock, steps: list[tuple[Any, ...]]) -> Any:
    """Each attempt plays the next of ``steps`` (the last one again once they run out): a
    response step (status, headers, payload error, method, time) or a callable step."""
    calls = iter(range(10**6))
    plain = _script(clock, [s for s in steps if len(s) == 2] or [("plain", 0.0)])

    def perform(attempt: Any) -> AttemptResult:
        step = steps[min(next(calls), len(steps) - 1)]
        if len(step) == 2:
            return retrier._performer(plain, (), {})(attempt)
        status, headers, payload_error, seen_method, took = step
        clock.advance(took)
        seen = ResponseSeen.of(status, headers, payload_error=payload_error, method=seen_method)
        return AttemptResult(seen, {"status": status}, None)

    return perform


@given(policy=policies(), start=st.floats(0, 1e6, allow_nan=False), seed=st.integers(0, 99),
       method=st.sampled_from([None, "GET", "POST"]),
       steps=st.lists(st.one_of(response_steps, attempt_steps), min_size=1, max_size=4))
def test_run_fast_path_matches_the_generic_flow(
    policy: rb.Policy, start: float, seed: int, method: str | None, steps: list[tuple[Any, ...]]
) -> None:
    """What the HTTP integrations drive: responses with any headers, any status, any method."""
    fast, = _twins(policy, start, seed, method=method)[:1]
    slow = rb.Retrier(policy=policy, clock=FakeClock(monotonic=start), random=random.Random(seed),
                      method=method, hooks=(object(),))  # a hook: the generic flow

    got = fast.run(_performer(slow, fast.clock, steps))  # type: ignore[arg-type]
    want = slow.run(_performer(slow, slow.clock, steps))  # type: ignore[arg-type]
    _same(got, want)
    assert fast.clock.sleeps == slow.clock.sleeps  # type: ignore[attr-defined]
    assert fast.random.getstate() == slow.random.getstate()


@given(policy=policies(), now=st.floats(0, 1e6, allow_nan=False),
       later=st.floats(0, 200, allow_nan=False))
def test_the_fast_paths_first_plan_is_the_real_ones(
    policy: rb.Policy, now: float, later: float
) -> None:
    """The fast path plans its first attempt without a state: as a fresh state plans it."""
    from retrybudget.core.decide import plan_attempt
    from retrybudget.core.state import OperationState

    clock = FakeClock(monotonic=now)
    readings = iter((now, now + later))
    clock.monotonic = lambda: next(readings)  # type: ignore[method-assign]
    begun = Begun(rb.Retrier(policy=policy, clock=clock))
    plan = plan_attempt(policy, OperationState.start(policy, "id", now), now + later)
    assert (begun.started, begun.attempt_started) == (now, now + later)
    assert begun.refused is isinstance(plan, Stop)
    assert begun.timeout == (None if begun.refused else plan)


# The transports' quick first attempt ------------------------------------------------------

class _Scripted:
    """An inner httpx transport that plays a script (status and headers, or an error), each
    step taking its time on the fake clock; it records every request it was sent."""

    def __init__(self, clock: FakeClock, steps: list[tuple[Any, ...]]) -> None:
        self.clock, self.steps, self.sent = clock, steps, []

    def answer(self, request: Any) -> Any:
        step = self.steps[min(len(self.sent), len(self.steps) - 1)]
        self.sent.append((request.method, dict(request.headers), request.extensions.get("timeout")))
        what, headers, took = step
        self.clock.advance(took)
        if what == "connect":
            raise httpx.ConnectError("refused", request=request)
        if what == "read":
            raise httpx.ReadTimeout("slow", request=request)
        if what == "bug":
            raise KeyError("bug")
        return httpx.Response(what, headers=headers, json={"ok": True}, request=request)


quick_steps = st.tuples(
    st.sampled_from([200, 200, 201, 204, 301, 304, 404, 429, 500, 503, "connect", "read", "bug"]),
    st.sampled_from([{}, {"x-ratelimit-limit": "5000", "x-ratelimit-remaining": "4999",
                          "x-ratelimit-reset": "1800000600"},
                     {"retry-after": "1"}, {"x-ratelimit-remaining": "0"},
                     {"x-ratelimit-limit": "10", "x-ratelimit-remaining": "50"}]),  # a conflict
    st.sampled_from([0.0, 0.01, 2.0]))


def _quick_twins(policy: rb.Policy, start: float, seed: int, keys: bool,
                 steps: list[tuple[Any, ...]], asynchronous: bool,
                 coordinated: bool = False) -> tuple[Any, ...]:
    """Two transports over twin scripts: the first may send a quick first attempt, the second
    never does (its engine's quick shape switched off); ``coordinated``: each with a
    MemoryCoordinator of its own."""
    from retrybudget.integrations.httpx import AsyncRetryTransport, RetryTransport

    twins = []
    for quick in (True, False):
        clock = FakeClock(monotonic=start)
        inner = _Scripted(clock, steps)
        retrier = rb.Retrier(policy=policy, clock=clock, random=random.Random(seed),
                             coordinator=(rb.MemoryCoordinator(clock=clock) if coordinated
                                          else rb.NoCoordination()))
        transport: Any
        if asynchronous:
            transport = AsyncRetryTransport(_AsyncInner(inner), retrier=retrier,
                                            generate_idempotency_keys=keys)
        else:
            transport = RetryTransport(_SyncInner(inner), retrier=retrier,
                                       generate_idempotency_keys=keys)
        if not quick:
            transport._engine.quick = None
            transport._engine.quick_routed = False
            transport._engine.coordinated = None
        twins.append((transport, inner, retrier))
    return tuple(twins)


class _SyncInner(httpx.BaseTransport):
    def __init__(self, script: _Scripted) -> None:
        self.script = script

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return self.script.answer(request)  # type: ignore[no-any-return]


class _AsyncInner(httpx.AsyncBaseTransport):
    def __init__(self, script: _Scripted) -> None:
        self.script = script

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return self.script.answer(request)  # type: ignore[no-any-return]


def _ending(send: Any) -> tuple[Outcome[Any], Any]:
    from retrybudget.integrations import send_with_outcome

    try:
        return send_with_outcome(send)
    except KeyError as exc:  # a bug in the inner transport is raised again as it was
        outcome = getattr(exc, "retrybudget_outcome", None)
        assert outcome is not None
        return outcome.outcome, None


def _same_ending(fast: tuple[Outcome[Any], Any], slow: tuple[Outcome[Any], Any]) -> None:
    (got, got_response), (want, want_response) = fast, slow
    assert (got_response is None) == (want_response is None)
    if got_response is not None:
        assert got_response.status_code == want_response.status_code
        assert got_response.extensions["retrybudget"] == {
            **want_response.extensions["retrybudget"],
            "operation_id": got.operation_id}
    assert type(got.error) is type(want.error)
    skip = {"operation_id", "error", "value", "last"}
    assert ({f.name: getattr(got, f.name) for f in dataclasses.fields(Outcome) if f.name not in skip}
            == {f.name: getattr(want, f.name) for f in dataclasses.fields(Outcome)
                if f.name not in skip})
    assert (getattr(got.last, "status_code", None) == getattr(want.last, "status_code", None))


# About one example in four takes the quick first attempt and one in eight of those goes on
# in the flow: 800 examples in CI reach that check ~100 times (400 reached it as few as 24).
@settings(max_examples=examples(150, cap=800))
@given(policy=policies(), start=st.floats(0, 1e6, allow_nan=False), seed=st.integers(0, 99),
       method=st.sampled_from(["GET", "HEAD", "PUT", "POST"]), keys=st.booleans(),
       auto=st.booleans(), validate=st.booleans(), asynchronous=st.booleans(),
       coordinated=st.booleans(), steps=st.lists(quick_steps, min_size=1, max_size=4))
def test_the_transports_quick_first_attempt_matches_the_full_path(
    policy: rb.Policy, start: float, seed: int, method: str, keys: bool, auto: bool,
    validate: bool, asynchronous: bool, coordinated: bool, steps: list[tuple[Any, ...]],
) -> None:
    """The quick first attempt gives up nothing: the same outcome, stats, sends (each attempt
    sent once: the first is never sent again), request headers and timeouts, sleeps and
    random state as the full path, sync and async, under any profile (``auto`` too); with a
    coordinator (the first attempt sent before any Operation is built), the coordinator
    asked the same."""
    from tests.support.strategies import reached, tried

    tried("quick")
    if auto:
        policy = policy.replace(profile="auto")
    extensions = {"retrybudget.validator": lambda r: r.status_code != 201} if validate else {}
    (fast, fast_inner, fast_r), (slow, slow_inner, slow_r) = _quick_twins(
        policy, start, seed, keys, steps, asynchronous, coordinated)
    url = "https://api.github.com/repos/octo/demo?page=2"

    def send(transport: Any) -> Any:
        request = httpx.Request(method, url, extensions=dict(extensions))
        if asynchronous:
            return asyncio.run(transport.handle_async_request(request))
        return transport.handle_request(request)

    quick_before = fast._quick(httpx.Request(method, url, extensions=dict(extensions)))
    got = _ending(lambda: send(fast))
    want = _ending(lambda: send(slow))
    _same_ending(got, want)
    assert len(fast_inner.sent) == len(slow_inner.sent) == got[0].attempts
    for (m1, h1, t1), (m2, h2, t2) in zip(fast_inner.sent, slow_inner.sent, strict=True):
        assert (m1, t1) == (m2, t2)
        assert h1.keys() == h2.keys()  # a generated idempotency key differs by value only
    assert fast_r.clock.sleeps == slow_r.clock.sleeps  # type: ignore[attr-defined]
    assert fast_r.random.getstate() == slow_r.random.getstate()
    if coordinated:
        assert _coordinator_state(fast_r) == _coordinator_state(slow_r)
        assert fast_r.coordinator.stats() == slow_r.coordinator.stats()
        if fast._coordinated(httpx.Request(method, url, extensions=dict(extensions))) is not None:
            reached("quick", "coordinated, no operation built")
    if quick_before is not None:
        reached("quick", "quick first attempt")
        if got[0].ok and got[0].attempts == 1 and any(
                shape is not None for _key, shape in fast._engine.shapes.values()):
            reached("quick", "handed over unread")
        if got[0].attempts > 1 or not got[0].ok:
            reached("quick", "went on in the flow")  # from the quick attempt, never resent


def test_the_quick_property_reached_its_checks() -> None:
    from tests.support.strategies import assert_reached

    assert_reached("quick", ("quick first attempt", "handed over unread"))
    # about one example in 32 goes on in the flow: a short run of 150 reached it 4 times
    assert_reached("quick", ("went on in the flow",), per=75)


@pytest.mark.parametrize("coordinated", [False, True])
@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("headers", [
    {"x-ratelimit-limit": "10", "x-ratelimit-remaining": "50"},  # remaining above the limit
    {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1800000600"},  # spent, on a 200
    {"retry-after": "120"},
    {"x-ratelimit-limit": "10", "x-ratelimit-remaining": "5", "x-ratelimit-reset": "1800000600"},
])
def test_a_success_handed_over_unread_has_the_full_paths_evidence(
        headers: dict[str, str], asynchronous: bool, coordinated: bool) -> None:
    """A 2xx known ok before its headers are read: its conflicts, evidence and detail, read
    later, are the full path's (which classifies it at once); with a coordinator (the 2xx
    classified when its outcome's classification is read, its quota learnt at once), the
    coordinator is told the same."""
    steps = [(200, headers, 0.01)]
    (fast, _fi, fast_r), (slow, _si, slow_r) = _quick_twins(
        rb.Policy(profile="github"), 100.0, 1, False, steps, asynchronous, coordinated)

    def send(transport: Any) -> Any:
        request = httpx.Request("GET", "https://api.github.com/repos/o/r")
        if asynchronous:
            return asyncio.run(transport.handle_async_request(request))
        return transport.handle_request(request)

    got, want = _ending(lambda: send(fast)), _ending(lambda: send(slow))
    if coordinated:
        assert _coordinator_state(fast_r) == _coordinator_state(slow_r)
        assert fast_r.coordinator.stats() == slow_r.coordinator.stats()
    else:
        assert any(shape is not None for _key, shape in fast._engine.shapes.values())
    _same_ending(got, want)
    assert got[0].detail == "ok"
    assert got[0].history[0].evidence == want[0].history[0].evidence != ()
    if headers.get("x-ratelimit-remaining") == "50":  # above its limit
        assert got[0].conflicts
        assert got[0].conflicts == want[0].conflicts


# The requests adapter's quick first attempt -----------------------------------------------

def _scripted_send(self: Any, request: Any, stream: bool = False, timeout: Any = None,
                   *_args: Any, **_kwargs: Any) -> Any:
    """``HTTPAdapter.send`` played from the adapter's script (as :class:`_Scripted`)."""
    import requests

    script: _Scripted = self.script
    step = script.steps[min(len(script.sent), len(script.steps) - 1)]
    script.sent.append((request.method, dict(request.headers), timeout))
    what, headers, took = step
    script.clock.advance(took)
    if what == "connect":
        raise requests.exceptions.ConnectionError("refused")
    if what == "read":
        raise requests.exceptions.ReadTimeout("slow")
    if what == "bug":
        raise KeyError("bug")
    response = requests.Response()
    response.status_code, response.reason, response.url = what, "", request.url
    response.headers = requests.structures.CaseInsensitiveDict(headers)
    response._content = b'{"ok": true}'
    response.request = request
    return response


@given(policy=policies(), start=st.floats(0, 1e6, allow_nan=False), seed=st.integers(0, 99),
       method=st.sampled_from(["GET", "HEAD", "PUT", "POST"]), keys=st.booleans(),
       auto=st.booleans(), stream=st.booleans(), timeout=st.sampled_from([None, 0.5, (1, 30)]),
       steps=st.lists(quick_steps, min_size=1, max_size=4))
def test_the_adapters_quick_first_attempt_matches_the_full_path(
    policy: rb.Policy, start: float, seed: int, method: str, keys: bool, auto: bool,
    stream: bool, timeout: Any, steps: list[tuple[Any, ...]],
) -> None:
    """The requests adapter's quick first attempt (a 2xx handed over unread) gives up nothing:
    the same outcome, stats, sends and timeouts, sleeps and random state as the full path."""
    from unittest import mock

    import requests
    from requests.adapters import HTTPAdapter

    from retrybudget.integrations.requests import RetryAdapter
    from tests.support.strategies import reached, tried

    tried("adapter")
    if auto:
        policy = policy.replace(profile="auto")
    twins = []
    for quick in (True, False):
        clock = FakeClock(monotonic=start)
        retrier = rb.Retrier(policy=policy, clock=clock, random=random.Random(seed))
        adapter: Any = RetryAdapter(retrier, generate_idempotency_keys=keys)
        adapter.script = _Scripted(clock, steps)
        if not quick:
            adapter._engine.quick = None
            adapter._engine.quick_routed = False
        twins.append(adapter)
    fast, slow = twins
    url = "https://api.github.com/repos/octo/demo?page=2"

    def send(adapter: Any) -> Any:
        request = requests.Request(method, url).prepare()
        return adapter.send(request, stream=stream, timeout=timeout)

    quick_before = fast._engine.unread_of(url, method)
    with mock.patch.object(HTTPAdapter, "send", _scripted_send):
        got, want = _ending(lambda: send(fast)), _ending(lambda: send(slow))
    (got_outcome, got_response), (want_outcome, want_response) = got, want
    assert (got_response is None) == (want_response is None)
    if got_response is not None:
        assert got_response.retrybudget == {**want_response.retrybudget,
                                            "operation_id": got_outcome.operation_id}
    assert type(got_outcome.error) is type(want_outcome.error)
    skip = {"operation_id", "error", "value", "last"}
    assert ({f.name: getattr(got_outcome, f.name) for f in dataclasses.fields(Outcome)
             if f.name not in skip}
            == {f.name: getattr(want_outcome, f.name) for f in dataclasses.fields(Outcome)
                if f.name not in skip})
    assert len(fast.script.sent) == len(slow.script.sent) == got_outcome.attempts
    for (m1, h1, t1), (m2, h2, t2) in zip(fast.script.sent, slow.script.sent, strict=True):
        assert (m1, t1) == (m2, t2)
        assert h1.keys() == h2.keys()
    assert fast.retrier.clock.sleeps == slow.retrier.clock.sleeps
    assert fast.retrier.random.getstate() == slow.retrier.random.getstate()
    if quick_before is not None:
        reached("adapter", "quick first attempt")
        if got_outcome.ok and got_outcome.attempts == 1 and (
                got_response is not None and 200 <= got_response.status_code < 300):
            reached("adapter", "handed over unread")
        if got_outcome.attempts > 1 or not got_outcome.ok:
            reached("adapter", "went on in the flow")


def test_the_adapter_property_reached_its_checks() -> None:
    from tests.support.strategies import assert_reached

    assert_reached("adapter", ("quick first attempt", "handed over unread", "went on in the flow"))


# The coordinated first attempt ------------------------------------------------------------

_COORDINATED_URLS = st.sampled_from([None, "https://api.github.com/repos/o/r",
                                     "https://slack.com/api/chat.postMessage",
                                     "https://discord.com/api/v10/channels/42/messages"])
# Slack's bucket is the Web API method (one gate, not the key); Discord's route asks two.
_BUCKETED = st.sampled_from([None, "slack", "discord"])


def _coordinated_twin(policy: rb.Policy, start: float, seed: int, method: str | None,
                      hooks: tuple[object, ...]) -> rb.Retrier:
    clock = FakeClock(monotonic=start)
    return rb.Retrier(policy=policy, clock=clock, random=random.Random(seed), method=method,
                      coordinator=rb.MemoryCoordinator(clock=clock), hooks=hooks)


def _coordinator_state(retrier: rb.Retrier) -> list[tuple[Any, ...]]:
    coordinator = retrier.coordinator
    assert isinstance(coordinator, rb.MemoryCoordinator)
    return [(name, k.schedule, k.breaker, k.budget, list(k.slots), dict(k.leases), k.last_write)
            for name, k in sorted(coordinator._keys.items())]


@given(policy=policies(), start=st.floats(0, 1e6, allow_nan=False), seed=st.integers(0, 99),
       method=st.sampled_from([None, "GET", "POST"]), url=_COORDINATED_URLS,
       held=st.sampled_from([0.0, 0.5, 30.0]), asynchronous=st.booleans(), bucketed=_BUCKETED,
       merged=st.booleans(),
       operations=st.lists(st.lists(st.one_of(response_steps, attempt_steps), min_size=1,
                                    max_size=3), min_size=1, max_size=4))
def test_the_coordinated_first_attempt_matches_the_generic_flow(
    policy: rb.Policy, start: float, seed: int, method: str | None, url: str | None,
    held: float, asynchronous: bool, bucketed: str | None, merged: bool,
    operations: list[list[tuple[Any, ...]]],
) -> None:
    """With a coordinator and no hook, ``run`` (and ``arun``) makes the first attempt without the generic
    flow: the same outcomes, sleeps and samples, and the coordinator asked the same (its
    gate, slots, leases, breaker, budget and counters equal after every operation), whether
    the memory coordinator answers by its two merged calls or each action through
    ``handle``."""
    from retrybudget.core.actions import RequestInfo
    from tests.support.strategies import reached, tried

    tried("coordinated")
    if bucketed is not None:
        policy = policy.replace(profile=bucketed)
    fast = _coordinated_twin(policy, start, seed, method, ())
    slow = _coordinated_twin(policy, start, seed, method, (object(),))  # a hook: the generic flow
    if not merged:  # the coordinator asked through handle, as a custom coordinator is
        fast.__dict__["_merged"] = None
    reached("coordinated", "merged calls" if merged else "through handle")
    key = "https://api.example.com"
    if held:
        for retrier in (fast, slow):
            retrier.coordinator.hold(key, held)  # type: ignore[attr-defined]
    request = RequestInfo(method=method, key=key, url=url)
    for steps in operations:
        outcomes = []
        for retrier in (fast, slow):
            clock = retrier.clock
            assert isinstance(clock, FakeClock)
            perform = _performer(retrier, clock, steps)
            if asynchronous:
                async def aperform(attempt: Any, perform: Any = perform) -> AttemptResult:
                    result: AttemptResult = perform(attempt)
                    return result

                outcomes.append(asyncio.run(retrier.arun(aperform, request)))
            else:
                outcomes.append(retrier.run(perform, request))
        got, want = outcomes
        _same(got, want)
        assert type(want) is Outcome
        reached("coordinated", "ended at the first attempt" if type(got) is not Outcome
                else "went on in the flow")
        assert _coordinator_state(fast) == _coordinator_state(slow)
        assert fast.coordinator.stats() == slow.coordinator.stats()
    assert fast.clock.sleeps == slow.clock.sleeps  # type: ignore[attr-defined]
    assert fast.random.getstate() == slow.random.getstate()


def test_the_coordinated_property_reached_its_checks() -> None:
    from tests.support.strategies import assert_reached

    assert_reached("coordinated", ("ended at the first attempt", "went on in the flow",
                                   "merged calls", "through handle"))
