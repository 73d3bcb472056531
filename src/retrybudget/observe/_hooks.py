"""Typed hooks: called before each attempt, before each wait and on each outcome.

A hook that raises is logged and ignored: it never changes an outcome. Coordinators
report their own events (breaker transitions, fallbacks to local coordination) to hooks
that implement :class:`CoordinatorEvents`, through the same :func:`notify`.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..core.actions import RequestInfo
from ..core.outcome import Outcome, Wait
from ._redact import redact_text

__all__ = ["BREAKER_STATES", "AttemptEvent", "CoordinatorEvents", "Hook", "WaitEvent", "notify"]

log = logging.getLogger("retrybudget")


@dataclass(frozen=True, slots=True)
class AttemptEvent:
    """An attempt is about to start."""

    operation_id: str
    request: RequestInfo
    attempt: int
    timeout: float | None


@dataclass(frozen=True, slots=True)
class WaitEvent:
    """A wait is about to start."""

    operation_id: str
    request: RequestInfo
    wait: Wait


@runtime_checkable
class Hook(Protocol):
    """Something that wants to hear about operations (audit sinks, metrics, your own code).

    Implement any of the three methods; :func:`notify` skips the ones a hook lacks. Subclass
    :class:`Hook` to inherit do-nothing defaults for the others.
    """

    def before_attempt(self, event: AttemptEvent) -> None:
        """An attempt is about to start."""
        return  # a default: subclasses override what they need

    def before_wait(self, event: WaitEvent) -> None:
        """A wait is about to start."""
        return  # a default: subclasses override what they need

    def on_outcome(self, outcome: Outcome[Any], request: RequestInfo) -> None:
        """An operation ended."""
        return  # a default: subclasses override what they need


BREAKER_STATES = ("closed", "open", "half_open")
"""The states a circuit breaker reports in :meth:`CoordinatorEvents.breaker_transition`."""


@runtime_checkable
class CoordinatorEvents(Protocol):
    """Events a coordinator reports (metrics hooks implement these).

    A coordinator calls ``notify(hooks, "breaker_transition", key, state)`` and
    ``notify(hooks, "coordinator_fallback", key)``; hooks without the method are skipped.
    """

    def breaker_transition(self, key: str, state: str) -> None:
        """The breaker for ``key`` entered ``state`` (one of :data:`BREAKER_STATES`)."""
        return  # a default: subclasses override what they need

    def coordinator_fallback(self, key: str) -> None:
        """The shared coordinator was unreachable; ``key`` fell back to local coordination."""
        return  # a default: subclasses override what they need


def _error_text(error: BaseException, *, trace: bool = False) -> str:
    """An error's message (or traceback), redacted: a hook's error may quote a secret."""
    try:
        if trace:
            text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        else:
            text = str(error)
        return redact_text(text)
    except Exception:  # a hostile __str__ must not escape notify
        return "(unprintable)"


def notify(hooks: Sequence[object], method: str, *args: object) -> None:
    """Call ``method`` on every hook that has it; log and swallow what they raise.

    The failure is logged at ERROR with the error's class and redacted message, and its
    redacted traceback at DEBUG.
    """
    for hook in hooks:
        fn = getattr(hook, method, None)
        if fn is None:
            continue
        try:
            fn(*args)
        except Exception as exc:
            log.error(  # noqa: TRY400 - the traceback is logged redacted, at DEBUG, below
                "retrybudget hook %s failed in %s (%s: %s); the outcome is unchanged",
                type(hook).__name__, method, type(exc).__name__, _error_text(exc))
            if log.isEnabledFor(logging.DEBUG):
                log.debug("retrybudget hook %s failed in %s:\n%s", type(hook).__name__, method,
                          _error_text(exc, trace=True))
