"""``retrybudget report AUDIT.jsonl``: the review report of an audit file.

A short human summary by default; ``--json`` prints the whole report (JSON), ``--html FILE``
writes a self-contained HTML report (a timeline and a table per operation).
"""

from __future__ import annotations

import argparse
import json
import sys

from .._cmdline import EXIT_OK, CliError, check_new_file, os_reason
from ..observe import merge_audits, review_report, review_summary
from ._audits import decisions_of, load
from ._hints import program

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Print the review of ``args.audit``; a malformed file names its line."""
    html = getattr(args, "html", None)
    if html is not None:
        check_new_file(html, "--html", create_dirs=False)
    audits = [args.audit] if isinstance(args.audit, str) else list(dict.fromkeys(args.audit))
    log = merge_audits([load(audit) for audit in audits])
    name = audits[0] if len(audits) == 1 else f"{len(audits)} audit files"
    if not log.records and not log.bad_lines:
        raise CliError(f"{name}: empty, no audit records to review")
    decisions, owner = decisions_of(audits)
    report = review_report(log, decisions=decisions, owner=owner)
    if html is not None:
        from ..observe import render_html  # noqa: PLC0415 - only for --html

        try:
            with open(html, "w", encoding="utf-8") as out:
                out.write(render_html(log.records, report, title=f"Review of {name}"))
        except OSError as exc:
            raise CliError(f"--html {html}: cannot write: {os_reason(exc)}") from None
        print(f"wrote {html}")
    elif getattr(args, "json", False):
        json.dump(report, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        if len(audits) > 1:
            sys.stdout.write(f"merged {len(audits)} audit files ({', '.join(audits)}): "
                             f"{len(log.records)} records, {log.duplicates} duplicate(s) "
                             "dropped\n")
        sys.stdout.write(review_summary(log.records, report, name))
        sys.stdout.write(f"\nthe whole report: {program()} report {' '.join(audits)} --json\n")
    return EXIT_OK
