"""retrybudget: bounded, provider-aware retries for third-party HTTP APIs.

One logical operation gets one budget (attempts and an end-to-end deadline); every
wait is paid out of it; rate limits are honoured within it; writes are never
replayed; a failed operation is never reported as a success.

Start here::

    import retrybudget as rb

    outcome = rb.Retrier(policy=rb.interactive()).call(fetch_availability, rental_id)
    if outcome.ok:
        use(outcome.value)
    else:
        print(outcome.reason, outcome.retry_at)
"""

from ._clock import SYSTEM_CLOCK, Clock, FakeClock, SystemClock
from ._drivers import (
    BoundRetrier,
    CallInterpreter,
    Interpreter,
    Retrier,
    acall,
    attempt_timeout,
    call,
    last_failed_outcome,
    retrying,
)
from ._native import outcome_of
from ._profile_file import load_profile
from .coordination import (
    BreakerConfig,
    CoordinationConfig,
    Coordinator,
    MemoryCoordinator,
    NoCoordination,
    RetryBudgetConfig,
)
from .core.actions import Attempt, AttemptResult, RequestInfo
from .core.classify import Classified, FailureKind, FailureSeen, Kind, Observation, ResponseSeen
from .core.headers import HeaderRules, RateLimitInfo, parse_rate_limit_headers
from .core.outcome import AttemptRecord, Outcome, Reason, Wait, WaitReason
from .core.policy import Backoff, Jitter, Policy, RateLimitMode, background, interactive
from .core.profiles import PROFILES, PROVIDERS, BodySignal, Profile, QuotaFamily, auto, get_profile
from .core.tokens import (
    QuotaReading,
    TokenEstimate,
    TokenUsage,
    UsageReader,
    estimate_tokens,
    quota_readings,
    token_charges,
    token_corrections,
    tokens_spent_between,
    usage_from_body,
)
from .errors import (
    CircuitOpen,
    DeadlineExceeded,
    InvalidPayload,
    NotFound,
    NotRetried,
    PolicyError,
    RateLimited,
    Rejected,
    RetriesExhausted,
    RetryBudgetError,
    RetryBudgetRefused,
    UnexpectedResponse,
)
from .observe import (
    AttemptEvent,
    AuditHook,
    Hook,
    JsonlAuditSink,
    StatsAggregator,
    WaitEvent,
    redact_url,
    review_report,
)
from .queue import JobQueue, QueueConfig, SqliteQueue

__version__ = "0.1.0"

__all__ = [
    "PROFILES",
    "PROVIDERS",
    "SYSTEM_CLOCK",
    "Attempt",
    "AttemptEvent",
    "AttemptRecord",
    "AttemptResult",
    "AuditHook",
    "Backoff",
    "BodySignal",
    "BoundRetrier",
    "BreakerConfig",
    "CallInterpreter",
    "CircuitOpen",
    "Classified",
    "Clock",
    "CoordinationConfig",
    "Coordinator",
    "DeadlineExceeded",
    "FailureKind",
    "FailureSeen",
    "FakeClock",
    "HeaderRules",
    "Hook",
    "Interpreter",
    "InvalidPayload",
    "Jitter",
    "JobQueue",
    "JsonlAuditSink",
    "Kind",
    "MemoryCoordinator",
    "NoCoordination",
    "NotFound",
    "NotRetried",
    "Observation",
    "Outcome",
    "Policy",
    "PolicyError",
    "Profile",
    "QueueConfig",
    "QuotaFamily",
    "QuotaReading",
    "RateLimitInfo",
    "RateLimitMode",
    "RateLimited",
    "Reason",
    "Rejected",
    "RequestInfo",
    "ResponseSeen",
    "Retrier",
    "RetriesExhausted",
    "RetryBudgetConfig",
    "RetryBudgetError",
    "RetryBudgetRefused",
    "SqliteQueue",
    "StatsAggregator",
    "SystemClock",
    "TokenEstimate",
    "TokenUsage",
    "UnexpectedResponse",
    "UsageReader",
    "Wait",
    "WaitEvent",
    "WaitReason",
    "acall",
    "attempt_timeout",
    "auto",
    "background",
    "call",
    "estimate_tokens",
    "get_profile",
    "interactive",
    "last_failed_outcome",
    "load_profile",
    "outcome_of",
    "parse_rate_limit_headers",
    "quota_readings",
    "redact_url",
    "retrying",
    "review_report",
    "token_charges",
    "token_corrections",
    "tokens_spent_between",
    "usage_from_body",
]
