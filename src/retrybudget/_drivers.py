"""The sync and async drivers: thin loops that perform the flow's actions.

Both loops only *act*: every decision comes from :func:`~retrybudget.core.flow.operation_flow`.
They differ by ``await`` alone, and share the dispatch of hooks and the reading of results.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import inspect
import itertools
import json
import os
import random as _random
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, Protocol, TypeVar, cast, overload

from ._clock import SYSTEM_CLOCK, Clock, monotonic_reader, wall_reader
from ._native import carry, is_sdk_error, method_of, observe_error, stdlib_failure_kind
from .coordination import Coordinator, NoCoordination
from .core.actions import (
    Acquire,
    Action,
    Admission,
    Admit,
    Attempt,
    AttemptResult,
    Finish,
    Learn,
    Permit,
    RequestInfo,
    Sleep,
)
from .core.classify import (
    MESSAGE_LIMIT,
    Classified,
    FailureKind,
    FailureSeen,
    Kind,
    Observation,
    ResponseSeen,
    classify,
)
from .core.decide import Retry, Stop, decide, patience, plan_attempt, plan_next, plan_wait
from .core.flow import FlowGen, operation_flow
from .core.outcome import Outcome, Reason, first_ok
from .core.outcome import operation_id as _format_id
from .core.policy import Policy, PolicyError, Validator
from .core.profiles import Profile
from .core.state import OperationState
from .core.throttle import Throttle, throttle_of
from .observe import AttemptEvent, WaitEvent, log_hooks, notify

__all__ = [
    "CALL_FIELDS",
    "PLAIN_OK",
    "Begun",
    "BoundRetrier",
    "CallInterpreter",
    "Interpreter",
    "Retrier",
    "attempt_timeout",
    "call",
    "ended",
    "last_failed_outcome",
    "acall",
    "retrying",
]

T = TypeVar("T")
P = ParamSpec("P")

_ATTEMPT_TIMEOUT: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "retrybudget_attempt_timeout", default=None
)


_TAKEN: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "retrybudget_attempt_timeout_taken", default=False)
"""Whether the running sync attempt took its timeout (read :func:`attempt_timeout`, or got it
as ``timeout_kwarg``): it can end by it. One that did not can be cut by nothing (rule 13)."""


def attempt_timeout() -> float | None:
    """Inside an attempt: the seconds it may take (clipped to the deadline), or None.

    A sync attempt that reads it is taken to end by it (its client bounds the exchange with
    it); one that never does is not, and the next attempt of its operation is only started
    when one as long as the longest of those would still end by the deadline.
    """
    _TAKEN.set(True)
    return _ATTEMPT_TIMEOUT.get()


_LAST_FAILED: contextvars.ContextVar[Outcome[Any] | None] = contextvars.ContextVar(
    "retrybudget_last_failed_outcome", default=None
)


def last_failed_outcome() -> Outcome[Any] | None:
    """The outcome of the last operation in this context (thread, task) that did not end ok,
    or None.

    For an SDK that drops the response it raises over (Stripe's errors carry neither the
    response nor its extensions): in the ``except`` block, this is the outcome of the call
    that failed, its ``retry_at`` included. Any operation counts: a transport's, an adapter's,
    ``Retrier.call``'s.
    """
    return _LAST_FAILED.get()


def ended(outcome: Outcome[Any]) -> Outcome[Any]:
    """An operation's outcome as the flow ended it: its error carries it, and one that is not
    ok is this context's :func:`last_failed_outcome`."""
    if outcome.error is not None:  # raised, and perhaps raised again: rb.outcome_of
        carry(outcome.error, outcome)
    if outcome.reason is not Reason.OK:
        _LAST_FAILED.set(outcome)
    return outcome


class Interpreter(Protocol):
    """Turns what a callable returned or raised into an :data:`Observation`."""

    def value(self, value: object) -> Observation:
        """What a returned value means."""
        ...

    def error(self, error: BaseException) -> Observation:
        """What a raised exception means."""
        ...


def validated(validator: Validator | None, payload: object) -> tuple[str, object]:
    """Run a payload validator: the reason it failed ("" when it passed) and what it returned
    (the parsed payload; None when it failed or there is no validator)."""
    if validator is None:
        return "", None
    try:
        verdict = validator(payload)
    except Exception as exc:  # a validator's failure is the payload's verdict
        return f"validator raised {type(exc).__name__}", None
    return ("validator returned False", None) if verdict is False else ("", verdict)


def validation_error(validator: Validator | None, payload: object) -> str:
    """Run a payload validator: the reason it failed, or "" when it passed."""
    return validated(validator, payload)[0]


_PLAIN_TYPES = frozenset({type(None), bool, int, float, complex, str, bytes, bytearray, list,
                          tuple, dict, set, frozenset})
"""Built-in types whose values are never read as HTTP responses."""

_PLAIN_VALUE = ResponseSeen(200)
"""What a returned value means when there is no validator (a frozen value, made once)."""

PLAIN_OK = _PLAIN_VALUE
"""A 200 with no header the classifier reads: an integration's first attempt that saw one
hands this over, and the first-attempt fast path reuses its classification, worked out once."""


@dataclass(frozen=True, slots=True)
class CallInterpreter:
    """The interpreter for plain callables.

    A returned value with an integer ``status_code`` (or ``status``) and ``headers`` is read
    as an HTTP response (and the method of its ``request``, when it has one); any other value
    is a success, subject to the validator.

    A raised exception of an HTTP library is read natively, without configuration: httpx's
    ``HTTPStatusError``, requests' ``HTTPError``, aiohttp's ``ClientResponseError`` and
    ``urllib.error.HTTPError`` are the response they carry (status, headers, the body text
    when it was read, the request's method), classified by the profile as the integrations
    classify responses; their transport errors, and urllib3's, are the failure kinds the
    integrations map them to (a connect failure is known never to have been sent). The
    official SDKs' errors are read the same way (openai, anthropic, Stripe, githubkit,
    PyGithub, slack_sdk: the response they carry, else their status and headers, else the
    transport error they wrap), and so is anyone's error carrying an HTTP library's response
    as ``.response``. A
    :class:`json.JSONDecodeError` (``response.json()`` of a body that is not JSON) is an
    invalid payload. Of the standard library's errors, :class:`ConnectionRefusedError` is a
    connect failure, :class:`TimeoutError` a timeout, :class:`ConnectionError` (and
    ``retry_on``) a network failure. Any other exception (``ValueError``, ``KeyError``… a bug
    in the caller's code) is ``unexpected`` and never retried.
    """

    validator: Validator | None = None
    retry_on: tuple[type[BaseException], ...] = ()
    profile: Profile | None = None
    """The profile in force: a 2xx body is read only when it asks (:meth:`Profile.reads_body`)."""
    method: str | None = None
    """The method the retrier's requests use, for a response that names none (None: any)."""

    def value(self, value: object) -> Observation:
        """Read a returned value."""
        # Built-in values have no status to read: they are values, subject to the validator.
        status = None if type(value) in _PLAIN_TYPES else getattr(
            value, "status_code", getattr(value, "status", None))
        if isinstance(status, int) and not isinstance(status, bool) and hasattr(value, "headers"):
            headers = getattr(value, "headers", None) or {}
            method = method_of(value)
            message = ""
            if status >= 400 or (self.profile is not None
                                 and self.profile.reads_body(status, method or self.method)):
                message = _read_text(value)  # a 2xx body signal: GraphQL RATE_LIMITED, THROTTLED
            payload_error = validation_error(self.validator, value) if 200 <= status < 300 else ""
            try:
                return ResponseSeen.of(status, headers, message=message, payload_error=payload_error,
                                       method=method)
            except (TypeError, ValueError, AttributeError):
                return FailureSeen(FailureKind.PROTOCOL, type(value).__name__)
        if self.validator is None:
            return _PLAIN_VALUE
        return ResponseSeen(200, payload_error=validation_error(self.validator, value))

    def error(self, error: BaseException) -> Observation:
        """Read a raised exception."""
        if isinstance(error, json.JSONDecodeError):  # requests' own is one too
            return FailureSeen(FailureKind.PROTOCOL, type(error).__name__)
        seen = observe_error(error)
        if seen is not None and not (isinstance(seen, FailureSeen) and seen.kind is FailureKind.ERROR):
            return seen
        # Not a provider failure the libraries name: the standard library's errors, retry_on.
        method = None if seen is None else seen.method
        return FailureSeen(stdlib_failure_kind(error, self.retry_on), type(error).__name__, method=method)


def _read_text(response: object) -> str:
    """The body text of a returned response, only when its body was read already (bounded).

    A body not read yet is never read here: an unread requests body (``_content`` False, a
    ``stream=True`` response) and an httpx stream (``ResponseNotRead``) read as ``""``, and so
    does a ``text`` that is not a string (aiohttp's is a coroutine method).
    """
    own = getattr(response, "__dict__", None)
    if isinstance(own, dict) and own.get("_content", True) in (False, None):
        return ""  # requests: the body was not read
    try:
        text = getattr(response, "text", "")
    except Exception:  # httpx.ResponseNotRead and the like: a stream nobody read
        return ""
    return text[:MESSAGE_LIMIT] if isinstance(text, str) else ""


def _is_callers_error(outcome: Outcome[Any]) -> bool:
    """Whether an outcome ended on an error that is not a provider failure (a bug)."""
    if outcome.reason is not Reason.UNEXPECTED or outcome.error is None or not outcome.history:
        return False
    return outcome.history[-1].status is None  # raised, and read as no provider answer


class _OperationIds:
    """Unique, cheap operation ids: a random per-process prefix and a counter."""

    def __init__(self) -> None:
        self.reseed()
        os.register_at_fork(after_in_child=self.reseed)

    def reseed(self) -> None:
        self.prefix = secrets.token_hex(5)
        self.counter = itertools.count(1)

    def __call__(self) -> str:
        return _format_id(self.prefix, next(self.counter))


_operation_id = _OperationIds()

_Begun = tuple[str, int, float, float, "float | Stop | None"]
"""An operation begun by the fast path: its id's prefix and number, start, attempt start, plan."""

Begun = _Begun
"""An operation begun by :meth:`Retrier._begin` (for an integration's quick first attempt)."""

_CoordinatedFirst = tuple[str, int, RequestInfo, OperationState, list[float], list[float],
                          list[float]]
"""A coordinated operation's first attempt under way: its id's prefix and number, request,
start state, the monotonic and wall readings taken and the samples drawn (for a replay)."""

_Pending = tuple[str, list[float], float]
"""A first attempt that did not end the operation ok: the operation id, the monotonic
readings taken (start, attempt start, attempt end) and the wall reading, to go on from."""


class _Described(Protocol):
    """What the first-attempt fast path reads of a request: its method, key and job id."""

    @property
    def method(self) -> str | None: ...
    @property
    def key(self) -> str: ...
    @property
    def job_id(self) -> str | None: ...


def _next_action(flow: FlowGen, reply: object, pending: Action | None) -> Action | Outcome[object]:
    """The flow's next action (``pending``, when one is not performed yet), or its outcome."""
    if pending is not None:
        return pending
    try:
        return flow.send(reply)
    except StopIteration as done:
        return cast("Outcome[object]", done.value)


class FirstGate(Protocol):
    """A coordinator's merged admit and acquire of a first attempt (the in-process backend's
    ``_first_gate``): the admission, and the permit when it admits."""

    def __call__(self, key: str, bucket: str, write_gap: float, max_wait: float | None,
                 fail_fast: bool, /) -> tuple[Admission, Permit | None]: ...


class FirstDone(Protocol):
    """A coordinator's merged final learn and finish of an operation (``_first_done``)."""

    def __call__(self, bucket: str, throttle: Throttle | None, lease: str | None, key: str,
                 outcome: Outcome[Any], probe: bool, /) -> None: ...


class _Replay:
    """A clock that first answers with readings already taken, then reads the real one.

    The first-attempt fast path reads the clock where the flow would (start, attempt start,
    after the attempt); when the attempt turns out not to be a plain success, the generic
    flow runs over this clock, so it sees exactly those readings and decides exactly as if it
    had made the attempt itself.
    """

    __slots__ = ("clock", "monotonics", "walls")

    def __init__(self, clock: Clock, monotonics: list[float], walls: list[float]) -> None:
        self.clock = clock
        self.monotonics = monotonics
        self.walls = walls

    def monotonic(self) -> float:
        return self.monotonics.pop(0) if self.monotonics else self.clock.monotonic()

    def wall(self) -> float:
        return self.walls.pop(0) if self.walls else self.clock.wall()

    def sleep(self, seconds: float) -> None:
        self.clock.sleep(seconds)

    async def async_sleep(self, seconds: float) -> None:
        await self.clock.async_sleep(seconds)


@dataclass(frozen=True, slots=True)
class _FirstSuccess:
    """What the rules say of a plain value returned at the first attempt, worked out once.

    A plain value (no validator, no status to read) is the constant observation
    ``_PLAIN_VALUE``: its classification has no headers, so no clock or state in it, and the
    decision after it is a terminal ``ok``. :func:`_first_success` asks the real
    :func:`classify` and :func:`decide` once per policy, checks the answer does not depend on
    the time, the state or the sample, and the fast path reuses it.
    """

    classified: Classified
    detail: str
    plain: bool = False
    """The interpreter reads every built-in value as ``_PLAIN_VALUE`` (no validator)."""
    monotonic: Callable[[], float] = SYSTEM_CLOCK.monotonic
    """Reads the retrier's clock."""


def _first_success(policy: Policy) -> _FirstSuccess | None:
    """The classification and decision of a plain first-attempt success, or None if they vary."""
    seen = [classify(policy.profile, _PLAIN_VALUE, wall) for wall in (0.0, 1_800_000_000.0)]
    if seen[0] != seen[1]:
        return None
    classified = seen[0]
    if classified.kind is not Kind.OK or classified.conflicts or classified.rate.evidence:
        return None
    decisions = {
        decide(policy, dataclasses.replace(OperationState.start(policy, "probe", now), attempts=n),
               classified, now + 0.5, wall, sample)
        for now, wall, sample, n in ((0.0, 0.0, 0.0, 0), (1e6, 1.8e9, 0.999, policy.max_attempts - 1))
    }
    if len(decisions) != 1:
        return None
    decision = decisions.pop()
    if (not isinstance(decision, Stop) or decision.reason is not Reason.OK
            or decision.retry_at is not None or decision.detail != classified.detail):
        return None
    return _FirstSuccess(classified, decision.detail)


@dataclass(frozen=True)
class Retrier:
    """Runs logical operations under one policy, clock, coordinator and set of hooks.

    A retrier is a frozen value: derive variants with :meth:`with_options`. Use
    :meth:`call` / :meth:`acall` for any callable, or :meth:`run` / :meth:`arun` to drive
    attempts yourself (the HTTP integrations do).

    Its fields are of two kinds. The *engine* (``policy``, ``clock``, ``coordinator``,
    ``hooks``, ``random``) is what the retrier is, shared by every operation it runs. The
    *call* (:data:`CALL_FIELDS`: ``key``, ``method``, ``idempotency_key``, ``job_id``,
    ``interpreter``, ``timeout_kwarg``) describes what one call is; the fields given here are
    the default description, and :meth:`on` binds another one to the same engine.

    Attributes:
        policy: the budget and rules.
        clock: where time comes from (inject a FakeClock in tests).
        coordinator: shared state across workers (breaker, gate, budget).
        hooks: called before attempts, before waits and on outcomes.
        random: the jitter source (inject a seeded ``random.Random`` for determinism).
        key: the provider key operations are coordinated under.
        method: the request method. None for a plain callable: the method is then read from
            the request an HTTP library's exception (or a returned response) names, and a call
            that names none is treated as safe to repeat.
        idempotency_key: the request carries an idempotency key.
        job_id: the caller's fixture or job id, for audit.
        interpreter: how returned values and raised errors are read.
        timeout_kwarg: if set, each attempt's timeout is passed to the callable under this name.
    """

    policy: Policy = field(default_factory=Policy)
    clock: Clock = SYSTEM_CLOCK
    coordinator: Coordinator = field(default_factory=NoCoordination)
    hooks: tuple[object, ...] = ()
    random: _random.Random = field(default_factory=_random.Random, compare=False)
    key: str = "default"
    method: str | None = None
    idempotency_key: bool = False
    job_id: str | None = None
    interpreter: Interpreter | None = None
    timeout_kwarg: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.policy, Policy):
            raise PolicyError(f"policy must be a Policy, got {type(self.policy).__name__}")
        if not isinstance(self.coordinator, Coordinator):
            raise PolicyError("coordinator must be a retrybudget Coordinator")
        object.__setattr__(self, "hooks", tuple(self.hooks))

    def with_options(self, **changes: Any) -> Retrier:
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def on(self, **call: Any) -> BoundRetrier:
        """This engine bound to the description of a call: what ``call``/``run`` then describe.

        ``call`` takes the call's fields only (:data:`CALL_FIELDS`: ``key``, ``method``,
        ``idempotency_key``, ``job_id``, ``interpreter``, ``timeout_kwarg``); the engine's
        (policy, clock, coordinator, hooks, random) stay this retrier's, so one engine serves
        every kind of call::

            engine = Retrier(policy=interactive(), coordinator=shared)
            bookings = engine.on(key="https://api.example.com", method="POST", idempotency_key=True)
            outcome = bookings.call(create_booking, payload)

        Raises:
            TypeError: a name that is not a call field (an engine setting belongs to the
                retrier: ``with_options``).
        """
        unknown = sorted(set(call) - CALL_FIELDS)
        if unknown:
            raise TypeError(f"Retrier.on() takes the call's fields {sorted(CALL_FIELDS)}, "
                            f"not {unknown} (an engine setting: use with_options)")
        bound = dataclasses.replace(self, **call)
        if "interpreter" not in call and "_fast" in self.__dict__:
            # The first-success answer depends on the engine and the interpreter only.
            bound.__dict__["_fast"] = self.__dict__["_fast"]
        return BoundRetrier(bound)

    @functools.cached_property
    def _request(self) -> RequestInfo:
        return RequestInfo(method=self.method, key=self.key,
                           has_idempotency_key=self.idempotency_key, job_id=self.job_id)

    def _flow(self, request: RequestInfo | None, operation_id: str) -> tuple[FlowGen, RequestInfo]:
        req = request or self._request
        coordinated = not self.coordinator.passive
        flow = operation_flow(self.policy, req, self.clock, operation_id=operation_id,
                              sample=self.random.random, coordinated=coordinated,
                              report=coordinated or bool(log_hooks(self.hooks)))
        return flow, req

    def _announce(self, action: Action, request: RequestInfo, operation_id: str) -> None:
        hooks = log_hooks(self.hooks)
        if not hooks:
            return
        if isinstance(action, Attempt):
            notify(hooks, "before_attempt",
                   AttemptEvent(operation_id, request, action.number, action.timeout))
        elif isinstance(action, Sleep):
            notify(hooks, "before_wait", WaitEvent(operation_id, request, action.wait))
        elif isinstance(action, Finish):
            notify(hooks, "on_outcome", action.outcome, request)

    def run(
        self,
        perform: Callable[[Attempt], AttemptResult],
        request: RequestInfo | None = None,
        *,
        operation_id: str | None = None,
    ) -> Outcome[object]:
        """Drive one operation synchronously; ``perform`` makes each attempt."""
        monotonic = self._fast_run
        if monotonic is not None and operation_id is None and not log_hooks(()):
            # The first-attempt fast path (as in :meth:`call`): an attempt classified ok ends
            # the operation without the generic flow; anything else goes on in it.
            req = request or self._request
            begun = self._begin(monotonic)
            plan = begun[4]
            if isinstance(plan, Stop):
                return self._drive(self._unplanned(begun, req), perform, None)
            result = perform(Attempt(1, plan))
            ended = self._after(begun, req, monotonic, result)
            return ended if isinstance(ended, Outcome) else self._drive(ended, perform, result)
        if self._coordinated_first and operation_id is None and not log_hooks(()):
            return self._run_coordinated(perform, request or self._request)
        op_id = operation_id or _operation_id()
        flow, req = self._flow(request, op_id)
        return self._drive(flow, perform, None, req, op_id)

    async def arun(
        self,
        perform: Callable[[Attempt], Awaitable[AttemptResult]],
        request: RequestInfo | None = None,
        *,
        operation_id: str | None = None,
    ) -> Outcome[object]:
        """Drive one operation asynchronously; ``perform`` makes each attempt."""
        monotonic = self._fast_run
        if monotonic is not None and operation_id is None and not log_hooks(()):
            # The first-attempt fast path (as in :meth:`call`): an attempt classified ok ends
            # the operation without the generic flow; anything else goes on in it.
            req = request or self._request
            begun = self._begin(monotonic)
            plan = begun[4]
            if isinstance(plan, Stop):
                return await self._adrive(self._unplanned(begun, req), perform, None)
            result = await perform(Attempt(1, plan))
            ended = self._after(begun, req, monotonic, result)
            return ended if isinstance(ended, Outcome) else await self._adrive(ended, perform, result)
        if self._coordinated_first and operation_id is None and not log_hooks(()):
            return await self._arun_coordinated(perform, request or self._request)
        op_id = operation_id or _operation_id()
        flow, req = self._flow(request, op_id)
        return await self._adrive(flow, perform, None, req, op_id)

    @functools.cached_property
    def _interpreter(self) -> Interpreter:
        policy = self.policy
        return self.interpreter or CallInterpreter(validator=policy.validator, profile=policy.profile,
                                                   method=self.method)

    @functools.cached_property
    def _fast(self) -> _FirstSuccess | None:
        """The first-attempt fast path's answer, when nobody needs the flow's actions."""
        if self.hooks or not self.coordinator.passive or self.policy.profile.routes:
            return None  # profile="auto" picks the profile per request: the flow resolves it
        found = _first_success(self.policy)
        if found is None:
            return None
        interp = self._interpreter
        plain = type(interp) is CallInterpreter and interp.validator is None
        return dataclasses.replace(found, plain=plain, monotonic=monotonic_reader(self.clock))

    @functools.cached_property
    def _fast_run(self) -> Callable[[], float] | None:
        """The clock reader of :meth:`run`'s first-attempt fast path, when nobody needs the flow."""
        if self.hooks or not self.coordinator.passive or self.policy.profile.routes:
            return None  # profile="auto" picks the profile per request: the flow resolves it
        return monotonic_reader(self.clock)

    def _settled(self, result: AttemptResult, request: _Described, wall: float) -> Classified | None:
        """The classification of a first attempt that ends the operation as ok, else None.

        An ``ok`` classification is terminal (the decision stops with its detail, no retry
        time) and, with no conflicting evidence and no method learnt from the attempt, adds
        nothing to the operation's state but its one record.
        """
        seen = result.observation
        if seen.method is not None and request.method is None:
            return None
        classified = classify(self.policy.profile, seen, wall)
        if classified.kind is not Kind.OK or classified.conflicts:
            return None
        return classified

    def _begin(self, monotonic: Callable[[], float]) -> _Begun:
        """Start an operation as the flow does: its id, start, first attempt's start and plan."""
        ids = _operation_id
        prefix, number = ids.prefix, next(ids.counter)
        t0 = monotonic()
        t1 = monotonic()
        deadline = self.policy.deadline  # the plan of a fresh state (OperationState.start's)
        return prefix, number, t0, t1, plan_next(
            self.policy, 0, None if deadline is None else t0 + deadline - t1, None)

    def _unplanned(self, begun: _Begun, request: RequestInfo) -> FlowGen:
        """The generic flow of an operation whose first attempt the plan refused."""
        prefix, number, t0, t1, _plan = begun
        return self._replayed(_format_id(prefix, number), request, [t0, t1], [])

    def _after(self, begun: _Begun, request: RequestInfo, monotonic: Callable[[], float],
               result: AttemptResult, known: Classified | None = None) -> Outcome[Any] | FlowGen:
        """After the first attempt: its outcome if it ended ok, else the generic flow to go on in.

        ``known`` is the classification of the plain value, when the caller has it worked out.
        """
        ended = self._first_ended(begun, request, monotonic, result, known)
        if isinstance(ended, Outcome):
            return ended
        return self._after_first(ended[0], request, ended[1], ended[2])

    def _resumed(self, begun: _Begun, request: RequestInfo,
                 result: AttemptResult | None) -> Outcome[Any] | FlowGen:
        """After an integration's quick first attempt (its operation built only now): the
        outcome if it ended ok, else the generic flow to go on in (``result`` None: the plan
        refused the attempt, and the flow ends the operation)."""
        if result is None:
            return self._unplanned(begun, request)
        monotonic: Callable[[], float] = self._fast_run  # type: ignore[assignment]  # quick
        return self._after(begun, request, monotonic, result)

    def _first_ended(self, begun: _Begun, request: _Described, monotonic: Callable[[], float],
                     result: AttemptResult, known: Classified | None = None,
                     ) -> Outcome[Any] | _Pending:
        """After the first attempt: its outcome if it ended ok, else the readings to go on from.

        ``request`` needs only the method, key and job id the outcome reads: a transport's
        first attempt builds the full :class:`RequestInfo` only for :meth:`_after_first`.
        """
        prefix, number, t0, t1, plan = begun
        assert not isinstance(plan, Stop)  # noqa: S101 - an attempt was made
        t2 = monotonic()
        if known is not None and result.observation is _PLAIN_VALUE:
            seen = known
        else:
            wall = self.clock.wall()
            found = self._settled(result, request, wall)
            if found is None:
                return _format_id(prefix, number), [t0, t1, t2], wall
            seen = found
        self.random.random()  # the flow draws one sample per decision
        return first_ok((prefix, number, t0, t1, t2, monotonic(), plan, result.value, seen,
                         request.method, request.key, request.job_id, self.policy, result.payload))

    def _replayed(self, op_id: str, request: RequestInfo, readings: list[float],
                  walls: list[float]) -> FlowGen:
        """The generic flow over the clock readings the fast path already took."""
        return operation_flow(self.policy, request, _Replay(self.clock, readings, walls),
                              operation_id=op_id, sample=self.random.random, coordinated=False,
                              report=False)

    def _after_first(self, op_id: str, request: RequestInfo, readings: list[float],
                     wall: float) -> FlowGen:
        """The generic flow, up to the first attempt the fast path already made."""
        flow = self._replayed(op_id, request, readings, [wall])
        action = flow.send(None)
        assert isinstance(action, Attempt)  # noqa: S101 - the same readings, the same plan
        return flow

    @functools.cached_property
    def _readers(self) -> tuple[Callable[[], float], Callable[[], float]]:
        """The clock's monotonic and wall readers (the system clock's own functions)."""
        return monotonic_reader(self.clock), wall_reader(self.clock)

    @functools.cached_property
    def _coordinated_first(self) -> bool:
        """Whether :meth:`run` takes the coordinated first-attempt path: an active coordinator,
        no hook, one profile (``profile="auto"`` resolves per request in the flow)."""
        return not self.hooks and not self.coordinator.passive and not self.policy.profile.routes

    def _coordinated_gate(self, request: RequestInfo) -> str | None:
        """The one gate a coordinated operation asks (its rate-limit bucket), or None when it
        asks two (a route's bucket and the provider key's): the generic flow then runs."""
        profile = self.policy.profile
        bucket = profile.coordination_key(request.key, request.url, request.method)
        return None if bucket != request.key and profile.route_majors else bucket

    def _coordinated_ok(self, first: _CoordinatedFirst, result: AttemptResult) -> Classified | None:
        """After a coordinated first attempt: its classification when the flow would end the
        operation ok at once, else None. The readings taken (attempt end, wall) go on
        ``first``, and the sample drawn too when the generic flow goes on (it is replayed)."""
        policy, (monotonic, wall) = self.policy, self._readers
        _prefix, _number, req, state, _readings, walls, _replies = first
        t2, w2 = monotonic(), wall()
        state = state.with_method(result.observation.method)
        classified = classify(policy.profile, result.observation, w2)
        sample = self.random.random()
        decision = decide(policy, state, classified, t2, w2, sample)
        first[4].append(t2)
        walls.append(w2)
        if (classified.kind is Kind.OK and not classified.conflicts and result.error is None
                and state.method == req.method and isinstance(decision, Stop)
                and decision.reason is Reason.OK and decision.retry_at is None
                and decision.detail == classified.detail):
            return classified
        first[6].append(sample)  # the generic flow draws it again: replayed
        return None

    def _coordinated_outcome(self, first: _CoordinatedFirst, plan: float | None,
                             result: AttemptResult, classified: Classified) -> Outcome[Any]:
        """The outcome of a coordinated first attempt that ended ok (read after the learn)."""
        prefix, number, req, _state, readings, _walls, _replies = first
        t0, _ta, t1, t2 = readings
        return first_ok((prefix, number, t0, t1, t2, self._readers[0](), plan, result.value,
                         classified, req.method, req.key, req.job_id, self.policy, result.payload))

    def _coordinated_flow(self, first: _CoordinatedFirst, replies: list[object],
                          ) -> tuple[FlowGen, Action]:
        """The generic flow of a coordinated operation, up to where the first attempt's path
        left it: the same clock readings, coordinator answers and sample; its next action."""
        prefix, number, req, _state, readings, walls, samples = first
        draw = self.random.random
        flow = operation_flow(self.policy, req, _Replay(self.clock, readings, walls),
                              operation_id=_format_id(prefix, number),
                              sample=lambda: samples.pop() if samples else draw(),
                              coordinated=True, report=True)
        action = flow.send(None)
        for reply in replies:
            action = flow.send(reply)
        return flow, action

    def _coordinated_start(self, request: RequestInfo) -> _CoordinatedFirst:
        """A coordinated operation begun as the flow begins it (its id and start reading)."""
        ids = _operation_id
        prefix, number = ids.prefix, next(ids.counter)
        t0 = self._readers[0]()
        state = OperationState.start(self.policy, _format_id(prefix, number), t0,
                                     method=request.method,
                                     has_idempotency_key=request.has_idempotency_key)
        return prefix, number, request, state, [t0], [], []

    def _coordinated_plan(self, first: _CoordinatedFirst, permit: Permit,
                          ) -> float | Stop | Retry | None:
        """After the gate's permit: the first attempt's plan, or the wait or stop it calls for."""
        (monotonic, wall), state = self._readers, first[3]
        ta, wa = monotonic(), wall()
        first[4].append(ta)
        first[5].append(wa)
        step = plan_wait(self.policy, state, ta, permit.wait, permit.reason, permit.retry_at, wa)
        if step is not None:
            return step
        t1 = monotonic()
        first[4].append(t1)
        return plan_attempt(self.policy, state, t1)

    def _run_coordinated(self, perform: Callable[[Attempt], AttemptResult],
                         request: RequestInfo) -> Outcome[object]:
        """:meth:`run` of a coordinated operation: its first attempt without the generic flow.

        The coordinator is handed the actions the flow yields (admit, acquire, the final learn,
        finish: a backend that merges round trips merges these), with the same clock readings
        and sample; an operation that does not end ok at its first attempt goes on in the
        generic flow from those answers (nothing asked twice).
        """
        coordinator = self.coordinator
        bucket = self._coordinated_gate(request)
        if bucket is None:
            op_id = _operation_id()
            flow, req = self._flow(request, op_id)
            return self._drive(flow, perform, None, req, op_id)
        first = self._coordinated_start(request)
        patient = patience(self.policy, first[3], first[3].started)
        merged = self._merged
        if merged is not None:  # one call admits and acquires, one learns and finishes
            return self._run_merged(perform, request, bucket, first, patient, merged)
        admission = coordinator.handle(Admit(request.key, *patient))
        assert isinstance(admission, Admission)  # noqa: S101 - the coordinators' contract
        if not admission.allowed:
            flow, pending = self._coordinated_flow(first, [admission])
            return self._drive(flow, perform, None, pending=pending)
        permit = coordinator.handle(
            Acquire(bucket, 1, self.policy.profile.write_gap(request.method), *patient))
        assert isinstance(permit, Permit)  # noqa: S101 - the coordinators' contract
        plan = self._coordinated_plan(first, permit)
        if isinstance(plan, Stop | Retry):
            flow, pending = self._coordinated_flow(first, [admission, permit])
            return self._drive(flow, perform, None, pending=pending)
        result = perform(Attempt(1, plan))
        classified = self._coordinated_ok(first, result)
        if classified is None:
            flow, _attempt = self._coordinated_flow(first, [admission, permit])
            return self._drive(flow, perform, result)
        coordinator.handle(Learn(bucket, throttle_of(self.policy.profile, classified), permit.lease,
                                 True))
        outcome = self._coordinated_outcome(first, plan, result, classified)
        coordinator.handle(Finish(request.key, outcome, admission.probe))
        return outcome

    async def _arun_coordinated(self, perform: Callable[[Attempt], Awaitable[AttemptResult]],
                                request: RequestInfo) -> Outcome[object]:
        """The async twin of :meth:`_run_coordinated`."""
        coordinator = self.coordinator
        bucket = self._coordinated_gate(request)
        if bucket is None:
            op_id = _operation_id()
            flow, req = self._flow(request, op_id)
            return await self._adrive(flow, perform, None, req, op_id)
        first = self._coordinated_start(request)
        patient = patience(self.policy, first[3], first[3].started)
        merged = self._merged
        if merged is not None:  # one call admits and acquires, one learns and finishes
            return await self._arun_merged(perform, request, bucket, first, patient, merged)
        admission = await coordinator.ahandle(Admit(request.key, *patient))
        assert isinstance(admission, Admission)  # noqa: S101 - the coordinators' contract
        if not admission.allowed:
            flow, pending = self._coordinated_flow(first, [admission])
            return await self._adrive(flow, perform, None, pending=pending)
        permit = await coordinator.ahandle(
            Acquire(bucket, 1, self.policy.profile.write_gap(request.method), *patient))
        assert isinstance(permit, Permit)  # noqa: S101 - the coordinators' contract
        plan = self._coordinated_plan(first, permit)
        if isinstance(plan, Stop | Retry):
            flow, pending = self._coordinated_flow(first, [admission, permit])
            return await self._adrive(flow, perform, None, pending=pending)
        result = await perform(Attempt(1, plan))
        classified = self._coordinated_ok(first, result)
        if classified is None:
            flow, _attempt = self._coordinated_flow(first, [admission, permit])
            return await self._adrive(flow, perform, result)
        await coordinator.ahandle(Learn(bucket, throttle_of(self.policy.profile, classified),
                                        permit.lease, True))
        outcome = self._coordinated_outcome(first, plan, result, classified)
        await coordinator.ahandle(Finish(request.key, outcome, admission.probe))
        return outcome

    @functools.cached_property
    def _merged(self) -> tuple[FirstGate, FirstDone] | None:
        """The coordinator's two merged calls for a first attempt (the in-process backend's),
        or None: each action goes to its ``handle``."""
        found = getattr(self.coordinator, "_first_calls", None)
        return None if found is None else cast("tuple[FirstGate, FirstDone] | None", found())

    def _merged_gate(self, request: RequestInfo, bucket: str, first: _CoordinatedFirst,
                     patient: tuple[float | None, bool], gate: FirstGate,
                     ) -> tuple[Admission, Permit, float | None] | tuple[FlowGen, Action]:
        """The merged admit and acquire of a coordinated first attempt: the admission, permit
        and plan of an attempt to make, or the generic flow and its next action."""
        admission, permit = gate(request.key, bucket, self.policy.profile.write_gap(request.method),
                                 *patient)
        if permit is None:
            return self._coordinated_flow(first, [admission])
        plan = self._coordinated_plan(first, permit)
        if isinstance(plan, Stop | Retry):
            return self._coordinated_flow(first, [admission, permit])
        return admission, permit, plan

    def _merged_end(self, request: RequestInfo, bucket: str, first: _CoordinatedFirst,
                    answers: tuple[Admission, Permit, float | None], result: AttemptResult,
                    classified: Classified, done: FirstDone) -> Outcome[object]:
        """A coordinated first attempt that ended ok: its outcome, learnt and finished in one
        call."""
        admission, permit, plan = answers
        outcome = self._coordinated_outcome(first, plan, result, classified)
        done(bucket, throttle_of(self.policy.profile, classified), permit.lease, request.key,
             outcome, admission.probe)
        return outcome

    def _run_merged(self, perform: Callable[[Attempt], AttemptResult], request: RequestInfo,
                    bucket: str, first: _CoordinatedFirst, patient: tuple[float | None, bool],
                    merged: tuple[FirstGate, FirstDone]) -> Outcome[object]:
        """:meth:`_run_coordinated` with the coordinator's merged calls."""
        answers = self._merged_gate(request, bucket, first, patient, merged[0])
        if len(answers) == 2:
            return self._drive(answers[0], perform, None, pending=answers[1])
        result = perform(Attempt(1, answers[2]))
        classified = self._coordinated_ok(first, result)
        if classified is None:
            flow, _attempt = self._coordinated_flow(first, list(answers[:2]))
            return self._drive(flow, perform, result)
        return self._merged_end(request, bucket, first, answers, result, classified, merged[1])

    async def _arun_merged(self, perform: Callable[[Attempt], Awaitable[AttemptResult]],
                           request: RequestInfo, bucket: str, first: _CoordinatedFirst,
                           patient: tuple[float | None, bool],
                           merged: tuple[FirstGate, FirstDone]) -> Outcome[object]:
        """The async twin of :meth:`_run_merged` (the merged calls never block)."""
        answers = self._merged_gate(request, bucket, first, patient, merged[0])
        if len(answers) == 2:
            return await self._adrive(answers[0], perform, None, pending=answers[1])
        result = await perform(Attempt(1, answers[2]))
        classified = self._coordinated_ok(first, result)
        if classified is None:
            flow, _attempt = self._coordinated_flow(first, list(answers[:2]))
            return await self._adrive(flow, perform, result)
        return self._merged_end(request, bucket, first, answers, result, classified, merged[1])

    def _kwargs(self, kwargs: dict[str, Any], attempt: Attempt) -> dict[str, Any]:
        if self.timeout_kwarg is None:
            return kwargs
        return {**kwargs, self.timeout_kwarg: attempt.timeout}

    def _performer(self, fn: Callable[..., Any], args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Callable[[Attempt], AttemptResult]:
        """Each attempt of ``fn(*args, **kwargs)``, read by the interpreter."""
        interp = self._interpreter

        def perform(attempt: Attempt) -> AttemptResult:
            token = _ATTEMPT_TIMEOUT.set(attempt.timeout)
            taken = _TAKEN.set(self.timeout_kwarg is not None)
            try:
                value = fn(*args, **self._kwargs(kwargs, attempt))
            except Exception as exc:
                return AttemptResult(interp.error(exc), None, exc, bounded=_TAKEN.get())
            finally:
                bounded = _TAKEN.get()
                _TAKEN.reset(taken)
                _ATTEMPT_TIMEOUT.reset(token)
            return AttemptResult(interp.value(value), value, None, bounded=bounded)

        return perform

    def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Outcome[T]:
        """Call ``fn(*args, **kwargs)`` under the budget; never raises for provider failures.

        Each attempt's timeout (clipped to the deadline) is available inside ``fn`` from
        :func:`attempt_timeout`, or as a keyword argument when ``timeout_kwarg`` is set.
        Nothing can cut an attempt that took neither, so another attempt is only started when
        one as long as the longest of those would end by the deadline.
        """
        fast = self._fast
        if fast is None or log_hooks(()):  # a logger that prints sees every step
            return cast("Outcome[T]", self.run(self._performer(fn, args, kwargs)))
        # The first-attempt fast path: the flow's own steps for an uncoordinated, unobserved
        # operation (the same clock readings, plan and sample), with the answer worked out once
        # for a plain success; anything else goes on in the generic flow from those readings.
        monotonic, policy = fast.monotonic, self.policy
        begun = self._begin(monotonic)
        prefix, number, t0, t1, plan = begun
        if isinstance(plan, Stop):
            flow = self._unplanned(begun, self._request)
            return cast("Outcome[T]", self._drive(flow, self._performer(fn, args, kwargs), None))
        result: AttemptResult | None = None
        token = _ATTEMPT_TIMEOUT.set(plan)
        taken = _TAKEN.set(self.timeout_kwarg is not None)
        try:
            value = fn(*args, **kwargs) if self.timeout_kwarg is None else fn(
                *args, **{**kwargs, self.timeout_kwarg: plan})
        except Exception as exc:
            result = AttemptResult(self._interpreter.error(exc), None, exc,
                                   bounded=_TAKEN.get())
        finally:
            bounded = _TAKEN.get()
            _TAKEN.reset(taken)
            _ATTEMPT_TIMEOUT.reset(token)
        if result is None:
            if fast.plain and type(value) in _PLAIN_TYPES:
                t2 = monotonic()
                self.random.random()  # the flow draws one sample per decision
                request = self._request
                return first_ok((prefix, number, t0, t1, t2, monotonic(), plan, value,
                                 fast.classified, request.method, request.key, request.job_id,
                                 policy, None))
            result = AttemptResult(self._interpreter.value(value), value, None, bounded=bounded)
        ended = self._after((prefix, number, t0, t1, plan), self._request, monotonic, result,
                            fast.classified)
        if isinstance(ended, Outcome):
            return ended
        return cast("Outcome[T]", self._drive(ended, self._performer(fn, args, kwargs), result))

    def _drive(self, flow: FlowGen, perform: Callable[[Attempt], AttemptResult],
               reply: object, request: RequestInfo | None = None,
               operation_id: str = "", pending: Action | None = None) -> Outcome[object]:
        """Drive a flow to its end, announcing each action to the hooks (the loop of :meth:`run`).

        ``pending``: the action the flow yielded last, not performed yet (else ``reply`` answers it).
        """
        while True:
            action = _next_action(flow, reply, pending)
            if isinstance(action, Outcome):
                return ended(action)
            pending = None
            if request is not None:
                self._announce(action, request, operation_id)
            if isinstance(action, Attempt):
                reply = perform(action)
            elif isinstance(action, Sleep):
                self.clock.sleep(action.wait.seconds)
                reply = None
            else:
                reply = self.coordinator.handle(action)

    async def _adrive(self, flow: FlowGen, perform: Callable[[Attempt], Awaitable[AttemptResult]],
                      reply: object, request: RequestInfo | None = None,
                      operation_id: str = "", pending: Action | None = None) -> Outcome[object]:
        """The async twin of :meth:`_drive`."""
        while True:
            action = _next_action(flow, reply, pending)
            if isinstance(action, Outcome):
                return ended(action)
            pending = None
            if request is not None:
                self._announce(action, request, operation_id)
            if isinstance(action, Attempt):
                reply = await perform(action)
            elif isinstance(action, Sleep):
                await self.clock.async_sleep(action.wait.seconds)
                reply = None
            else:
                reply = await self.coordinator.ahandle(action)

    async def acall(self, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> Outcome[T]:
        """Await ``fn(*args, **kwargs)`` under the budget, each attempt cut at its timeout."""
        interp = self._interpreter

        async def perform(attempt: Attempt) -> AttemptResult:
            token = _ATTEMPT_TIMEOUT.set(attempt.timeout)
            try:
                value = await asyncio.wait_for(fn(*args, **self._kwargs(kwargs, attempt)),
                                               attempt.timeout)
            except Exception as exc:
                return AttemptResult(interp.error(exc), None, exc)
            finally:
                _ATTEMPT_TIMEOUT.reset(token)
            return AttemptResult(interp.value(value), value, None)

        fast = self._fast
        if fast is None or log_hooks(()):  # a logger that prints sees every step
            return cast("Outcome[T]", await self.arun(perform))
        req, monotonic = self._request, fast.monotonic
        begun = self._begin(monotonic)
        plan = begun[4]
        if isinstance(plan, Stop):
            return cast("Outcome[T]", await self._adrive(self._unplanned(begun, req), perform, None))
        result = await perform(Attempt(1, plan))
        ended = self._after(begun, req, monotonic, result, fast.classified)
        if isinstance(ended, Outcome):
            return ended
        return cast("Outcome[T]", await self._adrive(ended, perform, result))


CALL_FIELDS = frozenset({"key", "method", "idempotency_key", "job_id", "interpreter", "timeout_kwarg"})
"""The :class:`Retrier` fields that describe one call (the others describe the engine)."""


class BoundRetrier:
    """A retrier's engine bound to the description of a call (what :meth:`Retrier.on` returns).

    It runs operations as the retrier does (:meth:`call`, :meth:`acall`, :meth:`run`,
    :meth:`arun`), each described by the bound call fields; :meth:`on` binds another
    description to the same engine. A bound retrier is immutable, and cheap to keep per
    endpoint or per kind of request.
    """

    __slots__ = ("_retrier",)

    def __init__(self, retrier: Retrier) -> None:
        self._retrier = retrier

    @property
    def retrier(self) -> Retrier:
        """The retrier this runs as: the engine with the bound call fields."""
        return self._retrier

    def __repr__(self) -> str:
        r = self._retrier
        fields = ", ".join(f"{name}={getattr(r, name)!r}" for name in sorted(CALL_FIELDS))
        return f"BoundRetrier({fields})"

    def on(self, **call: Any) -> BoundRetrier:
        """The same engine bound to this description with ``call`` changed."""
        return self._retrier.on(**call)

    def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Outcome[T]:
        """:meth:`Retrier.call` under the bound description."""
        return self._retrier.call(fn, *args, **kwargs)

    async def acall(self, fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> Outcome[T]:
        """:meth:`Retrier.acall` under the bound description."""
        return await self._retrier.acall(fn, *args, **kwargs)

    def run(self, perform: Callable[[Attempt], AttemptResult], request: RequestInfo | None = None,
            *, operation_id: str | None = None) -> Outcome[object]:
        """:meth:`Retrier.run` under the bound description."""
        return self._retrier.run(perform, request, operation_id=operation_id)

    async def arun(self, perform: Callable[[Attempt], Awaitable[AttemptResult]],
                   request: RequestInfo | None = None, *,
                   operation_id: str | None = None) -> Outcome[object]:
        """:meth:`Retrier.arun` under the bound description."""
        return await self._retrier.arun(perform, request, operation_id=operation_id)


def call(fn: Callable[..., T], /, *args: Any, retrier: Retrier | None = None, **kwargs: Any) -> Outcome[T]:
    """Call ``fn(*args, **kwargs)`` under ``retrier`` (default: the default policy)."""
    return (retrier or Retrier()).call(fn, *args, **kwargs)


async def acall(
    fn: Callable[..., Awaitable[T]], /, *args: Any, retrier: Retrier | None = None, **kwargs: Any
) -> Outcome[T]:
    """Await ``fn(*args, **kwargs)`` under ``retrier`` (default: the default policy)."""
    return await (retrier or Retrier()).acall(fn, *args, **kwargs)


def _unwrap(outcome: Outcome[T]) -> T:
    """The value of an ok outcome; the caller's own error, or an official SDK's, as it was
    (its outcome attached: ``rb.outcome_of(error)``); else the typed error."""
    error = outcome.error
    if error is not None and outcome.reason is not Reason.OK and (
            is_sdk_error(error) or _is_callers_error(outcome)):
        raise error
    return outcome.unwrap()


class _Decorator(Protocol):
    @overload
    def __call__(self, fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]: ...
    @overload
    def __call__(self, fn: Callable[P, T]) -> Callable[P, T]: ...


def retrying(policy: Policy | None = None, /, **options: Any) -> _Decorator:
    """Decorate a function (sync or async) to run under a budget.

    The decorated function returns the value of an ok outcome. An error that is not a
    provider failure (a ``ValueError``, ``KeyError``… a bug in the function) is never retried
    and is raised again unchanged: the same object, its traceback pointing at the line that
    raised it. An official SDK's error (``anthropic.RateLimitError``,
    ``stripe.RateLimitError``…: read as the response or failure it stands for, and retried as
    that) that ends the operation is raised again unchanged too, its outcome attached
    (:func:`~retrybudget.outcome_of`). Any other outcome raises the matching
    :class:`~retrybudget.errors.RetryBudgetError`, which is *not* chained (a provider's error
    message may quote a URL with its secrets): the last error stays on ``err.outcome.error``.

    Args:
        policy: the policy (default :class:`Policy()`).
        options: any other :class:`Retrier` field (clock, coordinator, hooks, key, method…).
    """
    retrier = Retrier(policy=policy or Policy(), **options)

    def decorate(fn: Callable[P, Any]) -> Callable[P, Any]:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
                return _unwrap(await retrier.acall(fn, *args, **kwargs))

            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> Any:
            return _unwrap(retrier.call(fn, *args, **kwargs))

        return wrapper

    return cast("_Decorator", decorate)

