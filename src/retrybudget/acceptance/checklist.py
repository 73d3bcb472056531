"""``retrybudget check``: the acceptance checklist, over real loopback HTTP.

Every public acceptance case, and a scenario for each rule of the contract that no case
covers, is played against the sandbox provider through the httpx
:class:`~retrybudget.integrations.httpx.RetryTransport`. Each verdict records the expected
behaviour, the actual behaviour and the evidence (the requests the provider saw, the
waits, the outcome); a verdict fails when a safeguard is absent.

Without a user's policy each case runs under its own policy and is judged on its exact
expectations. With one, the user's policy runs every case
(:func:`~retrybudget.acceptance.policy_for` with the user's policy as base, and the
user's profile changes applied on top of each case's provider profile). A case is then
judged on the safeguards, with the numbers that depend on a budget (how many attempts,
which way a budget ran out) measured against the user's own budget:

- a non-retryable answer (401, 403, 404, 500, an invalid payload, a failed write) is
  still answered at once: the exact outcome and one request;
- a failure the budget cannot outlast still ends in a failure, within the policy's
  attempts and deadline; a policy without a deadline fails the budget cases;
- a provider-named wait is obeyed, or the operation stops at once with ``retry_at``;
- the interactive contract's fail-fast case does not apply to a policy that waits.

No case runs much longer than the time limit: a wait that would end past it is skipped
(the check's clock jumps ahead, and the evidence lists the skipped wait), and a policy
still sending attempts past it fails as unbounded.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..core.outcome import Outcome
from ..core.policy import Policy, RateLimitMode
from ..core.profiles import get_profile
from ..sandbox import RateLimit, SandboxConfig, serve_in_thread
from ._cases import Case, policy_for
from ._judge import CaseResult, Check, judge
from ._lab import (
    DEADLINE_SLACK_S,
    RULES,
    ChecklistError,
    Lab,
    PolicyUnderCheck,
    Scenario,
    Sent,
    Verdict,
    no_success_handed,
    overrun_check,
)
from ._offline import CaseBreaker
from ._scenarios import SCENARIOS

__all__ = [
    "RULES",
    "RULE_CASES",
    "ChecklistError",
    "PolicyUnderCheck",
    "RecordLine",
    "Verdict",
    "play_case",
    "run_checklist",
]

_TERMINAL = frozenset({"rejected", "not_found", "invalid_payload", "unexpected", "not_retried",
                       "circuit_open"})
_GAVE_UP = frozenset({"exhausted", "deadline", "retry_budget", "rate_limited"})

RecordLine = Callable[[str, Outcome[Any]], Mapping[str, Any]]
"""How a command records an operation's outcome (``fetch``'s results-file line), by id."""


def _reachable(case: Case) -> set[str]:
    """Outcomes a bigger budget could reach by getting to the script's later 2xx steps."""
    out: set[str] = set()
    for step in case.script[1:]:
        if 200 <= int(step.get("status", 0)) < 300:
            valid = not case.expect_json or isinstance(step.get("body"), dict)
            out.add("ok" if valid else "invalid_payload")
    return out


def _budget_checks(policy: Policy, result: CaseResult, *, bounded: bool) -> list[Check]:
    outcome = result.outcome
    checks = [
        Check("within_attempts", f"requests <= max_attempts ({policy.max_attempts})",
              result.requests, result.requests <= policy.max_attempts),
        Check("counters_match_provider", "attempts == requests the provider saw",
              outcome.attempts, outcome.attempts == result.requests),
    ]
    if policy.deadline is not None:
        limit = round(policy.deadline + DEADLINE_SLACK_S, 3)
        checks.append(Check("within_deadline", f"elapsed <= deadline + {DEADLINE_SLACK_S} s ({limit})",
                            round(outcome.elapsed, 3), outcome.elapsed <= limit))
    if bounded:
        checks.append(Check("budget_bounded", "a finite deadline bounds attempts and waits",
                            f"deadline = {policy.deadline}, max_attempts = {policy.max_attempts}",
                            policy.deadline is not None))
    return checks


def _user_checks(case: Case, policy: Policy, result: CaseResult) -> tuple[list[Check], bool]:
    """The safeguard checks of a case under a user's policy; False when it does not apply."""
    if case.rate_limit == RateLimitMode.FAIL_FAST.value and policy.rate_limit is RateLimitMode.WAIT:
        return [], False
    exp = case.expect
    by = {c.name: c for c in result.checks}
    expected = set(exp.get("outcome_in", ())) | ({exp["outcome"]} if "outcome" in exp else set())
    actual = result.outcome.reason.value
    out = [by[n] for n in ("no_fabricated_completion", "logical_operations") if n in by]
    if expected and expected <= _TERMINAL:
        out += [by[n] for n in ("outcome", "outcome_in", "requests", "attempts", "gateway_status",
                                "gateway_code") if n in by]
        return out + _budget_checks(policy, result, bounded=False), True
    allowed = set(_GAVE_UP) | _reachable(case)
    out.append(Check("outcome_in", sorted(allowed), actual, actual in allowed))
    if "min_gap_s" in exp:
        if result.requests >= 2:
            out.append(by["min_gap_s"])
            out += [by[n] for n in ("after_reset_s",) if n in by]
        else:
            stopped = actual == "rate_limited" and result.outcome.retry_at is not None
            out.append(Check("stopped_with_retry_at", "waits as asked, or stops with retry_at",
                             f"{actual}, retry_at {result.outcome.retry_at}", stopped))
    if "max_elapsed_s" in exp and exp.get("requests") == 1 and result.requests == 1:
        out.append(by["max_elapsed_s"])
    if "retry_at_after_s" in exp and actual == "rate_limited":
        out.append(by["retry_at_after_s"])
    if "breaker_failures_recorded" in exp and result.outcome.reason.is_provider_failure:
        out.append(by["breaker_failures_recorded"])
    return out + _budget_checks(policy, result, bounded=True), True


def _rule_case(case_id: str, title: str, script: list[dict[str, Any]], expect: dict[str, Any], *,
               method: str = "GET", max_attempts: int = 3, deadline_s: float = 5.0) -> Case:
    return Case(case_id, title, method, max_attempts, deadline_s, "wait", True, "generic",
                tuple(script), expect)


RULE_CASES = (
    _rule_case("R01", "an endless outage ends in a bounded failure, counted once by the breaker",
               [{"status": 503}],
               {"outcome_in": ["exhausted"], "requests": 3, "attempts": 3,
                "breaker_failures_recorded": 1}),
    _rule_case("R02", "slow failures stop at the deadline, however many attempts are allowed",
               [{"status": 503, "delay_s": 0.6}],
               {"outcome_in": ["deadline", "exhausted"], "max_elapsed_s": 1.5 + 0.3},
               max_attempts=10, deadline_s=1.5),
    _rule_case("R03", "after the final failure the caller gets the failure, never a success",
               [{"status": 502}], {"outcome_in": ["exhausted", "deadline"], "requests": 3}),
    _rule_case("R04", "a write whose connection was reset is not replayed",
               [{"reset": True}, {"status": 201, "body": {"reserved": True}}],
               {"outcome": "not_retried", "requests": 1}, method="POST"),
)
"""Rules expressed as cases (judged like the public ones)."""


def _policy(lab: Lab, case: Case) -> Policy:
    """The policy a case runs under: its own, or the user's with the case's provider facts.

    A rule expressed as a case (:data:`RULE_CASES`) runs under the user's policy as it is.
    """
    if lab.user is None:
        return policy_for(case)
    if any(case is rule_case for rule_case in RULE_CASES):
        return lab.user.policy
    policy = policy_for(case, base=lab.user.policy)
    return policy.replace(profile=lab.user.for_profile(get_profile(case.profile)))


def _recorded_checks(lab: Lab, case: Case, sent: Sent) -> list[Check]:
    """R03: the result line ``fetch`` would record for the outcome is a failure with no value."""
    if case.id != "R03" or sent.outcome is None or lab.record_line is None:
        return []
    line = lab.record_line(case.id, sent.outcome)
    recorded = {"ok": line["ok"], "outcome": line["outcome"], "value": line["value"]}
    return [Check("fetch_records_failure", {"ok": False, "value": None}, recorded,
                  line["ok"] is False and line["value"] is None)]


def play_case(lab: Lab, case: Case) -> Verdict:
    """Play one case (public, or a rule expressed as a case) over HTTP and judge it.

    Its exact expectations without a user's policy; the safeguards under one.
    """
    s = Scenario(lab, case.id)
    url = s.fixture(case.id, case.script)
    policy = _policy(lab, case)
    breaker = CaseBreaker(case.breaker == "open")
    started = s.clock.wall()
    sent = s.send(s.retrier(policy, breaker, method=case.method, job_id=case.id), case.method, url,
                  job_id=case.id)
    rule = RULES.get(case.id, case.title)
    arrivals = s.arrivals(case.id)
    if sent.outcome is None:
        return Verdict(case.id, case.title, rule, (overrun_check(sent, lab.time_limit),),
                       {"requests_seen": len(arrivals), "outcome": None})
    result = judge(case, sent.outcome, arrivals, started_wall=started,
                   breaker_failures=breaker.failures)
    applicable = True
    checks = list(result.checks)
    if lab.user is not None:
        checks, applicable = _user_checks(case, policy, result)
    checks += [no_success_handed(sent), *_recorded_checks(lab, case, sent)]
    return Verdict(case.id, case.title, rule, tuple(checks), s.evidence(result.evidence()),
                   applicable)


def run_checklist(cases: Sequence[Case], user: PolicyUnderCheck | None, *, time_limit: float,
                  only: Sequence[str] = (), record_line: RecordLine | None = None) -> list[Verdict]:
    """Run the cases, the rules expressed as cases and the rule scenarios against sandboxes.

    Args:
        cases: the acceptance cases.
        user: the user's policy to check, or None for each case's own policy.
        time_limit: seconds after which a wait is skipped and an attempt is an overrun.
        only: case or rule ids to run (every one when empty).
        record_line: how the command records an outcome; R03 checks it records a failure.

    Raises:
        ChecklistError: ``only`` names no case or rule, or the sandbox refuses a script.
    """
    wanted = {i.upper() for i in only}
    pick: Callable[[str], bool] = (lambda i: i.upper() in wanted) if wanted else (lambda i: True)
    jobs: list[Callable[[Lab], Verdict]] = []
    jobs += [lambda lab, c=c: play_case(lab, c) for c in (*cases, *RULE_CASES) if pick(c.id)]  # type: ignore[misc]
    jobs += [fn for rid, fn in SCENARIOS.items() if pick(rid)]
    if not jobs:
        raise ChecklistError(f"--only {', '.join(only)}: no such case or rule")
    limited_config = SandboxConfig(rate_limit=RateLimit(limit=4, window_s=1, style="github"))
    with serve_in_thread() as sandbox, serve_in_thread(limited_config) as limited:
        lab = Lab(sandbox, limited, user, time_limit, record_line)
        with ThreadPoolExecutor(max_workers=min(16, len(jobs))) as pool:
            return list(pool.map(lambda job: job(lab), jobs))
