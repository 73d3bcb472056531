"""The httpx transports' deadline tests (a trickling provider), run again over httpx2:
``test_deadline_exchange``'s own code (see ``tests.support.httpx2_twin``)."""

from __future__ import annotations

from tests.support.httpx2_twin import assert_over_httpx2, twin

twin(globals(), "test_deadline_exchange")


def test_the_tests_above_ran_over_httpx2() -> None:
    assert_over_httpx2(globals())
