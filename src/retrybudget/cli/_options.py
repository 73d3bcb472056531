"""The options of ``demo``, ``fetch`` and ``check`` (argparse only: no extra is imported here)."""

from __future__ import annotations

import argparse

from .._cmdline import non_negative_int, number, positive_float, positive_int, share
from ..core.policy import PRESETS

__all__ = [
    "CHECK_EXAMPLE",
    "DEMO_EXAMPLE",
    "FETCH_EXAMPLE",
    "add_check_arguments",
    "add_demo_arguments",
    "add_fetch_arguments",
]

FETCH_EXAMPLE = """examples:
  retrybudget fetch urls.txt --workers 8 --policy background --profile github \\
      --header 'Authorization: env:GITHUB_TOKEN'
  retrybudget fetch jobs.jsonl --state out/jobs.sqlite --redis redis://127.0.0.1:6379/0
  retrybudget fetch jobs.jsonl --queue redis://127.0.0.1:6379/0 --job nightly

INPUT is one URL per line, or JSON lines {"id": "...", "url": "...", "headers": {...}}.
Run the same command again to resume: finished operations are skipped. A rate-limited
operation is deferred to its retry_at and run then by the same run.

exit status:
  0    every operation ok
  1    some operation failed (see the results file)
  2    bad input (nothing was run)
  3    operations left to do (still rate-limited when the run ended: run it again after
       the time printed)
  130  interrupted (Ctrl-C): the operations in flight finished; run it again to resume"""

DEMO_EXAMPLE = """examples:
  retrybudget demo
  retrybudget demo --size 300 --workers 16 --limit 30 --window 2 --fault-5xx 0.1
  retrybudget demo --out out/run-2        # a directory of its own: an earlier run's files stay

A third of the way in, another client of the same account spends what is left of a window
(--no-other-client: nobody does): the first worker to meet the throttled answer closes the
gate and every worker waits for the provider's reset. Writes, in DIR (replacing an earlier
demo's files):
  demo-urls.txt          the lookups' URLs (the job's input)
  demo-results.jsonl     one result line per lookup
  demo-audit.jsonl       one audit record per lookup (retrybudget report reads it)
  demo-state.sqlite      the job's durable state (and demo-state.sqlite.lock while it runs)
  demo-summary.json      the summary printed at the end, as JSON
  demo-requests.html     a chart: requests per provider window against its limit, throttled
                         answers and gate waits
then prints where they went."""

CHECK_EXAMPLE = """examples:
  retrybudget check
  retrybudget check --policy my-policy.toml --json > check.json

Exit status: 0 every safeguard present, 1 a safeguard is absent, 2 bad input."""


_latency = number(float, lambda v: 0.0 <= v <= 10.0, "seconds between 0 and 10")


def _policy_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup, default: str | None,
                   what: str) -> None:
    names = " | ".join(sorted(PRESETS))
    parser.add_argument("--policy", default=default, metavar="NAME|FILE",
                        help=f"{what}: {names}, or a .toml/.json file whose keys mirror Policy "
                             "fields (see docs/cli.md)" + (" (default: %(default)s)" if default else ""))


def add_fetch_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``fetch`` options."""
    parser.add_argument("input", metavar="INPUT", help="URLs, one per line, or JSON lines")
    parser.add_argument("--workers", type=positive_int, default=4, metavar="N",
                        help="concurrent workers sharing one gate (default: %(default)s)")
    budget = parser.add_argument_group("budget")
    _policy_option(budget, "background", "each operation's policy")
    budget.add_argument("--profile", default=None,
                        help="provider profile: auto (by request host), generic, github, stripe, "
                             "openai, … (rb.PROVIDERS lists them; default: the policy's)")
    budget.add_argument("--deadline", type=positive_float, default=None, metavar="SECONDS",
                        help="each operation's end-to-end budget, waits included")
    budget.add_argument("--attempts", type=positive_int, default=None, metavar="N",
                        help="attempts per operation at most")
    budget.add_argument("--timeout", type=positive_float, default=30.0, metavar="SECONDS",
                        help="one attempt's timeout, clipped to the deadline (default: %(default)s)")
    budget.add_argument("--expect-json", action="store_true",
                        help="a 2xx whose body is not a JSON object is invalid_payload, not ok")
    parser.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'",
                        help="a header for every request; VALUE env:VAR reads the environment "
                             "(secrets are never written or printed); repeatable")
    parser.add_argument("--redis", default=None, metavar="URL",
                        help="share gate, pacing, retry budget and breaker with other processes "
                             "and machines through Redis, e.g. redis://127.0.0.1:6379/0")
    files = parser.add_argument_group("files (default: out/INPUT-NAME.results.jsonl, "
                                      ".audit.jsonl, .sqlite)")
    files.add_argument("--out", default=None, metavar="FILE",
                       help="results: one JSON line per operation")
    files.add_argument("--audit", default=None, metavar="FILE", help="audit records (JSON lines)")
    files.add_argument("--state", default=None, metavar="FILE",
                       help="SQLite state that makes the job resumable")
    parser.add_argument("--retry-failed", action="store_true",
                        help="run failed and dead-lettered operations again too")
    queue = parser.add_argument_group("queue")
    queue.add_argument("--queue", default=None, metavar="URL",
                       help="drain one job with other fetch processes through Redis, e.g. "
                            "redis://127.0.0.1:6379/0 (also shares the coordinator unless "
                            "--redis names another); default: the --state file")
    queue.add_argument("--job", default=None, metavar="NAME",
                       help="the job's name in --queue (default: the input file's name)")
    queue.add_argument("--job-file", default=None, metavar="FILE",
                       help="a supervised job (TOML): owner, allowed hosts and methods, outputs, "
                            "policy and profile; requests outside it are refused unsent")
    queue.add_argument("--max-deferrals", type=non_negative_int, default=5, metavar="N",
                       help="rate-limited deferrals of one operation before it is "
                            "dead-lettered (default: %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no progress display")


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``demo`` options."""
    parser.add_argument("--size", type=positive_int, default=120, metavar="N",
                        help="rental availability lookups (default: %(default)s)")
    parser.add_argument("--workers", type=positive_int, default=8, metavar="N",
                        help="concurrent workers sharing one gate (default: %(default)s)")
    limits = parser.add_argument_group("the provider's rate limit")
    limits.add_argument("--limit", type=positive_int, default=20, metavar="R",
                        help="requests per window (default: %(default)s)")
    limits.add_argument("--window", type=positive_int, default=2, metavar="W",
                        help="window in whole seconds (default: %(default)s)")
    limits.add_argument("--style", choices=("github", "ietf", "retry-after"), default="github",
                        help="how the limit is signalled (default: %(default)s)")
    limits.add_argument("--github-403", action="store_true",
                        help="github style: an exceeded limit is a 403 with remaining 0")
    faults = parser.add_argument_group("seeded faults")
    for flag, default, what in (("--fault-5xx", 0.05, "502/503/504 answers"),
                                ("--fault-reset", 0.02, "reset connections"),
                                ("--fault-malformed", 0.01, "malformed 200 bodies"),
                                ("--missing", 0.02, "lookups for rentals that do not exist")):
        faults.add_argument(flag, type=share, default=default, metavar="SHARE",
                            help=f"share of {what} (default: %(default)s)")
    faults.add_argument("--latency", type=_latency, default=0.02, metavar="SECONDS",
                        help="added latency per request in seconds (default: %(default)s)")
    faults.add_argument("--seed", type=int, default=1, metavar="N",
                        help="fault seed (default: %(default)s)")
    parser.add_argument("--deadline", type=positive_float, default=30.0, metavar="SECONDS",
                        help="each lookup's budget, waits included (default: %(default)s)")
    parser.add_argument("--out", default="out", metavar="DIR",
                        help="where the files go (default: %(default)s)")
    parser.add_argument("--no-other-client", action="store_true",
                        help="no other client spends the quota during the run")


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``check`` options."""
    parser.add_argument("--fixtures", default=None, metavar="FILE",
                        help="acceptance cases to run (default: the packaged acceptance.json)")
    _policy_option(parser, None, "check this policy instead of each case's own")
    parser.add_argument("--profile", default=None, metavar="FILE",
                        help="check this TOML provider profile: its rules are applied on top "
                             "of each case's provider profile")
    parser.add_argument("--only", action="append", default=[], metavar="ID",
                        help="run only this case or rule id (repeatable)")
    parser.add_argument("--time-limit", type=positive_float, default=30.0, metavar="SECONDS",
                        help="how long one case may take: a wait that would end later is "
                             "skipped (and listed in the evidence); attempts still sent after "
                             "it fail the case as unbounded (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
