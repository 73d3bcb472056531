"""``retrybudget queue status|requeue|release|export QUEUE``: watch a job (its counts and who
holds each lease until when), requeue its dead letters, release a dead worker's leases, export
its results.

QUEUE is a fetch state file (the SQLite queue) or a Redis URL with ``--job NAME``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sqlite3
import sys
from pathlib import Path
from typing import IO

from .._cmdline import EXIT_OK, CliError
from ..queue import JobQueue, QueueError, SqliteQueue, open_queue

__all__ = ["add_arguments", "open_named", "run"]

_REDIS = ("redis://", "rediss://", "unix://")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``queue`` subcommands and their options."""
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True,
                                parser_class=type(parser))
    for name, help_ in (("status", "operations by status and the next deferred instant (JSON)"),
                        ("requeue", "return dead-lettered (and with --failed, failed) "
                                    "operations to pending"),
                        ("release", "return the operations dead workers hold to pending (a "
                                    "live worker renews its leases; a dead one's lapse within "
                                    "30 s anyway)"),
                        ("export", "every recorded operation, one JSON line each")):
        action = sub.add_parser(name, help=help_, description=help_)
        action.add_argument("queue", metavar="QUEUE",
                            help="a fetch state file, or a Redis URL (with --job)")
        action.add_argument("--job", default=None, metavar="NAME",
                            help="the job's name in a Redis queue (fetch's default: the input "
                                 "file's name)")
        if name == "requeue":
            action.add_argument("--op", action="append", default=[], metavar="ID",
                                help="only this operation (repeatable)")
            action.add_argument("--failed", action="store_true",
                                help="failed operations too (a success is never re-run)")
        if name == "release":
            which = action.add_mutually_exclusive_group(required=True)
            which.add_argument("--dead", action="store_true",
                               help="the workers of this host whose process is gone")
            which.add_argument("--worker", action="append", default=[], metavar="NAME",
                               help="this worker, known dead (any host; repeatable; names as "
                                    "queue status shows them)")
        if name == "export":
            action.add_argument("--out", default=None, metavar="FILE",
                                help="write here instead of standard output")


def open_named(target: str, job: str | None) -> JobQueue:
    """The queue ``target`` names; refuses a missing file or a file that holds no queue.

    Raises:
        CliError: the file or Redis cannot be used, or ``--job`` is missing for Redis.
    """
    if target.startswith(_REDIS):
        if not job:
            raise CliError(f"{target.rsplit('@', 1)[-1]}: a Redis queue needs --job NAME")
        try:
            return open_queue(target, job)
        except QueueError as exc:
            raise CliError(str(exc)) from None
    path = Path(target.removeprefix("sqlite://"))
    if not path.is_file():
        raise CliError(f"{path}: no such file")
    try:
        probe = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            found = probe.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                  "name = 'queue_ops'").fetchone()
        finally:
            probe.close()
    except sqlite3.DatabaseError as exc:
        raise CliError(f"{path}: not a queue ({exc})") from None
    if found is None:
        raise CliError(f"{path}: not a queue (no queue_ops table)")
    try:
        return SqliteQueue(path)
    except QueueError as exc:
        raise CliError(str(exc)) from None


def _export(queue: JobQueue, out: IO[str]) -> int:
    n = 0
    for op in queue.export():
        out.write(json.dumps(op.as_dict(), ensure_ascii=False, separators=(",", ":")) + "\n")
        n += 1
    return n


def leases(queue: JobQueue, now: float) -> list[dict[str, object]]:
    """Each lease: its operation, holder (and whether this host sees it alive), expiry."""
    return [{"id": h.op_id, "worker": h.worker, "holder": str(h.holder()),
             "expires_at": round(h.expires_at, 3),
             "expires_in": round(max(0.0, h.expires_at - now), 1)} for h in queue.held()]


def _release(queue: JobQueue, args: argparse.Namespace) -> None:
    workers = queue.dead_holders() if args.dead else sorted(set(args.worker))
    moved = queue.release(workers)
    who = ", ".join(workers) if workers else "no dead worker holds a lease"
    print(f"released {moved} operation(s) ({who})")


def run(args: argparse.Namespace) -> int:
    """Run one ``queue`` action."""
    queue = open_named(args.queue, args.job)
    try:
        if args.action == "status":
            counts = queue.counts()
            report = {"queue": args.queue.rsplit("@", 1)[-1], "job": args.job, "counts": counts,
                      "unfinished": queue.pending(), "next_due": queue.next_due(),
                      "leases": leases(queue, queue.clock.wall())}
            json.dump(report, sys.stdout, indent=2)
            sys.stdout.write("\n")
        elif args.action == "requeue":
            ids = args.op or [None]
            moved = sum(queue.requeue(op, failed=args.failed) for op in ids)
            print(f"requeued {moved} operation(s)")
        elif args.action == "release":
            _release(queue, args)
        elif args.out is None:
            _export(queue, sys.stdout)
        else:
            try:
                with open(args.out, "w", encoding="utf-8") as out:
                    n = _export(queue, out)
            except OSError as exc:
                raise CliError(f"--out {args.out}: {exc.strerror or exc}") from None
            print(f"exported {n} operation(s) to {args.out}")
    except QueueError as exc:
        raise CliError(str(exc)) from None
    finally:
        with contextlib.suppress(Exception):
            queue.close()
    return EXIT_OK
