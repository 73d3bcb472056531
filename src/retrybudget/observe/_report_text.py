"""The review report in a few lines a person reads: what happened, why, and what to check.

:func:`review_summary` sets the audit records' outcomes, waits (with who asked for them)
and throttled answers beside the report's checklist and proposed steps, as plain text:
``retrybudget report`` prints it by default (``--json`` prints the whole report).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["review_summary"]

_STEPS_SHOWN = 3
_STATUS_WORDS = {"pass": "pass", "fail": "FAIL", "not_applicable": "not applicable",
                 "insufficient_evidence": "insufficient evidence"}


def _table(rows: Sequence[tuple[str, ...]], header: tuple[str, ...]) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def fmt(row: tuple[str, ...]) -> str:
        cells = [cell.rjust(w) if i and cell.replace(".", "").isdigit() else cell.ljust(w)
                 for i, (cell, w) in enumerate(zip(row, widths, strict=True))]
        return "  " + "  ".join(cells).rstrip()

    return [fmt(header), *(fmt(row) for row in rows)]


def _decision_line(fact: Mapping[str, Any]) -> str:
    """``line-2: retry by dana at 2026-… (requeued): note``."""
    source, value = fact.get("source") or {}, fact.get("value") or {}
    who = source.get("job_id") or source.get("operation_id")
    at = value.get("decided_at")
    when = ""
    if isinstance(at, (int, float)) and 0 <= at < 1e11:  # a recorded epoch, not a stray value
        when = " at " + dt.datetime.fromtimestamp(at, tz=dt.timezone.utc).strftime(
            "%Y-%m-%d %H:%M:%S UTC")
    requeued = " (requeued)" if value.get("requeued") else ""
    note = f": {value['note']}" if value.get("note") else ""
    return f"{who}: {value.get('decision')} by {value.get('reviewer')}{when}{requeued}{note}"


def review_summary(records: Iterable[Mapping[str, Any]], report: Mapping[str, Any],
                   source: str) -> str:
    """A short human summary of ``report`` (from :func:`review_report`) and its ``records``."""
    recs = list(records)
    ops = len(recs)
    attempts = sum(int(r.get("attempts") or 0) for r in recs)
    outcomes: dict[str, int] = {}
    waits: dict[str, list[float]] = {}
    asked: dict[str, set[str]] = {}
    throttled = 0
    for r in recs:
        outcomes[str(r.get("outcome"))] = outcomes.get(str(r.get("outcome")), 0) + 1
        for w in r.get("waits") or ():
            reason = str(w.get("reason"))
            waits.setdefault(reason, []).append(float(w.get("seconds") or 0.0))
            asked.setdefault(reason, set()).add(str(w.get("source")))
        throttled += sum(1 for a in r.get("history") or () if a.get("classification") == "rate_limited")
    steps = list(report.get("proposed_steps") or ())
    review = ("review required" if report.get("review_required") else
              f"no review required, {len(steps)} follow-up step(s) proposed" if steps else
              "no review required")
    lines = [f"{source}: {ops} operations, {attempts} attempts ({attempts - ops} beyond the first), "
             f"{throttled} throttled answers; {review}", ""]
    rows = [(reason, str(n), f"{100 * n / ops:.0f}%" if ops else "")
            for reason, n in sorted(outcomes.items(), key=lambda kv: -kv[1])]
    lines += _table(rows, ("outcome", "operations", "share")) if rows else ["  no operations"]
    if waits:
        lines.append("")
        wait_rows = [(reason, str(len(s)), f"{sum(s):.1f}", ", ".join(sorted(asked[reason])))
                     for reason, s in sorted(waits.items(), key=lambda kv: -sum(kv[1]))]
        lines += _table(wait_rows, ("wait", "count", "seconds", "asked for by"))
    lines.append("")
    lines += _checks_and_steps(report, steps)
    lines += _missing_line(report.get("missing_inputs") or ())
    return "\n".join(lines) + "\n"


def _checks_and_steps(report: Mapping[str, Any], steps: list[Mapping[str, Any]]) -> list[str]:
    """The summary's checks table, the reviewer's decisions and the proposed steps."""
    checks: list[tuple[str, str, str]] = []
    for item in report.get("validation_results") or ():
        findings = item.get("findings") or []
        counted = f"{len(findings)} operation(s)" if findings else "no operation exercised it"
        checks.append((str(item.get("check")), _STATUS_WORDS.get(str(item.get("status")),
                                                                 str(item.get("status"))), counted))
    lines = _table(checks, ("check", "result", "evidence"))
    decided = [f for f in report.get("observed_facts") or ()
               if (f.get("source") or {}).get("field") == "reviewer_decision"]
    if decided:
        lines += ["", f"reviewer decisions ({len(decided)}):"]
        lines += [f"  - {_decision_line(f)}" for f in decided]
    if steps:
        lines += ["", f"proposed steps ({len(steps)}; none has been carried out):"]
        lines += [f"  - {step.get('description', '')}" for step in steps[:_STEPS_SHOWN]]
        if len(steps) > _STEPS_SHOWN:
            lines.append(f"  … and {len(steps) - _STEPS_SHOWN} more in the full report (--json)")
    return lines


def _missing_line(missing: Sequence[Mapping[str, Any]]) -> list[str]:
    """The summary's last line on inputs it could not use: fields not recorded (named) apart
    from unreadable lines; nothing when every input was there."""
    if not missing:
        return []
    broken = [m for m in missing if not str(m.get("reason", "")).startswith("not recorded")]
    fields = {str((m.get("source") or {}).get("field")) for m in missing if m not in broken}
    parts = []
    if len(missing) > len(broken):
        shown = ", ".join(sorted(fields)[:4]) + (", …" if len(fields) > 4 else "")
        parts.append(f"{len(missing) - len(broken)} field(s) not recorded ({shown}: empty "
                     "where they do not apply, such as retry_at of an operation nothing "
                     "rate-limited)")
    if broken:
        parts.append(f"{len(broken)} unreadable line(s) or record(s) not matching the schema")
    return ["", "; ".join(parts) + ": see the full report (--json)"]
