"""An uncoordinated operation's first attempt made without the generic flow (the fast
path), and the generic flow gone on from its readings when it does not end ok."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .._clock import SYSTEM_CLOCK, monotonic_reader
from ..core.actions import (
    Attempt,
    AttemptResult,
    RequestInfo,
)
from ..core.classify import (
    Classified,
    Kind,
    classify,
)
from ..core.decide import Stop, decide, plan_next
from ..core.flow import FlowGen, operation_flow
from ..core.outcome import Outcome, Reason, first_ok
from ..core.outcome import operation_id as _format_id
from ..core.policy import Policy
from ..core.state import OperationState
from ._interpret import _PLAIN_VALUE, CallInterpreter, Interpreter
from ._loop import Loop, _operation_id, _Replay

_Begun = tuple[str, int, float, float, "float | Stop | None"]
"""An operation begun by the fast path: its id's prefix and number, start, attempt start, plan."""

Begun = _Begun
"""An operation begun by :meth:`Retrier._begin` (for an integration's quick first attempt)."""

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



class FirstAttempts(Loop):
    """The first-attempt fast path of :meth:`Retrier.call` and :meth:`Retrier.run`."""

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

