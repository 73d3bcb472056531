"""Typed hooks: called before each attempt, before each wait and on each outcome.

A hook that raises is logged and ignored: it never changes an outcome.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..core.flow import RequestInfo
from ..core.outcome import Outcome, Wait

__all__ = ["AttemptEvent", "Hook", "WaitEvent", "notify"]

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

    Implement any of the three methods; :func:`notify` skips the ones a hook lacks.
    """

    def before_attempt(self, event: AttemptEvent) -> None:
        """An attempt is about to start."""

    def before_wait(self, event: WaitEvent) -> None:
        """A wait is about to start."""

    def on_outcome(self, outcome: Outcome[Any], request: RequestInfo) -> None:
        """An operation ended."""


def notify(hooks: Sequence[object], method: str, *args: object) -> None:
    """Call ``method`` on every hook that has it; log and swallow what they raise."""
    for hook in hooks:
        fn = getattr(hook, method, None)
        if fn is None:
            continue
        try:
            fn(*args)
        except Exception:
            log.exception("retrybudget hook %r failed in %s; the outcome is unchanged",
                          type(hook).__name__, method)
