"""The httpx transports' tests, run again over httpx2 (the next-generation httpx).

:mod:`retrybudget.integrations.httpx2` is :mod:`retrybudget.integrations.httpx`'s code built
over httpx2's classes; so are these tests: ``test_httpx_transport``'s own code, run with
``httpx`` answered by ``httpx2`` and the transports by the httpx2 module's. What follows the
build checks that the two modules share their code and differ only in their package.
"""

from __future__ import annotations

import inspect

import httpx as httpx1  # the names the build below rebinds are kept apart
import httpx2 as httpx2_package

from retrybudget.integrations import httpx as rb_httpx
from retrybudget.integrations import httpx2 as rb_httpx2
from tests.support.httpx2_twin import assert_over_httpx2, twin

twin(globals(), "test_httpx_transport")


def test_the_transports_are_httpx_code_over_httpx2_classes() -> None:
    for name in rb_httpx.__all__:
        ours, theirs = getattr(rb_httpx2, name), getattr(rb_httpx, name)
        assert (ours is theirs) == (name == "failure_kind")  # the one package-free function
    for name in ("RetryTransport", "AsyncRetryTransport"):
        over2, over1 = getattr(rb_httpx2, name), getattr(rb_httpx, name)
        for attr, value in vars(over1).items():
            if inspect.isfunction(value):
                assert vars(over2)[attr].__code__.co_code == value.__code__.co_code, attr
        assert inspect.signature(over2.__init__) == inspect.signature(over1.__init__)
    assert issubclass(rb_httpx2.RetryTransport, httpx2_package.BaseTransport)
    assert not issubclass(rb_httpx2.RetryTransport, httpx1.BaseTransport)
    assert issubclass(rb_httpx2.AsyncRetryTransport, httpx2_package.AsyncBaseTransport)
    for reason, error in rb_httpx2.ERRORS.items():
        assert issubclass(error, httpx2_package.HTTPError)
        assert not issubclass(error, httpx1.HTTPError)
        assert error.__name__ == rb_httpx.ERRORS[reason].__name__
    assert rb_httpx2.RetryTransport()._transport.__class__ is httpx2_package.HTTPTransport


def test_the_tests_above_ran_over_httpx2() -> None:
    assert_over_httpx2(globals())
    assert globals()["RetryTransport"] is rb_httpx2.RetryTransport
