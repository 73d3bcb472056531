"""The retrier: the engine and a call's description, ``call``/``acall``/``run``/``arun``, the
bound retrier, and the ``retrying`` decorator."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import random as _random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, Protocol, TypeVar, cast, overload

from .._clock import SYSTEM_CLOCK, Clock
from .._native import is_sdk_error
from ..coordination import Coordinator, NoCoordination
from ..core.actions import (
    Attempt,
    AttemptResult,
    RequestInfo,
)
from ..core.outcome import Outcome, Reason
from ..core.policy import Policy, PolicyError
from ..observe import log_hooks
from ._coordinated import CoordinatedFirst
from ._first import Begun, FirstAttempts
from ._interpret import _ATTEMPT_TIMEOUT, _PLAIN_TYPES, _TAKEN, Interpreter, _is_callers_error
from ._loop import _operation_id

T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True)

class Retrier(CoordinatedFirst, FirstAttempts):
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

    def run(
        self,
        perform: Callable[[Attempt], AttemptResult],
        request: RequestInfo | None = None,
        *,
        operation_id: str | None = None,
    ) -> Outcome[object]:
        """Drive one operation synchronously; ``perform`` makes each attempt."""
        if self._fast_run is not None and operation_id is None and not log_hooks(()):
            # The first-attempt fast path (as in :meth:`call`): an attempt classified ok ends
            # the operation without the generic flow; anything else goes on in it.
            return Begun(self).run(request or self._request, perform)
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
        if self._fast_run is not None and operation_id is None and not log_hooks(()):
            # The first-attempt fast path, as in :meth:`run`.
            return await Begun(self).arun(request or self._request, perform)
        if self._coordinated_first and operation_id is None and not log_hooks(()):
            return await self._arun_coordinated(perform, request or self._request)
        op_id = operation_id or _operation_id()
        flow, req = self._flow(request, op_id)
        return await self._adrive(flow, perform, None, req, op_id)

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
        begun, request = Begun(self), self._request
        if begun.refused:
            return cast("Outcome[T]", begun.go_on(request, self._performer(fn, args, kwargs), None))
        plan = begun.timeout
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
                begun.attempt_ended = self._readers[0]()
                return begun._ok(request, value, fast.classified, None)
            result = AttemptResult(self._interpreter.value(value), value, None, bounded=bounded)
        outcome = begun.settle(request, result)
        if outcome is not None:
            return outcome
        return cast("Outcome[T]", begun.go_on(request, self._performer(fn, args, kwargs), result))

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
        return cast("Outcome[T]", await Begun(self).arun(self._request, perform))


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

