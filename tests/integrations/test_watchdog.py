"""The process's watchdog: it runs an alarm at its instant (even one due before the alarm it
sleeps to), never a cancelled one, and runs again in a child after a fork."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from retrybudget.integrations._deadline import watchdog


def _fired_within(delay: float, wait: float) -> bool:
    fired = threading.Event()
    watchdog.arm(delay, fired.set)
    return fired.wait(wait)


def test_an_earlier_alarm_wakes_the_thread_sleeping_to_a_later_one() -> None:
    late = threading.Event()
    later = watchdog.arm(30.0, late.set)  # the thread sleeps to this one
    try:
        assert _fired_within(0.05, 5.0)
        assert not late.is_set()
    finally:
        later.cancel()


def test_a_cancelled_alarm_never_runs() -> None:
    ran = threading.Event()
    watchdog.arm(0.05, ran.set).cancel()
    assert _fired_within(0.1, 5.0)  # a later alarm ran: the cancelled one had its turn
    assert not ran.is_set()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_after_a_fork_runs_its_own_watchdog() -> None:
    assert _fired_within(0.01, 5.0)  # the parent's thread is running
    pending = watchdog.arm(30.0, lambda: None)  # and stays: it sleeps to this alarm
    try:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: the parent's thread is not here; an alarm must still run
            os.close(read)
            os.write(write, b"1" if _fired_within(0.01, 5.0) else b"0")
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as answer:
            assert answer.read() == b"1"
        os.waitpid(pid, 0)
    finally:
        pending.cancel()
        sys.stdout.flush()
