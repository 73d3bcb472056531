"""Hooks: called before each attempt, before each wait and on each outcome; never change one."""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest

from retrybudget import FakeClock, Hook, Policy, Retrier
from retrybudget.observe import (
    AuditHook,
    CoordinatorEvents,
    OtelHook,
    StatsAggregator,
)
from retrybudget.observe._hooks import notify
from retrybudget.testing import ScriptedProvider

SCRIPT: list[dict[str, Any]] = [
    {"status": 503}, {"status": 503}, {"status": 200, "body": {"available": True}}]


class Recorder(Hook):
    """Writes down every call it gets."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def before_attempt(self, event: Any) -> None:
        self.calls.append(("attempt", event.attempt))

    def before_wait(self, event: Any) -> None:
        self.calls.append(("wait", event.wait.reason.value))

    def on_outcome(self, outcome: Any, request: Any) -> None:
        self.calls.append(("outcome", outcome.reason.value))


class Broken(Hook):
    """Raises from every method, quoting a credential."""

    def before_attempt(self, event: Any) -> None:
        raise RuntimeError("Authorization: Bearer hook-secret-1234")

    def before_wait(self, event: Any) -> None:
        raise ValueError("token=hook-secret-1234")

    def on_outcome(self, outcome: Any, request: Any) -> None:
        raise KeyError("bearer hook-secret-1234")


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


async def drive(mode: str, hooks: tuple[object, ...]) -> Any:
    clock = FakeClock()
    provider = ScriptedProvider(SCRIPT, clock)
    retrier = Retrier(policy=Policy(), clock=clock, hooks=hooks, method="GET",
                      random=random.Random(3))
    if mode == "sync":
        return retrier.call(provider)

    async def fetch() -> Any:
        return provider()

    return await retrier.acall(fetch)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_hooks_hear_every_attempt_wait_and_outcome(mode: str) -> None:
    recorder = Recorder()
    await drive(mode, (recorder,))
    assert recorder.calls == [
        ("attempt", 1), ("wait", "backoff"), ("attempt", 2), ("wait", "backoff"),
        ("attempt", 3), ("outcome", "ok"),
    ]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_failing_hook_is_logged_and_never_changes_the_outcome(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    plain = await drive(mode, ())
    recorder = Recorder()
    with caplog.at_level(logging.DEBUG, logger="retrybudget"):
        hooked = await drive(mode, (Broken(), recorder))
    assert (hooked.reason, hooked.attempts, hooked.waits, hooked.value) == (
        plain.reason, plain.attempts, plain.waits, plain.value)
    assert len(recorder.calls) == 6  # the hook after the broken one still hears everything
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert {r.getMessage().split(" failed in ")[1].split(" ")[0] for r in errors} == {
        "before_attempt", "before_wait", "on_outcome"}
    assert all("the outcome is unchanged" in r.getMessage() for r in errors)
    assert any(r.levelno == logging.DEBUG and "Traceback" in r.getMessage()
               for r in caplog.records)
    assert "hook-secret-1234" not in caplog.text


def test_an_unprintable_error_does_not_escape(caplog: pytest.LogCaptureFixture) -> None:
    class Hostile:
        def on_outcome(self, *args: object) -> None:
            raise Unprintable

    with caplog.at_level(logging.DEBUG, logger="retrybudget"):
        notify([Hostile()], "on_outcome", None, None)
    assert "(unprintable)" in caplog.text


def test_hooks_without_a_method_are_skipped() -> None:
    notify([object()], "before_wait", None)


def test_library_hooks_follow_the_protocols() -> None:
    assert isinstance(AuditHook(), Hook)
    assert isinstance(StatsAggregator(), Hook)
    assert isinstance(OtelHook(), CoordinatorEvents)
