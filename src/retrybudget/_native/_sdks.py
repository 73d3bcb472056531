"""The official SDKs' errors (openai, anthropic, stripe, githubkit, PyGithub, slack_sdk), read
by what they carry, and the retries an SDK says it took."""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping

from ..core.classify import MESSAGE_LIMIT, FailureSeen, Observation
from ._shared import Reader, _lower_pairs, _response, method_of
from .httpx import _HTTPX_PACKAGES, httpx_evidence
from .requests import requests_evidence


def _response_seen(response: object, method: str | None) -> Observation | None:
    """A response object an error carries (httpx, httpx2, requests, aiohttp, or any with an
    integer ``status_code``/``status`` and a mapping of ``headers``), read without reading
    its body: the body text only when it was read already (bounded)."""
    if isinstance(response, type):
        return None
    top = type(response).__module__.partition(".")[0]
    verb = getattr(response, "http_verb", None)  # slack_sdk's SlackResponse names it so
    method = method_of(response) or method or (verb.upper() if isinstance(verb, str) else None)
    if top in _HTTPX_PACKAGES:
        try:
            text = response.text  # type: ignore[attr-defined]  # read already, unless streamed
        except Exception:  # ResponseNotRead: a stream nobody read
            text = ""
        return _response(getattr(response, "status_code", None),
                         httpx_evidence(response),  # type: ignore[arg-type]
                         text, method)
    if top == "requests":
        read = response.__dict__.get("_content") not in (False, None)
        return _response(getattr(response, "status_code", None),
                         requests_evidence(response),  # type: ignore[arg-type]
                         response.text if read else "", method)  # type: ignore[attr-defined]
    status = getattr(response, "status_code", None)
    if status is None:
        status = getattr(response, "status", None)
    headers = getattr(response, "headers", None)
    if not isinstance(status, int) or isinstance(status, bool) or not isinstance(headers, Mapping):
        return None
    return _response(status, _lower_pairs(headers), "", method)


_SDKS = frozenset({"openai", "anthropic", "stripe", "githubkit", "github", "slack_sdk"})
"""Top-level modules of the official SDKs whose errors :func:`_sdk` reads."""

_CAUSES = 4
"""How many wrapped errors deep an SDK error is followed to the transport error under it."""


RETRY_COUNT_HEADER = "x-stainless-retry-count"
"""The header openai's and anthropic's SDKs send with the number of retries a call has taken."""

_SDK_RETRIES_WARNED: list[bool] = []
"""Set once the warning that an SDK retries on top of retrybudget was given (once a process)."""


def sdk_retries_taken(sent: str) -> int:
    """The retries an SDK says a call took (its ``x-stainless-retry-count``). More than none
    means the SDK retries on top of retrybudget, its retries outside the budget: a
    ``RuntimeWarning`` says so, once a process."""
    try:
        taken = max(0, int(sent))
    except ValueError:
        return 0
    if taken and not _SDK_RETRIES_WARNED:
        _SDK_RETRIES_WARNED.append(True)
        warnings.warn(
            "the SDK retries on top of retrybudget (it sent x-stainless-retry-count: "
            f"{taken}): its retries escape the budget; turn them off with max_retries=0",
            RuntimeWarning, stacklevel=3)
    return taken


def _request_headers(response: object) -> Mapping[str, str] | None:
    """The headers of the request a response answered (httpx, httpx2), if it names one."""
    try:
        headers = getattr(getattr(response, "request", None), "headers", None)
    except Exception:  # httpx: a response built without a request
        return None
    return headers if isinstance(headers, Mapping) else None


def _sdk(error: BaseException, observe: Reader) -> Observation | None:
    """An official SDK's error: the response it carries, else its status and headers, else
    the transport error it wraps (read as that error is).

    openai and anthropic (``APIStatusError.response``, an httpx2 or httpx response),
    githubkit (``RequestFailed.response.raw_response``) and slack_sdk
    (``SlackApiError.response``) carry the response; Stripe's errors carry
    ``http_status``, ``headers`` and ``http_body``, PyGithub's ``status``, ``headers`` and
    ``data``. A connection or timeout error (``APIConnectionError``, ``APITimeoutError``,
    githubkit's ``RequestError``, Stripe's ``APIConnectionError``) is the failure of the
    transport error it was raised from (read by ``observe``, as any error is): a connect failure
    is known never to have been sent.
    Nothing of the SDK is imported: its errors are read by what they carry.
    """
    method = method_of(error)  # the request's, when the error has one (openai, anthropic)
    response = getattr(error, "response", None)
    if response is not None:
        sent = _request_headers(response)
        if sent is not None and RETRY_COUNT_HEADER in sent:  # the SDK's own retries on?
            sdk_retries_taken(sent[RETRY_COUNT_HEADER])
        raw = getattr(response, "raw_response", None)  # githubkit wraps httpx's response
        seen = _response_seen(raw if raw is not None else response, method)
        if seen is not None:
            return seen
    status = getattr(error, "http_status", None)  # Stripe
    body: object = getattr(error, "http_body", None)
    if status is None:
        status = getattr(error, "status", None)  # PyGithub
        body = getattr(error, "data", None)
    if isinstance(status, int) and not isinstance(status, bool):
        headers = getattr(error, "headers", None)
        pairs = _lower_pairs(headers) if isinstance(headers, Mapping) else []
        if isinstance(body, (dict, list)):
            body = json.dumps(body)[:MESSAGE_LIMIT]
        return _response(status, pairs, body, method)
    cause = _wrapped(error)
    for _ in range(_CAUSES):  # bounded: a chain of causes may loop
        if cause is None or not is_sdk_error(cause):
            break
        cause = _wrapped(cause)
    if cause is None or is_sdk_error(cause):
        return None
    seen = observe(cause)
    if isinstance(seen, FailureSeen) and seen.method is None and method is not None:
        return FailureSeen(seen.kind, seen.error, method=method)
    return seen


def _wrapped(error: BaseException) -> BaseException | None:
    """The error an SDK error was raised from (githubkit's ``exc``, else ``__cause__``)."""
    cause = getattr(error, "exc", None)
    if not isinstance(cause, BaseException):
        cause = error.__cause__
    return cause if isinstance(cause, BaseException) and cause is not error else None


def is_sdk_error(error: BaseException) -> bool:
    """Whether ``error`` is one of an official SDK's errors (an operation that ends on one
    hands it to the caller as it was, its outcome attached)."""
    return any(cls.__module__.partition(".")[0] in _SDKS for cls in type(error).__mro__)
