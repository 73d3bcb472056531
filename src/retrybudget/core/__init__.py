"""The pure core: headers, profiles, classification, policy, outcomes, decisions and the flow.

No I/O, no sleeping, no global state: everything here is a function of its arguments (the
flow reads the time from the clock it is handed, and leaves every action to a driver). It
imports the standard library and the clock protocol only (``tests/project/test_layering.py``).
"""

from ._values import evolve, fast_init
from .classify import Classified, FailureKind, FailureSeen, Kind, Observation, ResponseSeen, classify
from .decide import Decision, Retry, Stop, decide, plan_attempt, plan_wait
from .headers import Conflict, HeaderNote, Hint, RateLimitInfo, parse_rate_limit_headers
from .outcome import AttemptRecord, Outcome, Reason, Wait, WaitReason
from .policy import Backoff, Jitter, Policy, PolicyError, RateLimitMode, background, interactive
from .profiles import GENERIC, GITHUB, PROFILES, Profile, get_profile
from .state import OperationState

__all__ = [
    "GENERIC",
    "GITHUB",
    "PROFILES",
    "AttemptRecord",
    "Backoff",
    "Classified",
    "Conflict",
    "Decision",
    "FailureKind",
    "FailureSeen",
    "HeaderNote",
    "Hint",
    "Jitter",
    "Kind",
    "Observation",
    "OperationState",
    "Outcome",
    "Policy",
    "PolicyError",
    "Profile",
    "RateLimitInfo",
    "RateLimitMode",
    "Reason",
    "ResponseSeen",
    "Retry",
    "Stop",
    "Wait",
    "WaitReason",
    "background",
    "classify",
    "decide",
    "evolve",
    "fast_init",
    "get_profile",
    "interactive",
    "parse_rate_limit_headers",
    "plan_attempt",
    "plan_wait",
]
