"""``retrybudget check``: the acceptance checklist, over real loopback HTTP.

Every public acceptance case, and a scenario for each rule of the contract that no case
covers, is played against the sandbox provider through the httpx
:class:`~retrybudget.integrations.httpx.RetryTransport`. Each verdict records the expected
behaviour, the actual behaviour and the evidence (the requests the provider saw, the
waits, the outcome); a verdict fails when a safeguard is absent.

Without ``--policy`` each case runs under its own policy and is judged on its exact
expectations. With ``--policy`` the user's policy runs every case
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

No case runs much longer than ``--time-limit``: a wait that would end past it is skipped
(the check's clock jumps ahead, and the evidence lists the skipped wait), and a policy
still sending attempts past it fails as unbounded.
"""

from __future__ import annotations

import argparse
import json
import random
import secrets
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import httpx
from rich.console import Console
from rich.markup import escape

from .._clock import SYSTEM_CLOCK
from .._drivers import Retrier
from .._profile_file import read_profile
from ..acceptance import Case, CaseBreaker, CaseResult, Check, judge, load_cases, policy_for
from ..coordination import (
    BreakerConfig,
    CoordinationConfig,
    Coordinator,
    MemoryCoordinator,
)
from ..core.outcome import Outcome, Reason
from ..core.policy import Policy, RateLimitMode
from ..core.profiles import get_profile
from ..errors import RetryBudgetError
from ..integrations import JOB_ID, outcome_of
from ..integrations.httpx import RetryTransport
from ..observe import AuditHook, JsonlAuditSink, load_audit
from ..sandbox import RateLimit, SandboxConfig, SandboxServer, serve_in_thread
from ._errors import EXIT_FAILED, EXIT_OK, CliError
from ._inputs import Op
from ._job import result_line
from ._policy import UserPolicy, load_policy

__all__ = ["RULES", "Verdict", "run", "run_checklist"]

_TERMINAL = frozenset({"rejected", "not_found", "invalid_payload", "unexpected", "not_retried",
                       "circuit_open"})
_GAVE_UP = frozenset({"exhausted", "deadline", "retry_budget", "rate_limited"})
_DEADLINE_SLACK_S = 0.5
_CLIENT_TIMEOUT_S = 5.0

RULES: dict[str, str] = {
    "A01": "counters per operation", "A02": "exhausted budget stops",
    "A03": "Retry-After obeyed", "A04": "never sleep past the deadline",
    "A05": "Retry-After obeyed", "A06": "authorization failure not retried forever",
    "A07": "classified by provider documentation", "A08": "rate limits honoured",
    "A09": "non-retryable failures stop", "A10": "no fabricated completion",
    "A11": "writes not replayed", "A12": "transient faults retried within budget",
    "A13": "deadline kept", "A14": "bad input is data",
    "A15": "never sleep past the deadline", "A16": "interactive contract: 429 fails fast",
    "A17": "non-retryable failures stop", "A18": "breaker counts logical operations",
    "R01": "exhausted budget stops", "R02": "deadline kept",
    "R03": "no fabricated completion after final failure", "R04": "writes not replayed",
    "R05": "counters per operation", "R06": "breaker counts logical operations",
    "R07": "workers coordinated, rate limits honoured", "R08": "audit without secrets",
    "R09": "bad input is data",
}
"""The rule of the contract (docs/design.md) each case and scenario stands for."""


class Overrun(Exception):
    """The policy would keep sending attempts past the check's time limit."""


class _LimitedClock:
    """The real clock, except that a wait that would end past the time limit is skipped.

    A skipped wait moves this clock forward at once (the operation sees the time pass, the
    deadline arithmetic stays right) and is listed in :attr:`skipped` for the evidence; so a
    policy that would wait an hour is judged in a moment instead of hanging the check.
    """

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.until = SYSTEM_CLOCK.monotonic() + limit
        self.skipped: list[float] = []
        self._offset = 0.0
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        return SYSTEM_CLOCK.monotonic() + self._offset

    def wall(self) -> float:
        return SYSTEM_CLOCK.wall() + self._offset

    def _skip(self, seconds: float) -> bool:
        if SYSTEM_CLOCK.monotonic() + seconds <= self.until:
            return False
        with self._lock:
            self._offset += seconds
            self.skipped.append(round(seconds, 3))
        return True

    def sleep(self, seconds: float) -> None:
        if not self._skip(seconds):
            SYSTEM_CLOCK.sleep(seconds)

    async def async_sleep(self, seconds: float) -> None:
        if not self._skip(seconds):
            await SYSTEM_CLOCK.async_sleep(seconds)


class _Guard(httpx.BaseTransport):
    """Sends attempts until the time limit; past it, refuses (raises :class:`Overrun`)."""

    def __init__(self, clock: _LimitedClock) -> None:
        self.clock = clock
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if SYSTEM_CLOCK.monotonic() > self.clock.until:
            raise Overrun(f"still sending attempts after the check's limit of {self.clock.limit:g} s")
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


@dataclass(frozen=True, slots=True)
class Verdict:
    """One case's or rule's verdict.

    Attributes:
        id: the case id (A..) or rule scenario id (R..).
        title: what it checks.
        rule: the rule of the contract it stands for.
        checks: each expectation, what happened, and whether it held.
        evidence: what the provider saw, the waits and the outcome.
        applicable: False when the case does not apply to the policy checked.
    """

    id: str
    title: str
    rule: str
    checks: tuple[Check, ...]
    evidence: Mapping[str, Any]
    applicable: bool = True

    @property
    def passed(self) -> bool:
        """True when every check held (or the case does not apply)."""
        return all(c.passed for c in self.checks)

    @property
    def status(self) -> str:
        """``pass``, ``fail`` or ``n/a``."""
        if not self.applicable:
            return "n/a"
        return "pass" if self.passed else "fail"

    def as_json(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return {
            "id": self.id, "title": self.title, "rule": self.rule, "status": self.status,
            "expected": {c.name: c.expected for c in self.checks},
            "actual": {c.name: c.actual for c in self.checks},
            "checks": [{"name": c.name, "expected": c.expected, "actual": c.actual,
                        "passed": c.passed} for c in self.checks],
            "evidence": dict(self.evidence),
        }


@dataclass(frozen=True, slots=True)
class Sent:
    """What one request through the transport came to."""

    outcome: Outcome[Any] | None
    status: int | None = None
    raised: str | None = None
    overrun: str | None = None


@dataclass
class Lab:
    """What every scenario shares: the sandboxes, the policy under check and the time limit."""

    sandbox: SandboxServer
    limited: SandboxServer | None
    user: UserPolicy | None
    time_limit: float
    prefix: str = field(default_factory=lambda: f"check{secrets.token_hex(3)}")


class _Scenario:
    """One case's or rule's tools: a run id, a limited clock, fixtures and requests."""

    def __init__(self, lab: Lab, scenario_id: str) -> None:
        self.lab = lab
        self.run_id = f"{lab.prefix}-{scenario_id}"
        self.clock = _LimitedClock(lab.time_limit)

    def evidence(self, evidence: Mapping[str, Any]) -> dict[str, Any]:
        """``evidence`` plus the waits the time limit skipped, if any."""
        out = dict(evidence)
        if self.clock.skipped:
            out["skipped_waits_s"] = list(self.clock.skipped)
        return out

    def fixture(self, name: str, script: Sequence[Mapping[str, Any]]) -> str:
        """Install ``script`` as fixture ``name`` of this scenario's run; its URL."""
        try:
            return self.lab.sandbox.load_fixture(self.run_id, name, script)
        except ValueError as exc:
            raise CliError(f"case {name}: the sandbox refused its script ({exc})") from None

    def arrivals(self, name: str) -> list[float]:
        """When the provider saw each request for fixture ``name``."""
        seen = self.lab.sandbox.stats(self.run_id)["requests"]
        return [float(r["arrival"]) for r in seen if r["fixture_id"] == name]

    def retrier(self, policy: Policy, coordinator: Coordinator | None = None, *,
                method: str = "GET", job_id: str | None = None,
                hooks: tuple[object, ...] = ()) -> Retrier:
        """A retrier on this scenario's clock (a closed one-case breaker unless given one)."""
        return Retrier(policy=policy, clock=self.clock, random=random.Random(7), method=method,
                       job_id=job_id, hooks=hooks,
                       coordinator=coordinator if coordinator is not None else CaseBreaker(False))

    def send(self, retrier: Retrier, method: str, url: str, *,
             headers: Mapping[str, str] | None = None, job_id: str | None = None) -> Sent:
        """One request through the httpx transport: its outcome, or how it overran."""
        transport = RetryTransport(_Guard(self.clock), retrier=retrier)
        extensions = {JOB_ID: job_id} if job_id else {}
        with httpx.Client(transport=transport, timeout=_CLIENT_TIMEOUT_S) as client:
            try:
                response = client.request(method, url, headers=headers, extensions=extensions)
            except Overrun as exc:
                return Sent(None, overrun=str(exc))
            except RetryBudgetError as exc:
                return Sent(exc.outcome, raised=type(exc).__name__)
            return Sent(outcome_of(response), status=response.status_code)


# Judging -------------------------------------------------------------------------------


def _overrun(sent: Sent, limit: float) -> Check:
    return Check("bounded", f"ends within the check's {limit:g} s", sent.overrun, False)


def _no_success_handed(sent: Sent) -> Check:
    """Rule 7 at the HTTP boundary: a failed operation never hands the caller a 2xx."""
    failed = sent.outcome is None or sent.outcome.reason is not Reason.OK
    handed = sent.status if sent.status is not None else f"error {sent.raised}"
    fabricated = failed and sent.status is not None and 200 <= sent.status < 300
    return Check("caller_no_2xx_on_failure", "no 2xx for a failed operation",
                 handed, not fabricated)


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
        limit = round(policy.deadline + _DEADLINE_SLACK_S, 3)
        checks.append(Check("within_deadline", f"elapsed <= deadline + {_DEADLINE_SLACK_S} s ({limit})",
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


def _case_policy(lab: Lab, case: Case) -> Policy:
    if lab.user is None:
        return policy_for(case)
    policy = policy_for(case, base=lab.user.policy)
    return policy.replace(profile=lab.user.for_profile(get_profile(case.profile)))


def play_case(lab: Lab, case: Case) -> Verdict:
    """Play one case over HTTP and judge it."""
    s = _Scenario(lab, case.id)
    url = s.fixture(case.id, case.script)
    policy = _case_policy(lab, case)
    breaker = CaseBreaker(case.breaker == "open")
    started = s.clock.wall()
    sent = s.send(s.retrier(policy, breaker, method=case.method, job_id=case.id), case.method, url,
                  job_id=case.id)
    rule = RULES.get(case.id, case.title)
    arrivals = s.arrivals(case.id)
    if sent.outcome is None:
        return Verdict(case.id, case.title, rule, (_overrun(sent, lab.time_limit),),
                       {"requests_seen": len(arrivals), "outcome": None})
    result = judge(case, sent.outcome, arrivals, started_wall=started,
                   breaker_failures=breaker.failures)
    applicable = True
    checks = list(result.checks)
    if lab.user is not None:
        checks, applicable = _user_checks(case, policy, result)
    checks.append(_no_success_handed(sent))
    return Verdict(case.id, case.title, rule, tuple(checks), s.evidence(result.evidence()),
                   applicable)


# Rules no public case covers -------------------------------------------------------------


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


def _rule_policy(lab: Lab, case: Case) -> Policy:
    return lab.user.policy if lab.user is not None else policy_for(case)


def _scenario_policy(lab: Lab, **own: Any) -> Policy:
    """The user's policy, or the scenario's own (3 attempts in 5 s unless ``own`` says else)."""
    if lab.user is not None:
        return lab.user.policy
    return Policy(**{"name": "checklist", "max_attempts": 3, "deadline": 5.0, **own})


def _fetch_line_checks(case: Case, sent: Sent) -> list[Check]:
    """R03: the result line ``fetch`` would record for the outcome is a failure with no value."""
    if case.id != "R03" or sent.outcome is None:
        return []
    op = Op(case.id, "http://sandbox.invalid/fx", (), 1)
    line = result_line(op, sent.outcome, None, None, run=1, finished_at=0.0)
    recorded = {"ok": line["ok"], "outcome": line["outcome"], "value": line["value"]}
    return [Check("fetch_records_failure", {"ok": False, "value": None}, recorded,
                  line["ok"] is False and line["value"] is None)]


def play_rule_case(lab: Lab, case: Case) -> Verdict:
    """Play a rule expressed as a case: exact expectations, or the user's policy's safeguards."""
    s = _Scenario(lab, case.id)
    url = s.fixture(case.id, case.script)
    policy = _rule_policy(lab, case)
    breaker = CaseBreaker(False)
    started = s.clock.wall()
    sent = s.send(s.retrier(policy, breaker, method=case.method, job_id=case.id), case.method, url)
    arrivals = s.arrivals(case.id)
    if sent.outcome is None:
        return Verdict(case.id, case.title, RULES[case.id], (_overrun(sent, lab.time_limit),),
                       {"requests_seen": len(arrivals), "outcome": None})
    result = judge(case, sent.outcome, arrivals, started_wall=started,
                   breaker_failures=breaker.failures)
    checks = list(result.checks)
    if lab.user is not None:
        checks, _ = _user_checks(case, policy, result)
    checks += [_no_success_handed(sent), *_fetch_line_checks(case, sent)]
    return Verdict(case.id, case.title, RULES[case.id], tuple(checks), s.evidence(result.evidence()))


def _parallel(fn: Callable[[int], Sent], n: int) -> list[Sent]:
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(fn, range(n)))


def _overran(sents: Sequence[Sent]) -> Sent | None:
    return next((s for s in sents if s.overrun), None)


def rule_counters(lab: Lab) -> Verdict:
    """R05: concurrent operations through one transport each count only their own attempts."""
    s = _Scenario(lab, "R05")
    ok = {"status": 200, "body": {"available": True}}
    scripts: dict[str, list[dict[str, Any]]] = {
        "R05a": [{"status": 503}, ok], "R05b": [ok], "R05c": [{"status": 503}, {"status": 503}, ok],
    }
    urls = {name: s.fixture(name, script) for name, script in scripts.items()}
    policy = _scenario_policy(lab)
    retrier = s.retrier(policy)
    names = list(urls)
    sents = _parallel(lambda i: s.send(retrier, "GET", urls[names[i]], job_id=names[i]), len(names))
    seen = {name: len(s.arrivals(name)) for name in names}
    evidence: dict[str, Any] = {"requests_seen": seen}
    overran = _overran(sents)
    if overran:
        return Verdict("R05", "concurrent operations each report their own attempts", RULES["R05"],
                       (_overrun(overran, lab.time_limit),), evidence)
    attempts = {name: sent.outcome.attempts for name, sent in zip(names, sents, strict=True)
                if sent.outcome is not None}
    evidence.update({"attempts": attempts,
                     "outcomes": {n: x.outcome.reason.value for n, x in zip(names, sents, strict=True)
                                  if x.outcome is not None}})
    checks = [
        Check("attempts_per_operation", "each operation's attempts == its own requests", attempts,
              attempts == seen),
        Check("logical_operations", "3 operations, 3 outcomes", len(attempts), len(attempts) == 3),
    ]
    return Verdict("R05", "concurrent operations each report their own attempts", RULES["R05"],
                   tuple(checks), s.evidence(evidence))


def rule_breaker(lab: Lab) -> Verdict:
    """R06: the breaker opens after 2 failed *operations*, not after 2 failed attempts."""
    title = "the breaker opens after 2 failed operations, not 2 failed attempts"
    s = _Scenario(lab, "R06")
    url = s.fixture("R06", [{"status": 503}])
    config = CoordinationConfig(breaker=BreakerConfig(consecutive_failures=2, failure_ratio=None,
                                                      cool_down=60.0), retry_budget=None)
    coordinator = MemoryCoordinator(config, clock=s.clock)
    policy = _scenario_policy(lab)
    retrier = s.retrier(policy, coordinator)
    sents: list[Sent] = []
    seen: list[int] = []
    for n in range(3):
        sents.append(s.send(retrier, "GET", url, job_id=f"R06-{n + 1}"))
        seen.append(len(s.arrivals("R06")) - sum(seen))
        if sents[-1].overrun:
            return Verdict("R06", title, RULES["R06"], (_overrun(sents[-1], lab.time_limit),),
                           {"requests_seen_per_operation": seen})
    outcomes = [x.outcome.reason.value if x.outcome else None for x in sents]
    evidence = {"requests_seen_per_operation": seen, "outcomes": outcomes,
                "breaker_opened": coordinator.stats().breaker_opened}
    checks = [
        Check("second_operation_admitted", "operation 2 reaches the provider", seen[1], seen[1] > 0),
        Check("third_operation_refused", "operation 3: circuit_open, 0 requests",
              f"{outcomes[2]}, {seen[2]} requests", outcomes[2] == "circuit_open" and seen[2] == 0),
        Check("breaker_opened_once", 1, evidence["breaker_opened"], evidence["breaker_opened"] == 1),
    ]
    return Verdict("R06", title, RULES["R06"], tuple(checks), s.evidence(evidence))


def rule_coordination(lab: Lab) -> Verdict:
    """R07: workers sharing a coordinator keep to the provider's limit without a retry herd."""
    title = "4 workers share one gate: at most one throttled answer per worker, no herd"
    workers, per_worker = 4, 3
    limited = lab.limited
    assert limited is not None  # noqa: S101 - started by run_checklist for R07
    s = _Scenario(lab, "R07")
    coordinator = MemoryCoordinator(clock=s.clock)
    policy = _scenario_policy(lab, max_attempts=5, deadline=15.0, profile=get_profile("github"))
    run_header = {"X-Sandbox-Run": s.run_id}
    retrier = s.retrier(policy, coordinator)

    def worker(n: int) -> list[Sent]:
        paths = [f"/rentals/{n * per_worker + k + 1}/availability" for k in range(per_worker)]
        return [s.send(retrier, "GET", limited.url(path), headers=run_header) for path in paths]

    with ThreadPoolExecutor(max_workers=workers) as pool:
        sents = [x for batch in pool.map(worker, range(workers)) for x in batch]
    stats = limited.stats(s.run_id)
    throttled = sum(v for k, v in stats["by_status"].items() if k in ("403", "429"))
    outcomes = [x.outcome.reason.value if x.outcome else "overrun" for x in sents]
    evidence = {"operations": len(sents), "requests_seen": stats["count"], "throttled": throttled,
                "by_status": stats["by_status"], "busiest_window": stats["busiest_window"],
                "outcomes": {o: outcomes.count(o) for o in sorted(set(outcomes))}}
    overran = _overran(sents)
    if overran:
        return Verdict("R07", title, RULES["R07"], (_overrun(overran, lab.time_limit),), evidence)
    accounted = all(o == "ok" or (o == "rate_limited" and x.outcome is not None
                                  and x.outcome.retry_at is not None)
                    for o, x in zip(outcomes, sents, strict=True))
    checks = [
        Check("no_retry_herd", f"throttled answers <= workers ({workers})", throttled,
              throttled <= workers),
        Check("every_operation_accounted", "ok, or rate_limited with retry_at", evidence["outcomes"],
              accounted),
        Check("requests_bounded", f"requests <= operations + workers ({len(sents) + workers})",
              stats["count"], stats["count"] <= len(sents) + workers),
    ]
    return Verdict("R07", title, RULES["R07"], tuple(checks), s.evidence(evidence))


def rule_audit(lab: Lab) -> Verdict:
    """R08: an audit record names everything a reviewer needs and no secret."""
    title = "audit records carry ids, redacted URL, attempts and outcome, and no secret"
    s = _Scenario(lab, "R08")
    token, key, query_token = (secrets.token_hex(16) for _ in range(3))
    url = s.fixture("R08", [{"status": 503}, {"status": 200, "body": {"available": True}}])
    url = f"{url}?access_token={query_token}&page=2"
    headers = {"Authorization": f"Bearer {token}", "X-Api-Key": key, "Cookie": f"session={token}"}
    policy = _scenario_policy(lab)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "audit.jsonl"
        with JsonlAuditSink(path) as sink:
            hook = AuditHook(sink, policy=policy, clock=s.clock)
            sent = s.send(s.retrier(policy, hooks=(hook,), job_id="R08"), "GET", url,
                          headers=headers, job_id="R08")
        text = path.read_text("utf-8")
        records = load_audit(path).records
    if sent.overrun:
        return Verdict("R08", title, RULES["R08"], (_overrun(sent, lab.time_limit),), {})
    leaked = [name for name, value in (("bearer token", token), ("api key", key),
                                       ("query token", query_token)) if value in text]
    record = records[0] if records else {}
    needed = ("operation_id", "job_id", "method", "url", "history", "outcome", "reviewer_decision")
    missing = [n for n in needed if n not in record or (record[n] is None and n != "reviewer_decision")]
    evidence = {"records": len(records), "url": record.get("url"), "outcome": record.get("outcome"),
                "attempt_statuses": [a.get("status") for a in record.get("history", [])]}
    checks = [
        Check("no_secret", "no header value or token in the audit file", leaked or "none found",
              not leaked),
        Check("fields_present", list(needed), missing or "all present", not missing),
        Check("one_record_per_operation", 1, len(records), len(records) == 1),
    ]
    return Verdict("R08", title, RULES["R08"], tuple(checks), evidence)


def rule_bad_headers(lab: Lab) -> Verdict:
    """R09: negative, huge and garbled rate-limit headers neither crash nor unbound a wait."""
    title = "negative, huge and garbled rate-limit headers stay bounded"
    s = _Scenario(lab, "R09")
    ok = {"status": 200, "body": {"available": True}}
    scripts: dict[str, list[dict[str, Any]]] = {
        "R09a": [{"status": 429, "headers": {"Retry-After": "-5"}}, ok],
        "R09b": [{"status": 429, "headers": {"Retry-After": "99999999999999999999"}}, ok],
        "R09c": [{"status": 503, "headers": {"x-ratelimit-reset": "soon", "Retry-After": "1e999"}}, ok],
    }
    urls = {name: s.fixture(name, script) for name, script in scripts.items()}
    policy = _scenario_policy(lab, deadline=3.0)
    retrier = s.retrier(policy)
    names = list(urls)
    sents = _parallel(lambda i: s.send(retrier, "GET", urls[names[i]]), len(names))
    outcomes = {n: (x.outcome.reason.value, round(x.outcome.elapsed, 3)) if x.outcome else None
                for n, x in zip(names, sents, strict=True)}
    evidence = {"outcomes": outcomes, "requests_seen": {n: len(s.arrivals(n)) for n in names}}
    overran = _overran(sents)
    if overran:
        return Verdict("R09", title, RULES["R09"], (_overrun(overran, lab.time_limit),), evidence)
    deadline = policy.deadline
    bounded = all(x.outcome is not None and (deadline is None
                                             or x.outcome.elapsed <= deadline + _DEADLINE_SLACK_S)
                  for x in sents)
    checks = [
        Check("no_crash", "every operation ends with an outcome",
              sum(x.outcome is not None for x in sents), all(x.outcome is not None for x in sents)),
        Check("within_deadline", f"each ends within the deadline ({deadline})", outcomes, bounded),
    ]
    return Verdict("R09", title, RULES["R09"], tuple(checks), s.evidence(evidence))


_RULE_SCENARIOS: dict[str, Callable[[Lab], Verdict]] = {
    "R05": rule_counters, "R06": rule_breaker, "R07": rule_coordination, "R08": rule_audit,
    "R09": rule_bad_headers,
}


# Running and printing --------------------------------------------------------------------


def run_checklist(cases: Sequence[Case], user: UserPolicy | None, *, time_limit: float,
                  only: Sequence[str] = ()) -> list[Verdict]:
    """Run the cases and the rule scenarios in parallel against fresh sandboxes."""
    wanted = {i.upper() for i in only}
    pick: Callable[[str], bool] = (lambda i: i.upper() in wanted) if wanted else (lambda i: True)
    jobs: list[Callable[[Lab], Verdict]] = []
    jobs += [lambda lab, c=c: play_case(lab, c) for c in cases if pick(c.id)]  # type: ignore[misc]
    jobs += [lambda lab, c=c: play_rule_case(lab, c) for c in RULE_CASES if pick(c.id)]  # type: ignore[misc]
    jobs += [fn for rid, fn in _RULE_SCENARIOS.items() if pick(rid)]
    if not jobs:
        raise CliError(f"--only {', '.join(only)}: no such case or rule")
    limited_config = SandboxConfig(rate_limit=RateLimit(limit=4, window_s=1, style="github"))
    with serve_in_thread() as sandbox, serve_in_thread(limited_config) as limited:
        lab = Lab(sandbox, limited, user, time_limit)
        with ThreadPoolExecutor(max_workers=min(16, len(jobs))) as pool:
            return list(pool.map(lambda job: job(lab), jobs))


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
    verdicts = run_checklist(cases, user, time_limit=args.time_limit, only=args.only)
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
