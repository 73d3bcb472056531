"""``retrybudget report AUDIT.jsonl``: the review report of an audit file, as JSON."""

from __future__ import annotations

import argparse
import json
import sys

from ..observe import AuditFileError, load_audit, review_report
from ._errors import EXIT_OK, CliError
from ._paths import os_reason

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Print the review report of ``args.audit``; a malformed file names its line."""
    try:
        log = load_audit(args.audit)
    except AuditFileError as exc:
        raise CliError(str(exc)) from None
    except FileNotFoundError:
        raise CliError(f"{args.audit}: no such file") from None
    except IsADirectoryError:
        raise CliError(f"{args.audit}: is a directory, not an audit file") from None
    except OSError as exc:
        raise CliError(f"{args.audit}: cannot read: {os_reason(exc)}") from None
    if not log.records and not log.bad_lines:
        raise CliError(f"{args.audit}: empty, no audit records to review")
    json.dump(review_report(log), sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
    return EXIT_OK
