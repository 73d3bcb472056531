""":class:`~retrybudget.integrations.urllib3.BudgetRetry` decides as the retrier does.

Driven the way urllib3's ``urlopen`` drives a ``Retry`` (``is_retry``, ``increment``, ``sleep``,
a ``MaxRetryError`` handing the response over), over any script of answers, on a fake clock,
it makes the same attempts, waits and ending as :meth:`Retrier.run` over the same answers.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from urllib3 import HTTPResponse
from urllib3.exceptions import MaxRetryError, NewConnectionError, ReadTimeoutError

import retrybudget as rb
from retrybudget._native import evidence
from retrybudget._native.urllib3 import urllib3_failure_kind
from retrybudget.core.actions import Attempt, AttemptResult, RequestInfo
from retrybudget.core.classify import FailureSeen, ResponseSeen
from retrybudget.integrations.urllib3 import BudgetRetry
from tests.support.strategies import assert_reached, examples, reached, tried

Answer = tuple[int, tuple[tuple[str, str], ...]] | str  # a status and headers, or a failure

RETRY_AFTER = st.sampled_from([(), (("Retry-After", "0"),), (("Retry-After", "1"),),
                               (("Retry-After", "30"),)])
FAILURES = st.one_of(st.tuples(st.sampled_from([429, 502, 503]), RETRY_AFTER),
                     st.sampled_from(["refused", "read timeout"]))
"""A first answer the policy may retry (any other is urllib3's alone: no operation)."""
ANSWERS = st.one_of(st.tuples(st.sampled_from([200, 200, 404, 404, 500, 500]), st.just(())),
                    FAILURES)


class Pool:
    """What ``increment`` reads of urllib3's connection pool."""

    scheme, host, port = "https", "api.example.com", None


def _error(answer: str) -> Exception:
    if answer == "refused":
        return NewConnectionError(None, "refused")  # type: ignore[arg-type]
    return ReadTimeoutError(None, "/x", "read timed out")  # type: ignore[arg-type]


def through_urllib3(policy: rb.Policy, method: str, script: list[Answer]) -> tuple[int, Any]:
    """urllib3's loop: the attempts made, and the outcome left (None: no operation was built)."""
    retry: Any = BudgetRetry(rb.Retrier(policy=policy, clock=rb.FakeClock(),
                                        random=random.Random(7)))
    for made, answer in enumerate(script, start=1):
        retry, ended = _answered(retry, method, answer)
        if retry is None:
            return made, ended
    raise AssertionError("the script ran out")


def _answered(retry: Any, method: str, answer: Answer) -> tuple[Any, Any]:
    """One attempt's answer as urlopen hands it to the Retry: the Retry to go on with, or
    None and the outcome the operation ended with."""
    response = None
    try:
        if isinstance(answer, str):
            retry = retry.increment(method, "/x", error=_error(answer), _pool=Pool())
        else:
            status, headers = answer
            response = HTTPResponse(status=status, headers=dict(headers))
            if not retry.is_retry(method, status):
                return None, None  # a first answer it would not retry: urllib3's alone
            retry = retry.increment(method, "/x", response=response, _pool=Pool())
        retry.sleep()
    except MaxRetryError:
        return None, getattr(response, "retrybudget_outcome", None) or rb.last_failed_outcome()
    return retry, None


def through_the_retrier(policy: rb.Policy, method: str, script: list[Answer]) -> rb.Outcome[object]:
    answers = iter(script)

    def perform(attempt: Attempt) -> AttemptResult:
        answer = next(answers)
        if isinstance(answer, str):
            error = _error(answer)
            return AttemptResult(FailureSeen(urllib3_failure_kind(error), type(error).__name__,
                                             method=method), None, error)
        status, headers = answer
        pairs = [(name.lower(), value) for name, value in headers]
        return AttemptResult(ResponseSeen(status, evidence(pairs), method=method), None, None)

    retrier = rb.Retrier(policy=policy, clock=rb.FakeClock(), random=random.Random(7))
    return retrier.run(perform, RequestInfo(method, "https://api.example.com", False,
                                            "https://api.example.com/x"))


@settings(max_examples=examples(400))
@given(first=FAILURES, rest=st.lists(ANSWERS, min_size=5, max_size=5),
       method=st.sampled_from(["GET", "GET", "POST"]),
       attempts=st.integers(1, 4), deadline=st.sampled_from([2.0, 10.0]))
def test_budget_retry_decides_as_the_retrier(first: Answer, rest: list[Answer], method: str,
                                             attempts: int, deadline: float) -> None:
    tried("budget-retry")
    script = [first, *rest]
    policy = rb.Policy(max_attempts=attempts, deadline=deadline,
                       backoff=rb.Backoff(base=0.1, cap=0.5))
    expected = through_the_retrier(policy, method, script)
    made, outcome = through_urllib3(policy, method, script)
    assert made == expected.attempts
    reached("budget-retry", expected.reason.value)
    assert outcome is not None
    assert (outcome.reason, outcome.attempts, outcome.retry_at, outcome.elapsed) == (
        expected.reason, expected.attempts, expected.retry_at, expected.elapsed)
    assert [(w.seconds, w.source) for w in outcome.waits] == [
        (w.seconds, w.source) for w in expected.waits]


def test_the_property_reached_each_ending() -> None:
    assert_reached("budget-retry", ("ok", "not_found", "unexpected", "exhausted",
                                    "rate_limited", "not_retried"), minimum=5)
