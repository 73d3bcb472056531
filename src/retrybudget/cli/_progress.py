"""Live progress of a job: counts by outcome, throttled answers and the gate's state.

On a terminal it is a rich progress bar; elsewhere (CI, a pipe) it is one plain line every
few seconds, so logs stay readable.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from .._clock import Clock
from ..core.classify import Kind
from ..core.flow import RequestInfo
from ..core.outcome import Outcome, WaitReason
from ..observe import AttemptEvent, WaitEvent

__all__ = ["LiveTally", "ProgressView"]

_PLAIN_EVERY_S = 2.0


class LiveTally:
    """A retrier hook and result hook that counts what a running job does.

    Args:
        clock: reads the time for the gate's remaining wait.
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._held: dict[str, tuple[WaitReason, float]] = {}
        self.done = 0
        self.ok = 0
        self.rate_limited = 0
        self.failed = 0
        self.throttled = 0

    # hook methods (worker threads) ---------------------------------------------------------

    def before_wait(self, event: WaitEvent) -> None:
        """Note a worker held at the gate or paced."""
        if event.wait.reason in (WaitReason.GATE, WaitReason.PACING):
            until = self.clock.monotonic() + event.wait.seconds
            with self._lock:
                self._held[event.operation_id] = (event.wait.reason, until)

    def before_attempt(self, event: AttemptEvent) -> None:
        """The worker is past the gate."""
        with self._lock:
            self._held.pop(event.operation_id, None)

    def on_outcome(self, outcome: Outcome[Any], request: RequestInfo) -> None:
        """Count the throttled answers the operation met."""
        throttled = sum(1 for record in outcome.history if record.kind is Kind.RATE_LIMITED)
        with self._lock:
            self._held.pop(outcome.operation_id, None)
            self.throttled += throttled

    def __call__(self, line: dict[str, Any]) -> None:
        """Count one recorded result line."""
        with self._lock:
            self.done += 1
            if line["outcome"] == "ok":
                self.ok += 1
            elif line["outcome"] == "rate_limited":
                self.rate_limited += 1
            else:
                self.failed += 1

    # reading -------------------------------------------------------------------------------

    def gate(self) -> str:
        """``open``, ``pacing (n)`` or ``closed (n waiting, opens in s)``."""
        now = self.clock.monotonic()
        with self._lock:
            held = [(r, until) for r, until in self._held.values() if until > now]
        gated = [until for reason, until in held if reason is WaitReason.GATE]
        if gated:
            return f"closed ({len(gated)} waiting, opens in {max(gated) - now:.1f}s)"
        if held:
            return f"pacing ({len(held)} spaced out)"
        return "open"

    def line(self) -> str:
        """The counters as one line."""
        with self._lock:
            counts = (f"ok {self.ok} · rate-limited {self.rate_limited} · failed {self.failed}"
                      f" · throttled answers {self.throttled}")
        return f"{counts} · gate {self.gate()}"


class ProgressView:
    """Shows a job's progress on ``console``; a context manager, refreshed by :meth:`tick`.

    Args:
        console: where to show it.
        tally: the counters.
        total: operations to run.
        title: what the job is.
        clock: paces the plain (non-terminal) lines.
    """

    def __init__(self, console: Console, tally: LiveTally, total: int, title: str,
                 clock: Clock) -> None:
        self.console = console
        self.tally = tally
        self.total = total
        self.title = title
        self.clock = clock
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._next_plain = 0.0

    def __enter__(self) -> ProgressView:
        if self.console.is_terminal:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), TextColumn("{task.fields[status]}"), console=self.console,
                refresh_per_second=8,
            )
            self._progress.__enter__()
            self._task = self._progress.add_task(self.title, total=self.total,
                                                 status=self.tally.line())
        else:
            self.console.print(f"{self.title}: {self.total} operations")
            self._next_plain = self.clock.monotonic() + _PLAIN_EVERY_S
        return self

    def tick(self) -> None:
        """Refresh the display (the bar on a terminal, a line every few seconds elsewhere)."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=self.tally.done, status=self.tally.line())
            return
        now = self.clock.monotonic()
        if now >= self._next_plain:
            self._next_plain = now + _PLAIN_EVERY_S
            self._plain()

    def _plain(self) -> None:
        self.console.print(f"  {self.tally.done}/{self.total} · {self.tally.line()}",
                           highlight=False)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._progress is not None:
            self.tick()
            self._progress.__exit__(exc_type, exc, tb)
        else:
            self._plain()
