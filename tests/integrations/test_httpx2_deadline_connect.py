"""The httpx transports' connect-deadline tests (a provider whose accept queue is full), run
again over httpx2: ``test_deadline_connect``'s own code (see ``tests.support.httpx2_twin``)."""

from __future__ import annotations

from tests.support.httpx2_twin import assert_over_httpx2, twin

twin(globals(), "test_deadline_connect")


def test_the_tests_above_ran_over_httpx2() -> None:
    assert_over_httpx2(globals())
    assert globals()["httpcore"].__name__ == "httpcore2"
