"""The loop both drivers share: the flow's actions performed, each announced to the hooks
(sync and async, differing by ``await`` alone), and the operation ids."""

from __future__ import annotations

import functools
import itertools
import os
import random as _random
import secrets
from collections.abc import Awaitable, Callable
from typing import cast

from .._clock import Clock, monotonic_reader, wall_reader
from ..coordination import Coordinator
from ..core.actions import (
    Action,
    Attempt,
    AttemptResult,
    Finish,
    RequestInfo,
    Sleep,
)
from ..core.flow import FlowGen, operation_flow
from ..core.outcome import Outcome
from ..core.outcome import operation_id as _format_id
from ..core.policy import Policy
from ..observe import AttemptEvent, WaitEvent, log_hooks, notify
from ._interpret import Interpreter, ended


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

def _next_action(flow: FlowGen, reply: object, pending: Action | None) -> Action | Outcome[object]:
    """The flow's next action (``pending``, when one is not performed yet), or its outcome."""
    if pending is not None:
        return pending
    try:
        return flow.send(reply)
    except StopIteration as done:
        return cast("Outcome[object]", done.value)


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



class RetrierParts:
    """What every part of :class:`~retrybudget.Retrier` reads of it (its fields)."""

    policy: Policy
    clock: Clock
    coordinator: Coordinator
    hooks: tuple[object, ...]
    random: _random.Random
    key: str
    method: str | None
    idempotency_key: bool
    job_id: str | None
    interpreter: Interpreter | None
    timeout_kwarg: str | None


class Loop(RetrierParts):
    """The loop of :meth:`Retrier.run` and :meth:`Retrier.arun`: a flow driven to its end."""

    @functools.cached_property
    def _request(self) -> RequestInfo:
        return RequestInfo(method=self.method, key=self.key,
                           has_idempotency_key=self.idempotency_key, job_id=self.job_id)

    @functools.cached_property
    def _readers(self) -> tuple[Callable[[], float], Callable[[], float]]:
        """The clock's monotonic and wall readers (the system clock's own functions)."""
        return monotonic_reader(self.clock), wall_reader(self.clock)

    def _replayed(self, op_id: str, request: RequestInfo, readings: list[float],
                  walls: list[float], sample: Callable[[], float] | None = None,
                  coordinated: bool = False) -> FlowGen:
        """The generic flow over the clock readings a first attempt's path already took (then
        the clock), drawing from ``sample`` (default: the retrier's random source)."""
        return operation_flow(self.policy, request, _Replay(self.clock, readings, walls),
                              operation_id=op_id, sample=sample or self.random.random,
                              coordinated=coordinated, report=coordinated)

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

    def _next(self, flow: FlowGen, reply: object, pending: Action | None,
              request: RequestInfo | None, operation_id: str) -> Action | Outcome[object]:
        """The flow's next action, announced to the hooks (``pending``: the one it yielded
        last, not performed yet, else ``reply`` answers the last); or its outcome, ended."""
        action = _next_action(flow, reply, pending)
        if isinstance(action, Outcome):
            return ended(action)
        if request is not None:
            self._announce(action, request, operation_id)
        return action

    def _drive(self, flow: FlowGen, perform: Callable[[Attempt], AttemptResult],
               reply: object, request: RequestInfo | None = None,
               operation_id: str = "", pending: Action | None = None) -> Outcome[object]:
        """Drive a flow to its end, announcing each action to the hooks (the loop of :meth:`run`).

        ``pending``: the action the flow yielded last, not performed yet (else ``reply`` answers it).
        """
        action = self._next(flow, reply, pending, request, operation_id)
        while not isinstance(action, Outcome):
            if isinstance(action, Attempt):
                reply = perform(action)
            elif isinstance(action, Sleep):
                self.clock.sleep(action.wait.seconds)
                reply = None
            else:
                reply = self.coordinator.handle(action)
            action = self._next(flow, reply, None, request, operation_id)
        return action

    async def _adrive(self, flow: FlowGen, perform: Callable[[Attempt], Awaitable[AttemptResult]],
                      reply: object, request: RequestInfo | None = None,
                      operation_id: str = "", pending: Action | None = None) -> Outcome[object]:
        """The async twin of :meth:`_drive` (each action performed with ``await``)."""
        action = self._next(flow, reply, pending, request, operation_id)
        while not isinstance(action, Outcome):
            if isinstance(action, Attempt):
                reply = await perform(action)
            elif isinstance(action, Sleep):
                await self.clock.async_sleep(action.wait.seconds)
                reply = None
            else:
                reply = await self.coordinator.ahandle(action)
            action = self._next(flow, reply, None, request, operation_id)
        return action
