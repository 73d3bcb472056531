"""``retrybudget review list|decide AUDIT``: the cases awaiting a decision, and a decision.

``review list AUDIT`` names each failed operation and each case of conflicting evidence that
no reviewer has decided yet: its id (the one the job's queue and results use), outcome,
why, the owner and the audit line that shows it. ``review decide AUDIT ID --decision retry
--queue STATE`` records the decision and puts the operation back on the job's queue (a
fetch state file, or a Redis URL with ``--job``), so the next run of the job sends it.

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
from collections.abc import Sequence
from typing import Any

from .._clock import SYSTEM_CLOCK, Clock
from .._cmdline import EXIT_OK, CliError
from ..observe import DECISIONS, merge_audits, review_report
from ._audits import decisions_of, load
from ._hints import program
from ._jobfile import sidecar

__all__ = ["add_arguments", "awaiting", "run"]


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
    decide.add_argument("--queue", default=None, metavar="QUEUE",
                        help="with --decision retry: requeue the operation on this job queue "
                             "(the fetch state file, or a Redis URL with --job)")
    decide.add_argument("--job", default=None, metavar="NAME",
                        help="the job's name in a Redis queue")
    listing = sub.add_parser("list", help="the operations and cases awaiting a decision",
                             description="List each failed operation and each case of "
                                         "conflicting evidence no reviewer has decided yet: "
                                         "id, outcome, why, owner, evidence.")
    listing.add_argument("audit", metavar="AUDIT.jsonl", nargs="+",
                         help="the audit file (several: the files of one job, merged)")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")


def _text(value: str | None, what: str, limit: int) -> str | None:
    if value is None:
        return None
    cleaned = " ".join(value.split())
    if not cleaned or len(cleaned) > limit or not cleaned.isprintable():
        raise CliError(f"{what}: expected printable text of 1 to {limit} characters")
    return cleaned


def awaiting(audits: Sequence[str]) -> list[dict[str, Any]]:
    """The cases of the job's audit files no reviewer has decided: each with its ``id`` (the
    queue's), ``operation_id``, ``outcome``, ``why``, ``owner`` and ``evidence`` (the audit
    lines that show it: ``FILE:LINE`` when several files are merged)."""
    log = merge_audits([load(audit) for audit in audits])
    decisions, owner = decisions_of(audits)
    report = review_report(log, decisions=decisions, owner=owner)
    named = {d.get("operation_id") for d in decisions if d.get("decision") in DECISIONS}

    def undecided(evidence: dict[str, Any]) -> bool:
        record = log.records[evidence["record"]]
        return not named & {record.get("operation_id"), record.get("job_id")} - {None}

    def where(evidence: dict[str, Any]) -> str:
        line = evidence.get("line")
        return f"{log.files[evidence['record']]}:{line}" if log.files else str(line)

    out = []
    for step in report["proposed_steps"]:
        if step["action"] not in ("handover", "review_case"):
            continue
        open_ = [e for e in step["evidence"] if isinstance(e.get("record"), int) and undecided(e)]
        if not open_:
            continue
        first = log.records[open_[0]["record"]]
        why = (str(first.get("detail") or "no detail recorded") if step["action"] == "handover"
               else step["description"])
        out.append({"id": first.get("job_id") or first.get("operation_id"),
                    "operation_id": first.get("operation_id"), "case": step["action"],
                    "outcome": first.get("outcome"), "why": why, "owner": owner,
                    "evidence": sorted({where(e) for e in open_ if e.get("line") is not None})})
    return out


def _list(args: argparse.Namespace) -> int:
    audits = list(dict.fromkeys(args.audit))
    cases = awaiting(audits)
    if args.json:
        for case in cases:
            print(json.dumps(case, ensure_ascii=False, separators=(",", ":")))
        return EXIT_OK
    owner = cases[0]["owner"] if cases else None
    print(f"{len(cases)} case(s) await a decision in {', '.join(audits)}"
          + (f" (owner: {owner})" if owner else "") + ("." if not cases else ":"))
    for case in cases:
        lines = ", ".join(case["evidence"])
        print(f"  {case['id']}  {case['outcome']}: {case['why']} (audit line {lines})")
    if cases:
        print(f"decide: {program()} review decide AUDIT ID --decision accept|reject|retry "
              "--reviewer NAME [--note TEXT] [--queue STATE]  (AUDIT: the file that holds it)")
    return EXIT_OK


def _requeue(args: argparse.Namespace, queue_id: str) -> int:
    """Put ``queue_id`` back on the job's queue; how many moved (1, or 0 when it is not a
    failed or dead-lettered operation there: it succeeded, or runs still)."""
    from ._queue import open_named  # noqa: PLC0415 - only when asked to requeue

    queue = open_named(args.queue, args.job)
    try:
        if queue.get(queue_id) is None:
            raise CliError(f"--queue {args.queue.rsplit('@', 1)[-1]}: no operation {queue_id!r} "
                           "in this job's queue")
        return queue.requeue(queue_id, failed=True)
    finally:
        queue.close()


def run(args: argparse.Namespace, *, clock: Clock = SYSTEM_CLOCK) -> int:
    """``review list`` or ``review decide``."""
    if args.action == "list":
        return _list(args)
    return _decide(args, clock)


def _decide(args: argparse.Namespace, clock: Clock) -> int:
    """Append one decision (and requeue a retry); the operation must be in the audit file."""
    log = load(args.audit)
    reviewer = _text(args.reviewer, "--reviewer", 200)
    note = _text(args.note, "--note", 2000)
    record = next((r for r in log.records if args.op in (r.get("operation_id"), r.get("job_id"))),
                  None)
    if record is None:
        raise CliError(f"{args.audit}: no operation or job id {args.op!r} in the audit file")
    if args.queue is not None and args.decision != "retry":
        raise CliError("--queue: only a retry is requeued")
    queue_id = str(record.get("job_id") or record["operation_id"])
    requeued = _requeue(args, queue_id) if args.queue is not None else None
    now = clock.wall()
    decision = {"operation_id": record["operation_id"], "job_id": record.get("job_id"),
                "decision": args.decision, "reviewer": reviewer, "note": note,
                "decided_at": round(now, 6), "requeued": requeued}
    target = sidecar(args.audit, "reviews.jsonl")
    try:
        with open(target, "a", encoding="utf-8") as out:
            out.write(json.dumps(decision, ensure_ascii=False, separators=(",", ":")) + "\n")
            out.flush()
            os.fsync(out.fileno())
    except OSError as exc:
        raise CliError(f"{target}: cannot append: {exc.strerror or exc}") from None
    when = dt.datetime.fromtimestamp(now, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    print(f"recorded {args.decision} for {queue_id} (operation {record['operation_id']}) by "
          f"{reviewer} at {when} in {target}")
    if requeued:
        print(f"requeued {queue_id}: run the job again (the same fetch command) to send it")
    elif requeued == 0:
        print(f"not requeued: {queue_id} is not a failed or dead-lettered operation of that "
              "queue (it succeeded, or is still to run)")
    elif args.decision == "retry":
        print(f"to send it again: {program()} queue requeue STATE --failed --op {queue_id}, "
              "then run the job again (or decide with --queue STATE)")
    return EXIT_OK
