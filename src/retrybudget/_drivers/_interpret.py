"""What an attempt reads and leaves: its timeout, the reading of a returned value or a raised
error, a payload validator's verdict, and the last failed outcome of a context."""

from __future__ import annotations

import contextvars
import json
from dataclasses import dataclass
from typing import Any, Protocol

from .._native import carry, method_of, observe_error, stdlib_failure_kind
from ..core.classify import (
    MESSAGE_LIMIT,
    FailureKind,
    FailureSeen,
    Observation,
    ResponseSeen,
)
from ..core.outcome import Outcome, Reason
from ..core.policy import Validator
from ..core.profiles import Profile

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

