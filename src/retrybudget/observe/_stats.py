"""Per-operation stats, and global totals that are only ever sums of them.

:func:`operation_stats` describes one logical operation: its attempts, every wait with
its reason and source, the outcome, ``retry_at``, and what the coordinator's gate,
pacing and concurrency cap, the shared retry budget and the circuit breaker decided.
:class:`StatsAggregator` is a hook that adds those per-operation stats into global
totals (contract rule 8, docs/contract.md: global metrics are sums of per-operation counters, never
the reverse).
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from ..core.actions import RequestInfo
from ..core.decide import draws_on_retry_budget
from ..core.outcome import Outcome, Reason, WaitReason
from ._hooks import Hook
from ._redact import redact_text, redact_url

__all__ = ["StatsAggregator", "operation_stats"]

_COORDINATOR_WAITS: dict[WaitReason, str] = {
    WaitReason.GATE: "gate",
    WaitReason.PACING: "pacing",
    WaitReason.CONCURRENCY: "concurrency",
}
"""The waits a coordinator asks for before an attempt, by the stats section they count in."""


def _coordinator_waits(outcome: Outcome[Any]) -> dict[str, dict[str, float]]:
    """For ``gate``, ``pacing`` and ``concurrency``: how many waits and how many seconds."""
    out = {name: {"waits": 0, "seconds": 0.0} for name in _COORDINATOR_WAITS.values()}
    for wait in outcome.waits:
        name = _COORDINATOR_WAITS.get(wait.reason)
        if name is not None:
            out[name]["waits"] += 1
            out[name]["seconds"] += wait.seconds
    for section in out.values():
        section["seconds"] = round(section["seconds"], 6)
    return out


def operation_stats(outcome: Outcome[Any], request: RequestInfo | None = None) -> dict[str, Any]:
    """One logical operation's counters as plain JSON-ready data.

    Everything in :meth:`Outcome.stats` (operation id, job id, key, method, one logical
    operation, attempts, retries, outcome, ``retry_at``, elapsed, each wait with its reason,
    source and the attempt it followed) plus:

    - ``url``: the request's URL, redacted (None when the request named none);
    - ``gate`` / ``pacing`` / ``concurrency``: ``{"decision", "waits", "seconds"}``, the
      decision being ``"paused"`` / ``"delayed"`` / ``"queued"`` when any wait of that kind
      was taken, else ``"passed"``;
    - ``retry_budget``: ``{"decision", "retries_granted"}``: ``"refused"`` when the shared
      budget ended the operation, ``"granted"`` when it allowed every retry asked for,
      ``"not_asked"`` when no retry was asked for (retries after a rate limit do not ask:
      the shared gate paces them);
    - ``breaker``: ``{"decision"}``: ``"rejected"`` (0 attempts) or ``"admitted"``.

    Args:
        outcome: the operation's outcome.
        request: what the operation was (for its URL), if known.
    """
    stats = outcome.stats()
    stats["detail"] = redact_text(outcome.detail)
    stats["url"] = None if request is None or request.url is None else redact_url(request.url)
    verbs = {"gate": "paused", "pacing": "delayed", "concurrency": "queued"}
    for name, section in _coordinator_waits(outcome).items():
        stats[name] = {"decision": verbs[name] if section["waits"] else "passed", **section}
    granted = sum(1 for record in outcome.history
                  if record.decision == "retry" and draws_on_retry_budget(record.kind))
    refused = outcome.reason is Reason.RETRY_BUDGET
    budget = "refused" if refused else ("granted" if granted else "not_asked")
    stats["retry_budget"] = {"decision": budget, "retries_granted": granted}
    rejected = outcome.reason is Reason.CIRCUIT_OPEN
    stats["breaker"] = {"decision": "rejected" if rejected else "admitted"}
    return stats


def _empty_totals() -> dict[str, Any]:
    return {
        "logical_operations": 0,
        "attempts": 0,
        "retries": 0,
        "elapsed": 0.0,
        "outcomes": {},
        "waits": {"count": 0, "seconds": 0.0, "by_reason": {}, "by_source": {}},
        "gate_pauses": 0,
        "pacing_delays": 0,
        "concurrency_waits": 0,
        "retry_budget_refusals": 0,
        "breaker_rejections": 0,
    }


def _add_wait(table: dict[str, dict[str, float]], name: str, seconds: float) -> None:
    entry = table.setdefault(name, {"count": 0, "seconds": 0.0})
    entry["count"] += 1
    entry["seconds"] += seconds


class StatsAggregator(Hook):
    """A hook that sums per-operation stats into global totals; safe to share between threads.

    Every total is a sum over :func:`operation_stats` of the operations seen, so each
    operation counts once however many attempts it made (503, 503, 200 adds 1 logical
    operation and 3 attempts; a breaker rejection adds 1 logical operation and 0 attempts).

    Use :meth:`totals` for the whole, :meth:`totals` with ``key`` for one provider key.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._all = _empty_totals()
        self._by_key: dict[str, dict[str, Any]] = {}

    def on_outcome(self, outcome: Outcome[Any], request: RequestInfo) -> None:
        """Add one operation's stats."""
        self.add(operation_stats(outcome, request))

    def add(self, stats: dict[str, Any]) -> None:
        """Add one operation's stats (as :func:`operation_stats` returns them)."""
        with self._lock:
            key_totals = self._by_key.setdefault(str(stats["key"]), _empty_totals())
            for totals in (self._all, key_totals):
                _accumulate(totals, stats)

    def totals(self, key: str | None = None) -> dict[str, Any]:
        """A snapshot of the totals (for one provider key, or for all); JSON-ready."""
        with self._lock:
            source = self._all if key is None else self._by_key.get(key, _empty_totals())
            return copy.deepcopy(source)

    def keys(self) -> list[str]:
        """The provider keys seen so far, sorted."""
        with self._lock:
            return sorted(self._by_key)

    def reset(self) -> None:
        """Forget every total."""
        with self._lock:
            self._all = _empty_totals()
            self._by_key.clear()


def _accumulate(totals: dict[str, Any], stats: dict[str, Any]) -> None:
    totals["logical_operations"] += stats["logical_operations"]
    totals["attempts"] += stats["attempts"]
    totals["retries"] += stats["retries"]
    totals["elapsed"] += stats["elapsed"]
    outcomes = totals["outcomes"]
    outcomes[stats["outcome"]] = outcomes.get(stats["outcome"], 0) + 1
    waits = totals["waits"]
    for wait in stats["waits"]:
        waits["count"] += 1
        waits["seconds"] += wait["seconds"]
        _add_wait(waits["by_reason"], wait["reason"], wait["seconds"])
        _add_wait(waits["by_source"], wait["source"], wait["seconds"])
    totals["gate_pauses"] += stats["gate"]["waits"]
    totals["pacing_delays"] += stats["pacing"]["waits"]
    totals["concurrency_waits"] += stats["concurrency"]["waits"]
    totals["retry_budget_refusals"] += stats["retry_budget"]["decision"] == "refused"
    totals["breaker_rejections"] += stats["breaker"]["decision"] == "rejected"
