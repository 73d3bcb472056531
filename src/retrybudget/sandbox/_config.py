"""The sandbox provider's configuration: frozen values, checked once when built."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, get_args

__all__ = ["Faults", "LlmLimits", "RateLimit", "RateLimitStyle", "SandboxConfig"]

RateLimitStyle = Literal[
    "github", "ietf", "retry-after", "bare", "none",
    "generic", "stripe", "openai", "anthropic", "slack", "discord", "shopify", "x", "aws",
    "google", "azure", "gitlab", "twilio", "cloudflare",
]
"""How the primary rate limit is signalled.

- ``"github"``: ``x-ratelimit-limit/remaining/used/reset/resource`` on every response;
  over the limit a 429 with ``Retry-After`` (or, with ``github_403``, a 403 with
  ``x-ratelimit-remaining: 0`` and no ``Retry-After``).
- ``"ietf"``: ``RateLimit`` and ``RateLimit-Policy`` (draft-ietf-httpapi-ratelimit-headers)
  on every response; over the limit a 429 with ``Retry-After``.
- ``"retry-after"``: no quota headers; over the limit a plain 429 with ``Retry-After``.
- ``"bare"``: no quota headers; over the limit a 429 with no hint at all.
- ``"none"``: no primary rate limit (the same as ``SandboxConfig.rate_limit=None``).
- a provider profile's name (``"stripe"``, ``"openai"``, ``"anthropic"``, ``"slack"``,
  ``"discord"``, ``"shopify"``, ``"x"``, ``"aws"``, ``"google"``, ``"azure"``, ``"gitlab"``,
  ``"twilio"``, ``"cloudflare"``, ``"generic"``): that provider's dialect, as its
  documentation shows it (quota headers on every response, its status, delay header and
  body over the limit).
"""

_STYLES: frozenset[str] = frozenset(get_args(RateLimitStyle))


def _is_count(value: object, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _check_rate(name: str, value: float) -> None:
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"{name} must be a share between 0 and 1, got {value!r}")


def _check_seconds(name: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"{name} must be a finite, non-negative number of seconds, got {value!r}")


@dataclass(frozen=True, slots=True)
class RateLimit:
    """A fixed-window primary rate limit, shared by every client of one run.

    Windows are aligned to multiples of ``window_s`` on the wall clock, so the end of
    the current window is a whole epoch second (the value of ``x-ratelimit-reset``).
    Only admitted requests consume quota; a rejected request does not.

    Args:
        limit: requests admitted per window (0 rejects every request).
        window_s: the window length in whole seconds (at least 1).
        style: how the limit is signalled, see :data:`RateLimitStyle`.
        github_403: with the ``"github"`` style, answer an exceeded limit with 403,
            ``x-ratelimit-remaining: 0`` and no ``Retry-After`` instead of 429.
        resource: the value of ``x-ratelimit-resource`` (``"github"`` style).
    """

    limit: int = 60
    window_s: int = 60
    style: RateLimitStyle = "github"
    github_403: bool = False
    resource: str = "core"

    def __post_init__(self) -> None:
        if not _is_count(self.limit, 0):
            raise ValueError(f"limit must be a non-negative integer, got {self.limit!r}")
        if not _is_count(self.window_s, 1):
            raise ValueError(f"window_s must be a whole number of seconds >= 1, got {self.window_s!r}")
        if self.style not in _STYLES:
            raise ValueError(f"style must be one of {sorted(_STYLES)}, got {self.style!r}")

    @property
    def enforced(self) -> bool:
        """Whether this limit is applied at all (every style but ``"none"``)."""
        return self.style != "none"


@dataclass(frozen=True, slots=True)
class Faults:
    """Injected faults for the record routes, drawn from a seeded random generator.

    Each run id gets its own generator, seeded from ``seed`` and the run id, and every
    request draws the same number of values from it: the same seed and the same
    sequence of requests in a run give the same faults. Faulted responses never have
    side effects (a faulted reservation is not made).

    Args:
        seed: the seed shared by every run's generator.
        error_rate: share of requests answered with a 5xx from ``error_statuses``.
        error_statuses: the 5xx statuses to pick from (uniformly).
        latency_s: latency added to every request on the record routes.
        latency_jitter_s: extra latency, uniform in ``[0, latency_jitter_s)``.
        reset_rate: share of requests whose connection is reset without an answer.
        malformed_rate: share of requests answered 200 with ``<html>maintenance</html>``.
        slow_body_rate: share of requests whose answer (its head at once) sends its body one
            byte at a time, spread over ``slow_body_s``: every read is quick, the whole is not.
        slow_body_s: how long a slow body takes to arrive.
        outages: ``(start_s, end_s)`` windows, in seconds since the app was created,
            during which every record request is answered 503 at once.
    """

    seed: int = 0
    error_rate: float = 0.0
    error_statuses: tuple[int, ...] = (503,)
    latency_s: float = 0.0
    latency_jitter_s: float = 0.0
    reset_rate: float = 0.0
    malformed_rate: float = 0.0
    slow_body_rate: float = 0.0
    slow_body_s: float = 3.0
    outages: tuple[tuple[float, float], ...] = ()

    def __post_init__(self) -> None:
        _check_rate("error_rate", self.error_rate)
        _check_rate("reset_rate", self.reset_rate)
        _check_rate("malformed_rate", self.malformed_rate)
        _check_rate("slow_body_rate", self.slow_body_rate)
        if (self.error_rate + self.reset_rate + self.malformed_rate + self.slow_body_rate
                > 1.0 + 1e-9):
            raise ValueError("error_rate + reset_rate + malformed_rate + slow_body_rate "
                             "must not exceed 1")
        _check_seconds("slow_body_s", self.slow_body_s)
        if not self.error_statuses or any(not 500 <= s <= 599 for s in self.error_statuses):
            raise ValueError(f"error_statuses must be 5xx statuses, got {self.error_statuses!r}")
        _check_seconds("latency_s", self.latency_s)
        _check_seconds("latency_jitter_s", self.latency_jitter_s)
        for start, end in self.outages:
            _check_seconds("outage start", start)
            _check_seconds("outage end", end)
            if end <= start:
                raise ValueError(f"an outage must end after it starts, got {(start, end)!r}")

    @property
    def any(self) -> bool:
        """Whether any random fault or latency is configured (outages aside)."""
        return bool(
            self.error_rate
            or self.reset_rate
            or self.malformed_rate
            or self.slow_body_rate
            or self.latency_s
            or self.latency_jitter_s
        )


@dataclass(frozen=True, slots=True)
class LlmLimits:
    """The quotas of the LLM routes (``POST /v1/chat/completions``, ``POST /v1/messages``).

    Each quota is a fixed window of ``window_s`` seconds aligned to the wall clock, shared by
    both routes of a run; ``None`` leaves that dimension unlimited and unannounced. A request
    is charged its prompt tokens plus its ``max_tokens`` when admitted, and the output it did
    not produce is credited back when it is answered (as Anthropic does for output tokens).

    Args:
        rpm: requests per window.
        tpm: tokens (input and output) per window.
        input_tpm: input tokens per window (announced in Anthropic's dialect).
        output_tpm: output tokens per window (announced in Anthropic's dialect).
        window_s: the window length in whole seconds: 60 for a provider's per-minute quotas,
            shorter for a quick benchmark.
        output_share: the share of ``max_tokens`` an answer produces (at least one token when
            ``max_tokens`` is at least one).
        default_max_tokens: the output reserved for an OpenAI request naming no ``max_tokens``.
    """

    rpm: int | None = None
    tpm: int | None = None
    input_tpm: int | None = None
    output_tpm: int | None = None
    window_s: int = 60
    output_share: float = 1.0
    default_max_tokens: int = 1024

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm", "input_tpm", "output_tpm"):
            value = getattr(self, name)
            if value is not None and not _is_count(value, 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not _is_count(self.window_s, 1):
            raise ValueError(f"window_s must be a whole number of seconds >= 1, got {self.window_s!r}")
        _check_rate("output_share", self.output_share)
        if not _is_count(self.default_max_tokens, 1):
            raise ValueError(
                f"default_max_tokens must be a positive integer, got {self.default_max_tokens!r}")


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    """Everything the sandbox provider does besides scripted fixtures.

    Args:
        rentals: how many synthetic rental records exist (ids ``1..rentals``).
        rate_limit: the primary rate limit, or ``None`` for none.
        max_concurrent: the secondary limit on in-flight requests per run, or ``None``.
        secondary_status: the status for an exceeded secondary limit: 403 (GitHub
            style, body message "You have exceeded a secondary rate limit") or 429.
        secondary_retry_after_s: the ``Retry-After`` sent with a secondary-limit answer.
        faults: injected faults and latency, see :class:`Faults`.
        llm: the quotas of the LLM routes, see :class:`LlmLimits` (default: unlimited).
    """

    rentals: int = 100
    rate_limit: RateLimit | None = None
    max_concurrent: int | None = None
    secondary_status: Literal[403, 429] = 403
    secondary_retry_after_s: int = 1
    faults: Faults = field(default_factory=Faults)
    llm: LlmLimits = field(default_factory=LlmLimits)

    def __post_init__(self) -> None:
        if not _is_count(self.rentals, 0):
            raise ValueError(f"rentals must be a non-negative integer, got {self.rentals!r}")
        if self.max_concurrent is not None and self.max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, got {self.max_concurrent!r}")
        if self.secondary_status not in (403, 429):
            raise ValueError(f"secondary_status must be 403 or 429, got {self.secondary_status!r}")
        if self.secondary_retry_after_s < 0:
            raise ValueError("secondary_retry_after_s must not be negative")

    @property
    def active_rate_limit(self) -> RateLimit | None:
        """The primary limit in force: ``rate_limit`` unless absent or of style ``"none"``."""
        if self.rate_limit is None or not self.rate_limit.enforced:
            return None
        return self.rate_limit
