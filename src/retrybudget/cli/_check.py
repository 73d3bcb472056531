"""``retrybudget check``: the arguments and the printing of the acceptance checklist.

The checklist itself (every public case and the rule scenarios, over loopback HTTP against
the sandbox) is :mod:`retrybudget.acceptance.checklist`; this module reads the fixtures, the
policy and the profile file the user named, runs it and prints the verdicts (or ``--json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from rich.console import Console
from rich.markup import escape

from .._cmdline import EXIT_FAILED, EXIT_OK, CliError
from .._profile_file import read_profile
from ..acceptance import load_cases
from ..acceptance.checklist import RULES, ChecklistError, Verdict, run_checklist
from ..core.outcome import Outcome
from ..core.policy import Policy
from ._inputs import Op
from ._job import result_line
from ._policy import UserPolicy, load_policy

__all__ = ["RULES", "Verdict", "run", "run_checklist"]


def _fetch_line(case_id: str, outcome: Outcome[Any]) -> Mapping[str, Any]:
    """The results-file line ``fetch`` would record for ``outcome`` (the checklist judges it)."""
    op = Op(case_id, "http://sandbox.invalid/fx", (), 1)
    return result_line(op, outcome, None, None, run=1, finished_at=0.0)


_SHOWN = 8


def _fmt(value: object) -> str:
    """A value for the text output (long lists are cut; ``--json`` has them whole)."""
    if isinstance(value, float):
        return f"{value:g}" if abs(value) < 1e6 else f"{value:.3f}"
    if isinstance(value, list) and len(value) > _SHOWN:
        return json.dumps(value[:_SHOWN], default=str)[:-1] + f", … {len(value) - _SHOWN} more]"
    return json.dumps(value, default=str) if isinstance(value, (list, dict)) else str(value)


def _print(console: Console, verdicts: Sequence[Verdict], policy_name: str) -> None:
    console.print(f"[bold]retrybudget check[/bold]: {len(verdicts)} cases and rules, {policy_name}, "
                  "over loopback HTTP through the httpx transport\n")
    colors = {"pass": "green", "fail": "bold red", "n/a": "yellow"}
    for v in verdicts:
        console.print(f"[{colors[v.status]}]{v.status.upper():4}[/] [bold]{v.id}[/] {escape(v.title)} "
                      f"[dim]· {escape(v.rule)}[/]")
        if not v.applicable:
            console.print("     does not apply: this policy waits on rate limits (the interactive "
                          "contract fails fast)")
            continue
        expected = "; ".join(f"{c.name} {_fmt(c.expected)}" for c in v.checks)
        actual = "; ".join(f"{c.name} {_fmt(c.actual)}" + ("" if c.passed else " ✗") for c in v.checks)
        evidence = ", ".join(f"{k} {_fmt(val)}" for k, val in v.evidence.items())
        console.print(f"     expected: {escape(expected)}\n     actual:   {escape(actual)}\n"
                      f"     evidence: {escape(evidence)}")
    counts = {s: sum(v.status == s for v in verdicts) for s in ("pass", "fail", "n/a")}
    console.print(f"\n{counts['pass']} passed, {counts['fail']} failed, {counts['n/a']} not applicable")


def _with_profile_file(user: UserPolicy | None, path: str) -> UserPolicy:
    """``user`` (or each case's own policy) with a TOML profile file's rules on every case."""
    try:
        profile, changes = read_profile(path)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    policy = user.policy if user is not None else Policy()
    source = f"{user.source} + profile {path}" if user is not None else f"profile {path}"
    merged = {**(dict(user.profile_changes) if user is not None else {}), **changes}
    return UserPolicy(policy.replace(profile=profile), source, MappingProxyType(merged))


def run(args: argparse.Namespace, console: Console) -> int:
    """Run ``check``; 1 when any safeguard is absent."""
    try:
        cases = load_cases(args.fixtures)
    except ValueError as exc:
        raise CliError(f"--fixtures {exc}" if args.fixtures else str(exc)) from None
    user = load_policy(args.policy) if args.policy else None
    if getattr(args, "profile", None):
        user = _with_profile_file(user, args.profile)
    try:
        verdicts = run_checklist(cases, user, time_limit=args.time_limit, only=args.only,
                                 record_line=_fetch_line)
    except ChecklistError as exc:
        raise CliError(str(exc)) from None
    failed = any(v.status == "fail" for v in verdicts)
    name = f"policy {user.source}" if user else "each case's own policy"
    if args.json:
        document = {"policy": user.source if user else None, "passed": not failed,
                    "results": [v.as_json() for v in verdicts]}
        json.dump(document, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        _print(console, verdicts, name)
    return EXIT_FAILED if failed else EXIT_OK
