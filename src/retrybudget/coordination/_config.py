"""Coordination settings: frozen values, validated once, durations in float seconds.

Every duration accepts ``float`` seconds or a :class:`datetime.timedelta`. A section set to
``None`` in :class:`CoordinationConfig` switches that mechanism off; the rate-limit gate is
always on (contract rule 10, docs/contract.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.policy import Duration, PolicyError, seconds
from ..core.tokens import TokenEstimate

__all__ = [
    "MAX_DURATION",
    "BreakerConfig",
    "ConcurrencyConfig",
    "CoordinationConfig",
    "GateConfig",
    "PacingConfig",
    "RetryBudgetConfig",
    "TokenConfig",
]

MAX_DURATION = 86_400.0
"""The longest duration any coordination setting accepts (and any stored instant may lie ahead)."""

MIN_SPREAD = 0.0001
"""The smallest herd spread: slots closer than this could not be told apart."""


def _duration(value: Duration, name: str, *, positive: bool = False) -> float:
    out = seconds(value, name)
    assert out is not None  # noqa: S101 - seconds() returns a float unless allow_none
    if out > MAX_DURATION or (positive and out <= 0):
        low = "above 0" if positive else "at least 0"
        raise PolicyError(f"{name} must be {low} and at most {MAX_DURATION:g} seconds, got {out}")
    return out


def _count(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise PolicyError(f"{name} must be an integer from {low} to {high}, got {value!r}")
    return value


def _ratio(value: object, name: str, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PolicyError(f"{name} must be a number, got {type(value).__name__}")
    out = float(value)
    if math.isnan(out) or not 0.0 <= out <= high:
        raise PolicyError(f"{name} must be between 0 and {high:g}, got {value!r}")
    return out


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)


@dataclass(frozen=True, slots=True)
class GateConfig:
    """The shared rate-limit gate and the paced release of the workers held at it.

    When any worker learns that the provider throttles (a rate limit, or ``remaining`` 0 with
    a reset), every worker under that key waits for the same instant, the one the response's
    :class:`~retrybudget.core.throttle.Throttle` names (read by the flow with the operation's
    profile): Retry-After first, else the reset plus the profile's slack, else the profile's
    floor, doubled for each repeat.
    Workers held at the gate get distinct wake-up slots ``spread`` apart, so the herd does not
    spend the new window at once.

    Attributes:
        spread: seconds between the wake-up slots of workers held at a gate (0: no herd
            control, everyone wakes at the gate instant; else at least 0.0001).
        max_gate: the longest gate one rate limit may set.
        herd_window: how far past what the provider asked a ``fail_fast`` operation is
            placed in a release (seconds): never more than this after the instant the key
            holds until (the gate's opening, or the reset a paced slot would run past), nor,
            during a release, after now; beyond, it shares the window's slots in turn. So
            its wait, or the ``retry_at`` it stops with, is never longer than the provider
            asked plus this. Waiting operations queue ``spread`` apart however many they
            are (each comes back for its slot, a job queue's deferred ones too).
        claim_grace: how late a worker may come back for its slot before the slot lapses (a
            lapsed slot was abandoned: its holder stopped or died).
    """

    spread: float = 0.05
    max_gate: float = 3600.0
    claim_grace: float = 0.5
    herd_window: float = 1.0

    def __post_init__(self) -> None:
        _set(self, "spread", _duration(self.spread, "gate.spread"))
        if 0 < self.spread < MIN_SPREAD:
            raise PolicyError(f"gate.spread must be 0 (no herd control) or at least "
                              f"{MIN_SPREAD:g} seconds, got {self.spread}")
        _set(self, "max_gate", _duration(self.max_gate, "gate.max_gate", positive=True))
        _set(self, "claim_grace", _duration(self.claim_grace, "gate.claim_grace", positive=True))
        _set(self, "herd_window", _duration(self.herd_window, "gate.herd_window"))


@dataclass(frozen=True, slots=True)
class PacingConfig:
    """Spread what is left of a quota over the time until it resets.

    Every response's ``remaining``/``limit``/reset (GitHub ``x-ratelimit-*``, IETF
    ``RateLimit``), 2xx included, is remembered per key. While ``remaining`` is low, requests
    under that key are spaced ``time_to_reset / max(remaining, 1)`` apart, so workers slow
    down before the provider answers 429.

    Attributes:
        threshold: pace while ``remaining / limit`` is at or below this share.
        min_remaining: when the limit is unknown, pace while ``remaining`` is at or below this.
        probes: requests in flight a key that no answer has come back for yet lets go (its
            first window): the rest wait until an answer names the quota, and are then
            released by it. 0 sends the first window blind.
        probe_unknown_limit: off by default. On, when a key's first answer names no quota,
            callers that wait are still held to ``probes`` requests in flight for one second
            more (until the key's first throttle), so the limit is found one request at a
            time: the first 429 refuses the request that found it, not every request the
            fleet had in flight. Turn it on for a provider that publishes no quota and
            answers only 429 with ``Retry-After``, when a fleet's first blind burst of
            refusals matters more than the fraction of a second finding the limit costs;
            off, a provider that never throttles is never slowed.
    """

    threshold: float = 0.1
    min_remaining: int = 10
    probes: int = 1
    probe_unknown_limit: bool = False

    def __post_init__(self) -> None:
        _set(self, "threshold", _ratio(self.threshold, "pacing.threshold", 1.0))
        _set(self, "min_remaining", _count(self.min_remaining, "pacing.min_remaining", 0, 10**9))
        _set(self, "probes", _count(self.probes, "pacing.probes", 0, 10**9))
        if not isinstance(self.probe_unknown_limit, bool):
            raise PolicyError(f"pacing.probe_unknown_limit must be True or False, "
                              f"got {self.probe_unknown_limit!r}")


@dataclass(frozen=True, slots=True)
class ConcurrencyConfig:
    """A cap on requests in flight per key.

    Each attempt that goes holds a lease until its result is learned; a lease expires after
    ``lease_ttl`` so a worker that died cannot hold a place for ever. Set ``lease_ttl`` above
    the longest attempt timeout.

    Attributes:
        limit: requests in flight per key at most.
        lease_ttl: seconds after which an unreturned lease lapses.
        poll: seconds a worker waits before asking again when the cap is reached.
    """

    limit: int = 10
    lease_ttl: float = 60.0
    poll: float = 0.05

    def __post_init__(self) -> None:
        _set(self, "limit", _count(self.limit, "concurrency.limit", 1, 100_000))
        _set(self, "lease_ttl", _duration(self.lease_ttl, "concurrency.lease_ttl", positive=True))
        _set(self, "poll", _duration(self.poll, "concurrency.poll", positive=True))


@dataclass(frozen=True, slots=True)
class RetryBudgetConfig:
    """A shared retry budget earned by successes, in the manner of Finagle's ``RetryBudget``
    with the refill of gRPC retry throttling and the AWS SDK retry quota.

    Over the last ``ttl`` seconds, retries after failures may number at most
    ``min_retries_per_sec * ttl + ratio * healthy_operations``: each retry spends one token,
    and every operation that ends with the provider answering (``ok``, ``not_found``, ...)
    deposits ``ratio`` of one. A provider that is mostly healthy keeps earning retries for
    its sporadic failures; in an outage nothing is earned, so only the small floor is spent
    (and the breaker opens).

    Attributes:
        ratio: retries earned per healthy operation (0.5: one retry for two successes).
        min_retries_per_sec: a floor, so a quiet or fresh key can still retry a little.
        ttl: the window deposits and withdrawals count in.
    """

    ratio: float = 0.5
    min_retries_per_sec: float = 0.3
    ttl: float = 10.0

    def __post_init__(self) -> None:
        _set(self, "ratio", _ratio(self.ratio, "retry_budget.ratio", 1000.0))
        _set(self, "min_retries_per_sec",
             _ratio(self.min_retries_per_sec, "retry_budget.min_retries_per_sec", 1e6))
        _set(self, "ttl", _duration(self.ttl, "retry_budget.ttl", positive=True))


@dataclass(frozen=True, slots=True)
class BreakerConfig:
    """A circuit breaker per key, counting logical operations (contract rule 9).

    It opens after ``consecutive_failures`` failed operations in a row, or when at least
    ``min_operations`` of the last ``window`` counted operations were seen and the failed
    share reached ``failure_ratio``. Open, it refuses operations for ``cool_down`` seconds,
    then admits exactly one probe; the probe's outcome closes it or opens it again. A probe
    whose holder never reports back lapses after ``probe_ttl``, and another probe is admitted.

    Attributes:
        consecutive_failures: failed operations in a row that open the breaker.
        failure_ratio: the failed share over the window that opens it (None: off).
        window: how many recent counted operations the ratio looks at.
        min_operations: operations the window must hold before the ratio counts.
        cool_down: seconds the breaker stays open before a probe.
        probe_ttl: seconds a probe may take before another is admitted.
    """

    consecutive_failures: int = 5
    failure_ratio: float | None = 0.5
    window: int = 20
    min_operations: int = 10
    cool_down: float = 30.0
    probe_ttl: float = 30.0

    def __post_init__(self) -> None:
        _set(self, "consecutive_failures",
             _count(self.consecutive_failures, "breaker.consecutive_failures", 1, 10_000))
        if self.failure_ratio is not None:
            _set(self, "failure_ratio", _ratio(self.failure_ratio, "breaker.failure_ratio", 1.0))
        _set(self, "window", _count(self.window, "breaker.window", 1, 1000))
        _set(self, "min_operations", _count(self.min_operations, "breaker.min_operations", 1, 1000))
        _set(self, "cool_down", _duration(self.cool_down, "breaker.cool_down", positive=True))
        _set(self, "probe_ttl", _duration(self.probe_ttl, "breaker.probe_ttl", positive=True))


CostFunction = Callable[[str, str, bytes], "TokenEstimate | int | None"]
"""A request's cost from its method, URL and body: an estimate, a number of tokens, or None
(the request costs no tokens: it is paced on requests only)."""


@dataclass(frozen=True, slots=True)
class TokenConfig:
    """Token pacing: every token quota a provider publishes (OpenAI's tokens, Anthropic's
    tokens, input and output tokens) paced with each request's cost.

    Attributes:
        cost: what a request sent through an integration costs, from its method, URL and
            body (None: :func:`~retrybudget.coordination.llm_request_cost`, the stdlib
            estimate of an LLM request body). A cost declared with
            :func:`~retrybudget.coordination.token_cost` takes precedence.
    """

    cost: CostFunction | None = None


@dataclass(frozen=True, slots=True)
class CoordinationConfig:
    """Everything a coordinator does, per provider key. ``None`` switches a section off.

    Attributes:
        gate: the shared rate-limit gate and herd release (always on).
        pacing: spacing requests while the quota runs low (default on).
        concurrency: a cap on requests in flight (default off).
        retry_budget: the shared retry budget (default on).
        breaker: the circuit breaker (default on).
        tokens: token pacing of the requests that cost tokens (default on).
        idle_ttl: how long a key's shared state outlives its last use (Redis key TTLs).
    """

    gate: GateConfig = field(default_factory=GateConfig)
    pacing: PacingConfig | None = field(default_factory=PacingConfig)
    concurrency: ConcurrencyConfig | None = None
    retry_budget: RetryBudgetConfig | None = field(default_factory=RetryBudgetConfig)
    breaker: BreakerConfig | None = field(default_factory=BreakerConfig)
    tokens: TokenConfig | None = field(default_factory=TokenConfig)
    idle_ttl: float = 600.0

    def __post_init__(self) -> None:
        for name, kind in (("gate", GateConfig), ("pacing", PacingConfig),
                           ("concurrency", ConcurrencyConfig),
                           ("retry_budget", RetryBudgetConfig), ("breaker", BreakerConfig),
                           ("tokens", TokenConfig)):
            value = getattr(self, name)
            if not (isinstance(value, kind) or (value is None and name != "gate")):
                raise PolicyError(f"{name} must be a {kind.__name__}")
        _set(self, "idle_ttl", _duration(self.idle_ttl, "idle_ttl", positive=True))

    def replace(self, **changes: Any) -> CoordinationConfig:
        """A copy with ``changes`` applied and validated (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)
