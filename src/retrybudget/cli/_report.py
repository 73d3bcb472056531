"""``retrybudget report AUDIT.jsonl``: the review report of an audit file, as JSON."""

from __future__ import annotations

import argparse
import json
import sys

from ..observe import AuditFileError, AuditLog, load_audit, review_report
from ._errors import EXIT_OK, CliError

__all__ = ["load", "run"]


def load(audit: str) -> AuditLog:
    """Read an audit file; a malformed or unreadable one is a :class:`CliError` naming it."""
    try:
        return load_audit(audit)
    except AuditFileError as exc:
        raise CliError(str(exc)) from None
    except FileNotFoundError:
        raise CliError(f"{audit}: no such file") from None
    except OSError as exc:
        raise CliError(f"{audit}: cannot read: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    """Print the review report of ``args.audit``; a malformed file names its line."""
    log = load(args.audit)
    from ._review import review_inputs  # noqa: PLC0415 - decisions and owner beside the audit

    decisions, owner = review_inputs(args.audit)
    json.dump(review_report(log, decisions=decisions, owner=owner), sys.stdout, indent=2,
              ensure_ascii=False)
    sys.stdout.write("\n")
    return EXIT_OK
