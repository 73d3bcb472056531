"""The requests adapter's success handed over with its stats and outcome built when first read:
as a hand-over that built them at once in every way a caller reads them, and no reference
cycle (the garbage collector's work) until someone does."""

from __future__ import annotations

import copy
import gc
import pickle
import weakref
from typing import Any

import pytest
import requests
from test_httpx_transport import sandbox

from retrybudget import Policy, Retrier
from retrybudget.integrations import outcome_of, stats_of
from retrybudget.integrations.requests import RetryAdapter
from retrybudget.sandbox import SandboxServer

__all__ = ["sandbox"]  # the fixture shared with the httpx tests

PATH = "/rentals/1/availability"


def _session(adapter: RetryAdapter | None = None) -> requests.Session:
    session = requests.Session()
    session.mount("http://", adapter or RetryAdapter(Retrier(policy=Policy())))
    return session


def test_a_success_is_freed_with_its_last_reference_until_its_outcome_is_read(
        sandbox: SandboxServer) -> None:
    with _session() as session:
        session.get(sandbox.url(PATH), timeout=5)  # warm: the key's shape remembered
        gc.disable()
        try:
            response = session.get(sandbox.url(PATH), timeout=5)
            assert response.status_code == 200
            gone = weakref.ref(response)
            del response
            assert gone() is None  # no cycle: freed at once, no collection needed
            read = session.get(sandbox.url(PATH), timeout=5)
            outcome = read.retrybudget_outcome
            assert outcome.value is read  # the outcome holds its response once read
        finally:
            gc.enable()


def test_the_stats_and_outcome_read_are_those_of_one_operation(sandbox: SandboxServer) -> None:
    with _session() as session:
        response = session.get(sandbox.url(PATH), timeout=5)
        stats = response.retrybudget  # either read first builds both
        outcome = response.retrybudget_outcome
        assert isinstance(response, requests.Response)
        assert outcome.ok
        assert outcome.attempts == 1
        assert outcome.value is response
        assert stats == outcome.stats()
        assert stats["outcome"] == "ok"
        assert response.retrybudget is stats
        assert response.retrybudget_outcome is outcome
        assert stats_of(response) is stats
        assert outcome_of(response) is outcome
        assert outcome.history[0].status == 200
        other = session.get(sandbox.url(PATH), timeout=5)
        assert other.retrybudget_outcome.operation_id != outcome.operation_id


def test_a_missing_attribute_is_missing_as_on_a_plain_response(sandbox: SandboxServer) -> None:
    with _session() as session:
        response = session.get(sandbox.url(PATH), timeout=5)
        with pytest.raises(AttributeError, match="'Response' object has no attribute 'nope'"):
            response.nope  # noqa: B018 - the read raises
        assert not hasattr(response, "nope")
        assert hasattr(response, "retrybudget")


def test_what_a_caller_sets_or_deletes_first_stays_so(sandbox: SandboxServer) -> None:
    with _session() as session:
        mine: Any = {"mine": True}
        response = session.get(sandbox.url(PATH), timeout=5)
        response.retrybudget = mine
        assert response.retrybudget_outcome.ok  # building the outcome keeps the caller's stats
        assert response.retrybudget is mine
        deleted = session.get(sandbox.url(PATH), timeout=5)
        del deleted.retrybudget_outcome  # deleting one builds both first, as they were set
        assert deleted.retrybudget["outcome"] == "ok"
        assert not hasattr(deleted, "retrybudget_outcome")


def test_it_pickles_and_copies_as_a_plain_response(sandbox: SandboxServer) -> None:
    with _session() as session:
        response = session.get(sandbox.url(PATH), timeout=5)
        for clone in (pickle.loads(pickle.dumps(response)), copy.copy(response)):  # noqa: S301
            assert type(clone) is requests.Response
            assert clone.status_code == 200
            assert clone.content == response.content
            assert not hasattr(clone, "retrybudget")  # a plain response's pickle never kept it


class _Own(requests.Response):
    """A response class of the caller's own."""


class _OwnAdapter(RetryAdapter):
    def build_response(self, req: Any, resp: Any) -> requests.Response:
        response = super().build_response(req, resp)
        response.__class__ = _Own
        return response


def test_a_response_of_another_class_keeps_it_and_gets_its_attributes_at_once(
        sandbox: SandboxServer) -> None:
    with _session(_OwnAdapter(Retrier(policy=Policy()))) as session:
        response = session.get(sandbox.url(PATH), timeout=5)
        assert type(response) is _Own
        assert "retrybudget" in vars(response)
        assert "retrybudget_outcome" in vars(response)
        assert response.retrybudget == response.retrybudget_outcome.stats()
        assert response.retrybudget_outcome.value is response
