"""The end-of-job report: per-operation counters summed, set against what the provider saw.

Every total is a sum of the per-operation stats in the result lines (contract rule 8);
the provider's side (requests seen, rejections, the busiest window) comes from the sandbox.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from ..observe import StatsAggregator

__all__ = ["Capacity", "render_summary", "summarize"]

_THROTTLE_STATUSES = frozenset({"403", "429"})


@dataclass(frozen=True, slots=True)
class Capacity:
    """The provider's documented capacity: ``limit`` requests per ``window_s`` seconds.

    Windows are fixed and aligned to multiples of ``window_s`` on the wall clock (as the
    sandbox's are); ``started`` is the wall-clock time the job started, so the ideal knows
    how much of the first window was already gone.
    """

    limit: int
    window_s: float
    started: float = 0.0

    def windows(self, operations: int) -> int:
        """How many windows ``operations`` requests need at least (one request each)."""
        return -(-operations // self.limit) if self.limit else 0

    def ideal_seconds(self, operations: int) -> float:
        """The least time any client could take: a lower bound, so actual ÷ ideal is >= 1.

        The first window's quota can go at once; each further ``limit`` requests must wait
        for the next window to open. With windows aligned on the wall clock, the n-th window
        opens ``(n - 1) x window_s - (started mod window_s)`` after the start.
        """
        if not self.limit:
            return float("inf")
        if operations <= self.limit:
            return 0.0
        offset = self.started % self.window_s if self.window_s else 0.0
        return max(0.0, (self.windows(operations) - 1) * self.window_s - offset)


def summarize(
    lines: Iterable[Mapping[str, Any]],
    *,
    elapsed: float,
    provider: Mapping[str, Any] | None = None,
    capacity: Capacity | None = None,
) -> dict[str, Any]:
    """A JSON-ready summary of a job.

    Args:
        lines: the result lines (each holds one operation's stats).
        elapsed: the job's wall-clock seconds.
        provider: the sandbox's ``/_stats`` for the run, if known.
        capacity: the provider's limit, if known.
    """
    totals = StatsAggregator()
    for line in lines:
        totals.add(dict(line))
    t = totals.totals()
    ops = t["logical_operations"]
    out: dict[str, Any] = {
        "logical_operations": ops,
        "attempts": t["attempts"],
        "retries": t["retries"],
        "outcomes": dict(sorted(t["outcomes"].items(), key=lambda kv: -kv[1])),
        "waits": {reason: {"count": w["count"], "seconds": round(w["seconds"], 3)}
                  for reason, w in sorted(t["waits"]["by_reason"].items())},
        "wait_sources": {source: {"count": w["count"], "seconds": round(w["seconds"], 3)}
                         for source, w in sorted(t["waits"]["by_source"].items())},
        "elapsed_s": round(elapsed, 3),
    }
    if provider is not None:
        seen = int(provider.get("count", 0))
        by_status = {str(k): int(v) for k, v in dict(provider.get("by_status", {})).items()}
        out["provider"] = {
            "requests": seen,
            "requests_per_operation": round(seen / ops, 3) if ops else None,
            "by_status": by_status,
            "throttled": sum(v for k, v in by_status.items() if k in _THROTTLE_STATUSES),
            "busiest_window": provider.get("busiest_window"),
            "max_in_flight": provider.get("max_in_flight"),
        }
    if capacity is not None:
        ideal = capacity.ideal_seconds(ops)
        out["capacity"] = {
            "limit": capacity.limit,
            "window_s": capacity.window_s,
            "ideal_s": round(ideal, 3),
            "actual_s": round(elapsed, 3),
            "ratio": round(elapsed / ideal, 2) if ideal else None,
            "windows": capacity.windows(ops),
        }
    return out


def render_summary(console: Console, summary: Mapping[str, Any], title: str) -> None:
    """Print the summary as tables (plain text when the console is not a terminal)."""
    table = Table(title=title, show_header=True, header_style="bold", title_justify="left")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("note")
    ops = summary["logical_operations"]
    table.add_row("logical operations", str(ops), "one per input line")
    table.add_row("attempts", str(summary["attempts"]), "requests the client sent")
    table.add_row("retries", str(summary["retries"]), "attempts beyond each operation's first")
    provider = summary.get("provider")
    if provider is not None:
        table.add_row("provider requests", str(provider["requests"]), "what the provider saw")
        table.add_row("requests per operation", f"{provider['requests_per_operation']}",
                      "1.0 is ideal")
        table.add_row("throttled answers", str(provider["throttled"]), "403/429 from its rate limit")
        window = provider.get("busiest_window") or {}
        if window.get("limit") is not None:
            table.add_row("busiest window", f"{window['count']} / {window['limit']}",
                          f"busiest {window['window_s']} s window (throttled too) / limit")
    for reason, wait in summary["waits"].items():
        table.add_row(f"waits: {reason}", f"{wait['count']}", f"{wait['seconds']:.2f} s in all")
    for reason, count in summary["outcomes"].items():
        share = f"{100 * count / ops:.0f}% of operations" if ops else ""
        table.add_row(f"outcome: {reason}", str(count), share)
    capacity = summary.get("capacity")
    if capacity is not None:
        ratio = capacity["ratio"]
        table.add_row("time taken", f"{capacity['actual_s']:.1f} s",
                      f"{ratio:.2f} x the ideal" if ratio else "every request fits in the first window")
        table.add_row("ideal time", f"{capacity['ideal_s']:.1f} s",
                      f"the least any client could take: {ops} ops need {capacity['windows']} "
                      f"windows of {capacity['limit']} per {capacity['window_s']:g} s; the first "
                      "is spent at once")
    else:
        table.add_row("time taken", f"{summary['elapsed_s']:.1f} s", "")
    console.print(table)
