"""What every scenario of the HTTP checklist shares: the lab, its clock, its verdicts.

A :class:`Lab` holds the sandboxes and the policy under check; a :class:`Scenario` gives one
case or rule its run id on the sandbox, a :class:`LimitedClock` (so a policy that would wait
an hour is judged in a moment) and requests through the httpx
:class:`~retrybudget.integrations.httpx.RetryTransport`; a :class:`Verdict` is what one case
or rule came to.
"""

from __future__ import annotations

import random
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from .._clock import SYSTEM_CLOCK
from .._drivers import Retrier
from ..coordination import Coordinator
from ..core.outcome import Outcome, Reason
from ..core.policy import Policy
from ..core.profiles import Profile
from ..integrations import JOB_ID, send_with_outcome
from ..integrations.httpx import ERRORS, RetryTransport
from ..sandbox import SandboxServer
from ._judge import Check
from ._offline import CaseBreaker

__all__ = [
    "DEADLINE_SLACK_S",
    "ChecklistError",
    "Guard",
    "Lab",
    "LimitedClock",
    "Overrun",
    "RULES",
    "PolicyUnderCheck",
    "Scenario",
    "Sent",
    "Verdict",
    "no_success_handed",
    "overran",
    "overrun_check",
    "parallel",
    "scenario_policy",
]

DEADLINE_SLACK_S = 0.5
"""Seconds past a policy's deadline an operation may end (the check's own overhead)."""

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


class ChecklistError(ValueError):
    """The checklist cannot run as asked (no such case, a script the sandbox refuses)."""


class PolicyUnderCheck(Protocol):
    """A user's policy, and how it changes each case's provider profile."""

    @property
    def policy(self) -> Policy:
        """The policy checked."""
        ...

    def for_profile(self, profile: Profile) -> Profile:
        """``profile`` with the user's profile changes applied."""
        ...


class Overrun(Exception):
    """The policy would keep sending attempts past the check's time limit."""


class LimitedClock:
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


class Guard(httpx.BaseTransport):
    """Sends attempts until the time limit; past it, refuses (raises :class:`Overrun`)."""

    def __init__(self, clock: LimitedClock) -> None:
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
    """What every scenario shares: the sandboxes, the policy under check and the time limit.

    ``record_line`` is how the command records an operation's outcome (by id), when a
    scenario checks what it records.
    """

    sandbox: SandboxServer
    limited: SandboxServer | None
    user: PolicyUnderCheck | None
    time_limit: float
    record_line: Callable[[str, Outcome[Any]], Mapping[str, Any]] | None = None
    prefix: str = field(default_factory=lambda: f"check{secrets.token_hex(3)}")


class Scenario:
    """One case's or rule's tools: a run id, a limited clock, fixtures and requests."""

    def __init__(self, lab: Lab, scenario_id: str) -> None:
        self.lab = lab
        self.run_id = f"{lab.prefix}-{scenario_id}"
        self.clock = LimitedClock(lab.time_limit)

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
            raise ChecklistError(f"case {name}: the sandbox refused its script ({exc})") from None

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
        transport = RetryTransport(Guard(self.clock), retrier=retrier)
        extensions = {JOB_ID: job_id} if job_id else {}
        with httpx.Client(transport=transport, timeout=_CLIENT_TIMEOUT_S) as client:
            outcome, response = send_with_outcome(client.request, method, url, headers=headers,
                                                  extensions=extensions)
        if response is not None:
            return Sent(outcome, status=response.status_code)
        if isinstance(outcome.error, Overrun):
            return Sent(None, overrun=str(outcome.error))
        # What the caller caught: the transport's typed error, or an error raised again as it was.
        foreign = outcome.reason is Reason.UNEXPECTED and outcome.error is not None
        raised = type(outcome.error) if foreign else ERRORS[outcome.reason]
        return Sent(outcome, raised=raised.__name__)


def overrun_check(sent: Sent, limit: float) -> Check:
    """The failed check of an operation still sending attempts past the time limit."""
    return Check("bounded", f"ends within the check's {limit:g} s", sent.overrun, False)


def no_success_handed(sent: Sent) -> Check:
    """Rule 7 at the HTTP boundary: a failed operation never hands the caller a 2xx."""
    failed = sent.outcome is None or sent.outcome.reason is not Reason.OK
    handed = sent.status if sent.status is not None else f"error {sent.raised}"
    fabricated = failed and sent.status is not None and 200 <= sent.status < 300
    return Check("caller_no_2xx_on_failure", "no 2xx for a failed operation",
                 handed, not fabricated)


def scenario_policy(lab: Lab, **own: Any) -> Policy:
    """The user's policy, or the scenario's own (3 attempts in 5 s unless ``own`` says else)."""
    if lab.user is not None:
        return lab.user.policy
    return Policy(**{"name": "checklist", "max_attempts": 3, "deadline": 5.0, **own})


def parallel(fn: Callable[[int], Sent], n: int) -> list[Sent]:
    """``fn(0)`` .. ``fn(n - 1)``, each on its own thread."""
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(fn, range(n)))


def overran(sents: Sequence[Sent]) -> Sent | None:
    """The first request that overran the time limit, if any."""
    return next((s for s in sents if s.overrun), None)
