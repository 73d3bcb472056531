"""Shared fixtures and the hypothesis settings profiles."""

from __future__ import annotations

import logging
import os
import random
import signal

import pytest
from hypothesis import HealthCheck, settings

from retrybudget import FakeClock

# the shared helpers' assertions explain themselves as the tests' own do (pytest rewrites
# only test modules and conftest files unless told)
pytest.register_assert_rewrite("tests.support")

settings.register_profile(
    "ci", max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "dev", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(  # make mutation: many short runs, each property still reached
    "quick", max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

# A shell without job control starts background commands with Ctrl-C ignored, and an ignored
# signal stays ignored across exec: the command-line processes the tests start would never see
# the SIGINT a Ctrl-C test sends. Catching it here (as Python does by default) gives them the
# default disposition a terminal's user has.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock that advances only when slept on."""
    return FakeClock()


@pytest.fixture
def rng() -> random.Random:
    """A seeded random source for jitter."""
    return random.Random(1234)


@pytest.fixture(autouse=True)
def _reset_logging() -> None:
    """Each test starts with retrybudget's logger at its default level."""
    logging.getLogger("retrybudget").setLevel(logging.NOTSET)
