"""``retrybudget review decide AUDIT OP --decision … --reviewer …``: record a reviewer decision.

Decisions are appended (never rewritten) to ``AUDIT.reviews.jsonl`` beside the audit file,
each with its time; ``retrybudget report AUDIT`` merges the latest decision per operation
into its record's ``reviewer_decision``, and reads the job's owner from ``AUDIT.job.json``
(written by ``fetch --job-file``) for the closing handover.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

from .._clock import SYSTEM_CLOCK, Clock
from .._cmdline import EXIT_OK, CliError
from ..observe import DECISIONS
from ._jobfile import sidecar
from ._report import load

__all__ = ["add_arguments", "review_inputs", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``review`` subcommands and their options."""
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True,
                                parser_class=type(parser))
    decide = sub.add_parser("decide", help="append a reviewer decision for one operation",
                            description="Append a reviewer decision (with its time) for one "
                                        "operation of an audit file.")
    decide.add_argument("audit", metavar="AUDIT.jsonl", help="the audit file")
    decide.add_argument("op", metavar="OP", help="the operation id (or the fixture/job id)")
    decide.add_argument("--decision", required=True, choices=DECISIONS)
    decide.add_argument("--reviewer", required=True, metavar="NAME", help="who decided")
    decide.add_argument("--note", default=None, metavar="TEXT", help="why (optional)")


def _text(value: str | None, what: str, limit: int) -> str | None:
    if value is None:
        return None
    cleaned = " ".join(value.split())
    if not cleaned or len(cleaned) > limit or not cleaned.isprintable():
        raise CliError(f"{what}: expected printable text of 1 to {limit} characters")
    return cleaned


def run(args: argparse.Namespace, *, clock: Clock = SYSTEM_CLOCK) -> int:
    """Append one decision; the operation must be in the audit file."""
    log = load(args.audit)
    reviewer = _text(args.reviewer, "--reviewer", 200)
    note = _text(args.note, "--note", 2000)
    record = next((r for r in log.records if args.op in (r.get("operation_id"), r.get("job_id"))),
                  None)
    if record is None:
        raise CliError(f"{args.audit}: no operation or job id {args.op!r} in the audit file")
    now = clock.wall()
    decision = {"operation_id": record["operation_id"], "job_id": record.get("job_id"),
                "decision": args.decision, "reviewer": reviewer, "note": note,
                "decided_at": round(now, 6)}
    target = sidecar(args.audit, "reviews.jsonl")
    try:
        with open(target, "a", encoding="utf-8") as out:
            out.write(json.dumps(decision, ensure_ascii=False, separators=(",", ":")) + "\n")
            out.flush()
            os.fsync(out.fileno())
    except OSError as exc:
        raise CliError(f"{target}: cannot append: {exc.strerror or exc}") from None
    when = dt.datetime.fromtimestamp(now, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    print(f"recorded {args.decision} for operation {record['operation_id']} by {reviewer} at "
          f"{when} in {target}")
    return EXIT_OK


def review_inputs(audit: str | Path) -> tuple[list[dict[str, Any]], str | None]:
    """The decisions and the owner kept beside an audit file (none when absent).

    Raises:
        CliError: a sidecar file exists but cannot be read.
    """
    decisions: list[dict[str, Any]] = []
    owner = None
    reviews, job = sidecar(audit, "reviews.jsonl"), sidecar(audit, "job.json")
    try:
        if reviews.exists():
            for number, line in enumerate(reviews.read_text("utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except json.JSONDecodeError:
                    raise CliError(f"{reviews}: line {number}: invalid JSON") from None
                if isinstance(item, dict):
                    decisions.append(item)
        if job.exists():
            data = json.loads(job.read_text("utf-8"))
            owner = data.get("owner") if isinstance(data, dict) else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CliError(f"{audit}: cannot read its review files ({exc})") from None
    return decisions, owner if isinstance(owner, str) else None
