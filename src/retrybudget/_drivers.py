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

from ._clock import SYSTEM_CLOCK, Clock
from .coordination._base import Coordinator, NoCoordination
from .core.classify import FailureKind, FailureSeen, Observation, ResponseSeen
from .core.flow import (
    Action,
    Attempt,
    AttemptResult,
    Finish,
    FlowGen,
    RequestInfo,
    Sleep,
    operation_flow,
)
from .core.outcome import Outcome, Reason
from .core.policy import Policy, PolicyError, Validator
from .observe._hooks import AttemptEvent, WaitEvent, notify
from .observe._logging import log_hooks

__all__ = [
    "CallInterpreter",
    "Interpreter",
    "Retrier",
    "attempt_timeout",
    "call",
    "acall",
    "retrying",
]

T = TypeVar("T")
P = ParamSpec("P")

_ATTEMPT_TIMEOUT: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "retrybudget_attempt_timeout", default=None
)


def attempt_timeout() -> float | None:
    """Inside an attempt: the seconds it may take (clipped to the deadline), or None."""
    return _ATTEMPT_TIMEOUT.get()


class Interpreter(Protocol):
    """Turns what a callable returned or raised into an :data:`Observation`."""

    def value(self, value: object) -> Observation:
        """What a returned value means."""
        ...

    def error(self, error: BaseException) -> Observation:
        """What a raised exception means."""
        ...


def validation_error(validator: Validator | None, payload: object) -> str:
    """Run a payload validator: the reason it failed, or "" when it passed."""
    if validator is None:
        return ""
    try:
        verdict = validator(payload)
    except Exception as exc:  # a validator's failure is the payload's verdict
        return f"validator raised {type(exc).__name__}"
    return "validator returned False" if verdict is False else ""


def failure_kind(error: BaseException, retry_on: tuple[type[BaseException], ...] = ()) -> FailureKind:
    """The standard library's network errors, mapped to failure kinds."""
    if isinstance(error, ConnectionRefusedError):
        return FailureKind.CONNECT
    if isinstance(error, (TimeoutError, asyncio.TimeoutError)):  # one class from Python 3.11
        return FailureKind.TIMEOUT
    if isinstance(error, ConnectionError) or (retry_on and isinstance(error, retry_on)):
        return FailureKind.NETWORK
    return FailureKind.ERROR


_PLAIN_TYPES = frozenset({type(None), bool, int, float, complex, str, bytes, bytearray, list,
                          tuple, dict, set, frozenset})
"""Built-in types whose values are never read as HTTP responses."""

_PLAIN_VALUE = ResponseSeen(200)
"""What a returned value means when there is no validator (a frozen value, made once)."""


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
    integrations map them to (a connect failure is known never to have been sent). A
    :class:`json.JSONDecodeError` (``response.json()`` of a body that is not JSON) is an
    invalid payload. Of the standard library's errors, :class:`ConnectionRefusedError` is a
    connect failure, :class:`TimeoutError` a timeout, :class:`ConnectionError` (and
    ``retry_on``) a network failure. Any other exception (``ValueError``, ``KeyError``… a bug
    in the caller's code) is ``unexpected`` and never retried.
    """

    validator: Validator | None = None
    retry_on: tuple[type[BaseException], ...] = ()

    def value(self, value: object) -> Observation:
        """Read a returned value."""
        # Built-in values have no status to read: they are values, subject to the validator.
        status = None if type(value) in _PLAIN_TYPES else getattr(
            value, "status_code", getattr(value, "status", None))
        if isinstance(status, int) and not isinstance(status, bool) and hasattr(value, "headers"):
            headers = getattr(value, "headers", None) or {}
            message = ""
            if status >= 400:
                text = getattr(value, "text", "")
                message = text if isinstance(text, str) else ""
            payload_error = validation_error(self.validator, value) if 200 <= status < 300 else ""
            try:
                return ResponseSeen.of(status, headers, message=message, payload_error=payload_error,
                                       method=_method_of(value))
            except (TypeError, ValueError, AttributeError):
                return FailureSeen(FailureKind.PROTOCOL, type(value).__name__)
        if self.validator is None:
            return _PLAIN_VALUE
        return ResponseSeen(200, payload_error=validation_error(self.validator, value))

    def error(self, error: BaseException) -> Observation:
        """Read a raised exception."""
        from .integrations._native import observe_error  # noqa: PLC0415 - it imports the drivers

        if isinstance(error, json.JSONDecodeError):  # requests' own is one too
            return FailureSeen(FailureKind.PROTOCOL, type(error).__name__)
        seen = observe_error(error)
        if seen is not None and not (isinstance(seen, FailureSeen) and seen.kind is FailureKind.ERROR):
            return seen
        # Not a provider failure the libraries name: the standard library's errors, retry_on.
        method = None if seen is None else seen.method
        return FailureSeen(failure_kind(error, self.retry_on), type(error).__name__, method=method)


def _method_of(response: object) -> str | None:
    """The method of the request a returned response answered (httpx, requests, aiohttp)."""
    try:  # httpx raises RuntimeError for a response built without a request
        method = getattr(getattr(response, "request", None), "method", None)
        method = method or getattr(response, "method", None)
    except Exception:  # an unreadable request is an unknown method
        return None
    return method.upper() if isinstance(method, str) and method else None


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
        return f"{self.prefix}{next(self.counter):06x}"


_operation_id = _OperationIds()


@dataclass(frozen=True)
class Retrier:
    """Runs logical operations under one policy, clock, coordinator and set of hooks.

    A retrier is a frozen value: derive variants with :meth:`with_options`. Use
    :meth:`call` / :meth:`acall` for any callable, or :meth:`run` / :meth:`arun` to drive
    attempts yourself (the HTTP integrations do).

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
        op_id = operation_id or _operation_id()
        flow, req = self._flow(request, op_id)
        reply: object = None
        while True:
            try:
                action = flow.send(reply)
            except StopIteration as done:
                return cast("Outcome[object]", done.value)
            self._announce(action, req, op_id)
            if isinstance(action, Attempt):
                reply = perform(action)
            elif isinstance(action, Sleep):
                self.clock.sleep(action.wait.seconds)
                reply = None
            else:
                reply = self.coordinator.handle(action)

    async def arun(
        self,
        perform: Callable[[Attempt], Awaitable[AttemptResult]],
        request: RequestInfo | None = None,
        *,
        operation_id: str | None = None,
    ) -> Outcome[object]:
        """Drive one operation asynchronously; ``perform`` makes each attempt."""
        op_id = operation_id or _operation_id()
        flow, req = self._flow(request, op_id)
        reply: object = None
        while True:
            try:
                action = flow.send(reply)
            except StopIteration as done:
                return cast("Outcome[object]", done.value)
            self._announce(action, req, op_id)
            if isinstance(action, Attempt):
                reply = await perform(action)
            elif isinstance(action, Sleep):
                await self.clock.async_sleep(action.wait.seconds)
                reply = None
            else:
                reply = await self.coordinator.ahandle(action)

    @functools.cached_property
    def _interpreter(self) -> Interpreter:
        return self.interpreter or CallInterpreter(validator=self.policy.validator)

    def _kwargs(self, kwargs: dict[str, Any], attempt: Attempt) -> dict[str, Any]:
        if self.timeout_kwarg is None:
            return kwargs
        return {**kwargs, self.timeout_kwarg: attempt.timeout}

    def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Outcome[T]:
        """Call ``fn(*args, **kwargs)`` under the budget; never raises for provider failures.

        Each attempt's timeout (clipped to the deadline) is available inside ``fn`` from
        :func:`attempt_timeout`, or as a keyword argument when ``timeout_kwarg`` is set.
        """
        interp = self._interpreter

        def perform(attempt: Attempt) -> AttemptResult:
            token = _ATTEMPT_TIMEOUT.set(attempt.timeout)
            try:
                value = fn(*args, **self._kwargs(kwargs, attempt))
            except Exception as exc:
                return AttemptResult(interp.error(exc), None, exc)
            finally:
                _ATTEMPT_TIMEOUT.reset(token)
            return AttemptResult(interp.value(value), value, None)

        return cast("Outcome[T]", self.run(perform))

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

        return cast("Outcome[T]", await self.arun(perform))


def call(fn: Callable[..., T], /, *args: Any, retrier: Retrier | None = None, **kwargs: Any) -> Outcome[T]:
    """Call ``fn(*args, **kwargs)`` under ``retrier`` (default: the default policy)."""
    return (retrier or Retrier()).call(fn, *args, **kwargs)


async def acall(
    fn: Callable[..., Awaitable[T]], /, *args: Any, retrier: Retrier | None = None, **kwargs: Any
) -> Outcome[T]:
    """Await ``fn(*args, **kwargs)`` under ``retrier`` (default: the default policy)."""
    return await (retrier or Retrier()).acall(fn, *args, **kwargs)


def _unwrap(outcome: Outcome[T]) -> T:
    """The value of an ok outcome; the caller's own error as it was; else the typed error."""
    if _is_callers_error(outcome):
        raise cast("BaseException", outcome.error)
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
    raised it. Any other outcome raises the matching
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

