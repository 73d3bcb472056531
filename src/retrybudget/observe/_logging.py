"""The ``retrybudget`` logger's lines: one INFO line per wait, one DEBUG line per attempt.

Like every library, retrybudget adds no handler of its own (a :class:`logging.NullHandler`
only), so nothing is printed until the application configures logging. Then, without any
hook to pass, each wait (a retry's backoff, a provider's Retry-After, a gate wait…) is one
INFO line and each attempt and each outcome one DEBUG line, with the operation id, the
attempt, the reason and the wait. URLs are redacted; headers are never logged.

Each line also carries its fields as record attributes (``operation_id``, ``attempt``,
``wait_reason``, ``wait_seconds``, ``wait_source``, ``outcome``) for structured formatters.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from ..core.actions import RequestInfo
from ..core.outcome import Outcome
from ._hooks import AttemptEvent, Hook, WaitEvent
from ._redact import redact_url

__all__ = ["LOGGER", "LogHook", "log_hooks"]

LOGGER = logging.getLogger("retrybudget")
"""The library's logger; it has a :class:`logging.NullHandler` and no other handler."""

if not any(isinstance(h, logging.NullHandler) for h in LOGGER.handlers):
    LOGGER.addHandler(logging.NullHandler())


def _what(request: RequestInfo) -> str:
    if request.url:
        return f"{request.method or 'GET'} {redact_url(request.url)}"
    return request.method or "call"


class LogHook(Hook):
    """Writes the ``retrybudget`` logger's per-attempt and per-wait lines.

    Every :class:`~retrybudget.Retrier` uses one whenever the logger is enabled for INFO,
    so there is nothing to pass; pass one yourself only to log to another logger.

    Args:
        logger: where the lines go.
    """

    def __init__(self, logger: logging.Logger = LOGGER) -> None:
        self.logger = logger

    def before_attempt(self, event: AttemptEvent) -> None:
        """DEBUG: ``operation ID: attempt N: GET URL (timeout T s)``."""
        if not self.logger.isEnabledFor(logging.DEBUG):
            return
        timeout = "no timeout" if event.timeout is None else f"timeout {event.timeout:.3g} s"
        self.logger.debug("operation %s: attempt %d: %s (%s)", event.operation_id, event.attempt,
                          _what(event.request), timeout,
                          extra={"operation_id": event.operation_id, "attempt": event.attempt})

    def before_wait(self, event: WaitEvent) -> None:
        """INFO: ``operation ID: waiting S s after attempt N: REASON (from SOURCE)``."""
        wait = event.wait
        after = f"after attempt {wait.attempt}" if wait.attempt else "before the first attempt"
        self.logger.info("operation %s: waiting %.3f s %s: %s (from %s); %s", event.operation_id,
                         wait.seconds, after, wait.reason.value, wait.source, _what(event.request),
                         extra={"operation_id": event.operation_id, "attempt": wait.attempt,
                                "wait_reason": wait.reason.value, "wait_seconds": wait.seconds,
                                "wait_source": wait.source})

    def on_outcome(self, outcome: Outcome[Any], request: RequestInfo) -> None:
        """DEBUG: ``operation ID: REASON after N attempt(s) in S s``."""
        if not self.logger.isEnabledFor(logging.DEBUG):
            return
        self.logger.debug("operation %s: %s after %d attempt(s) in %.3f s; %s", outcome.operation_id,
                          outcome.reason.value, outcome.attempts, outcome.elapsed, _what(request),
                          extra={"operation_id": outcome.operation_id, "attempt": outcome.attempts,
                                 "outcome": outcome.reason.value})


_DEFAULT = LogHook()


logs_steps = functools.partial(LOGGER.isEnabledFor, logging.INFO)
"""Whether the logger would print an INFO line (the default :class:`LogHook`'s): then every
operation takes the generic flow, whose every step it logs. A partial: no frame of its own
on the success path, which asks it per operation."""


def log_hooks(hooks: tuple[object, ...]) -> tuple[object, ...]:
    """``hooks`` plus the default :class:`LogHook` when the logger would print an INFO line."""
    if logs_steps():
        return (*hooks, _DEFAULT)
    return hooks
