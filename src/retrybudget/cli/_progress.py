"""Live progress of a job: a bar, done/total, the rate, the ETA, the gate's state and the counts.

On a terminal it is one live line fitted to the terminal's width (:func:`render_status`
decides what fits); elsewhere (CI, a pipe) it is one plain line every few seconds, so logs
stay readable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from .._clock import Clock
from ..core.actions import RequestInfo
from ..core.classify import Kind
from ..core.outcome import Outcome, WaitReason
from ..observe import AttemptEvent, WaitEvent
from ..queue import JobQueue

__all__ = ["LiveTally", "ProgressView", "queue_waits", "render_status"]

_WAITS_EVERY_S = 1.0
"""How often the view asks the queue what the job waits for."""

_PLAIN_EVERY_S = 2.0
_PLAIN_WIDTH = 200
"""Plain lines (not a terminal) have room for everything."""


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

    def gate_state(self) -> tuple[str, int, float]:
        """``("open" | "pacing" | "closed", workers held, seconds until the gate opens)``."""
        now = self.clock.monotonic()
        with self._lock:
            held = [(r, until) for r, until in self._held.values() if until > now]
        gated = [until for reason, until in held if reason is WaitReason.GATE]
        if gated:
            return "closed", len(gated), max(gated) - now
        if held:
            return "pacing", len(held), 0.0
        return "open", 0, 0.0

    def gate(self) -> str:
        """``open``, ``pacing (n spaced out)`` or ``closed (n waiting, opens in s)``."""
        state, held, opens_in = self.gate_state()
        if state == "closed":
            return f"closed ({held} waiting, opens in {opens_in:.1f}s)"
        if state == "pacing":
            return f"pacing ({held} spaced out)"
        return "open"

    def counts(self) -> str:
        """The outcome counters: ``ok N · rate-limited N · failed N · throttled N`` (throttled answers)."""
        with self._lock:
            return (f"ok {self.ok} · rate-limited {self.rate_limited} · failed {self.failed}"
                    f" · throttled {self.throttled}")

    def line(self) -> str:
        """The counters and the gate as one line."""
        return f"{self.counts()} · gate {self.gate()}"


def queue_waits(queue: JobQueue, own: str) -> str:
    """What the job waits for besides its own workers: operations other workers hold (who,
    and when the first lease lapses unless renewed) and deferred ones (when the first is due).
    ``own`` is the prefix of this process's worker names. Empty when nothing else is waited for.
    """
    now = queue.clock.wall()
    parts = []
    others = [h for h in queue.held() if not h.worker.startswith(own)]
    if others:
        holders = sorted({h.worker for h in others})
        shown = ", ".join(holders[:2]) + (f" +{len(holders) - 2}" if len(holders) > 2 else "")
        lapse = min(h.expires_at for h in others) - now
        parts.append(f"waiting for {len(others)} leased by {shown} "
                     f"(lapses in {_clock_text(max(0.0, lapse))} unless renewed)")
    due = queue.next_due()
    if due is not None and due > now:
        parts.append(f"next deferred due in {_clock_text(due - now)}")
    return " · ".join(parts)


def _clock_text(seconds: float) -> str:
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _bar(done: int, total: int, width: int) -> str:
    filled = width if total <= 0 else min(width, done * width // total)
    return "━" * filled + "─" * (width - filled)


_MIN_BAR = 10
_MAX_BAR = 40


def render_status(width: int, *, title: str, done: int, total: int, elapsed: float,
                  gate: tuple[str, int, float], counts: str) -> str:
    """One progress line that fits in ``width`` columns.

    At 80 columns and more it holds the bar, done/total, the rate, the ETA and the gate's
    state (with the outcome counts and the title when there is room); narrower, it drops
    the title, the counts, the gate's detail, the rate and finally the bar, in that order,
    so done/total and the gate stay readable at any width.
    """
    rate = done / elapsed if elapsed > 0 else 0.0
    left = total - done
    eta = "ETA --:--" if rate <= 0 else f"ETA {_clock_text(left / rate)}"
    if left <= 0:
        eta = f"in {_clock_text(elapsed)}"
    state, held, opens_in = gate
    gate_short = f"gate {state}"
    gate_long = {"closed": f"gate closed {opens_in:.0f}s, {held} waiting",
                 "pacing": f"gate pacing {held}"}.get(state, gate_short)
    count = f"{done}/{total}"
    speed = f"{rate:.1f}/s"
    # (smallest bar, parts): richest first; optional parts need room for a 15-column bar
    layouts: list[tuple[int, list[str]]] = [
        (15, [title, count, speed, eta, gate_long, counts]),
        (15, [count, speed, eta, gate_long, counts]),
        (15, [title, count, speed, eta, gate_long]),
        (_MIN_BAR, [count, speed, eta, gate_long]),
        (_MIN_BAR, [count, speed, eta, gate_short]),
        (_MIN_BAR, [count, eta, gate_short]),
        (0, [count, eta, gate_short]),
        (0, [count, gate_short]),
    ]
    for smallest, parts in layouts:
        text = "  ".join(parts)
        room = width - len(text) - (2 if smallest else 0)
        if not smallest and room >= 0:
            return text
        if smallest and room >= smallest:
            bar = _bar(done, total, min(_MAX_BAR, room))
            first = 1 if parts[0] == title else 0
            return "  ".join([*parts[:first], bar, *parts[first:]])
    return f"{count} {gate_short}"[:max(width, 1)]


class ProgressView:
    """Shows a job's progress on ``console``; a context manager, refreshed by :meth:`tick`.

    Args:
        console: where to show it.
        tally: the counters.
        total: operations to run.
        title: what the job is.
        clock: paces the plain (non-terminal) lines.
        waits: what the job waits for besides its own workers (see :func:`queue_waits`),
            asked at most once a second and shown after the counts.
    """

    def __init__(self, console: Console, tally: LiveTally, total: int, title: str,
                 clock: Clock, waits: Callable[[], str] | None = None) -> None:
        self.console = console
        self.tally = tally
        self.total = total
        self.title = title
        self.clock = clock
        self.waits = waits
        self._waiting = ""
        self._next_waits = 0.0
        self._live: Live | None = None
        self._next_plain = 0.0
        self._started = 0.0

    def _waits(self) -> str:
        now = self.clock.monotonic()
        if self.waits is not None and now >= self._next_waits:
            self._next_waits = now + _WAITS_EVERY_S
            self._waiting = self.waits()
        return self._waiting

    def _status(self, width: int) -> str:
        waiting = self._waits()
        counts = self.tally.counts() + (f" · {waiting}" if waiting else "")
        return render_status(width, title=self.title, done=self.tally.done, total=self.total,
                             elapsed=self.clock.monotonic() - self._started,
                             gate=self.tally.gate_state(), counts=counts)

    def __rich__(self) -> Text:
        """The live line, fitted to the console's width at each refresh."""
        return Text(self._status(self.console.width), no_wrap=True, overflow="crop")

    def __enter__(self) -> ProgressView:
        self._started = self.clock.monotonic()
        if self.console.is_terminal:
            self._live = Live(self, console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        else:
            self.console.print(f"{self.title}: {self.total} operations")
            self._next_plain = self._started + _PLAIN_EVERY_S
        return self

    def tick(self) -> None:
        """Refresh the display (the live line on a terminal, a line every few seconds elsewhere)."""
        if self._live is not None:
            self._live.refresh()
            return
        now = self.clock.monotonic()
        if now >= self._next_plain:
            self._next_plain = now + _PLAIN_EVERY_S
            self._plain()

    def _plain(self) -> None:
        self.console.print(f"  {self._status(_PLAIN_WIDTH)}", highlight=False, soft_wrap=True)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._live is not None:
            self._live.refresh()
            self._live.__exit__(exc_type, exc, tb)
        else:
            self._plain()
