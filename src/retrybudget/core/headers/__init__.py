"""Rate-limit and retry headers, parsed by total functions.

Nothing here raises on provider input: a malformed, negative, huge or conflicting
value is ignored with a reason (a :class:`HeaderNote`) or clamped, and every
usable value records the header it came from. All delays are seconds counted
from the moment the response was received (``now_wall``), never negative and
never above :data:`MAX_HINT_SECONDS`.

The package's modules, bottom up: ``_model`` (the values, the bounds, the evidence headers
gathered from the built-in profiles), ``_parsers`` (one header value at a time),
``_structured`` (IETF structured fields), ``_reader`` (one response's headers being read),
``_families`` (the vendor and IETF quota families, the vendors' gathered from the built-in
profiles), ``_fast`` (the fast reader of a common header set) and ``_read``
(:func:`parse_rate_limit_headers` and the general reader). A profile's header dialect,
:class:`HeaderRules`, is ``core._dialect``'s, below this package and the profiles.
"""

from __future__ import annotations

from .._dialect import DEFAULT_HEADER_RULES, HeaderRules
from .._dialect import DELAY_UNITS as DELAY_UNITS
from ._model import CLAMP_EVIDENCE as CLAMP_EVIDENCE
from ._model import DATE_RESOLUTION as DATE_RESOLUTION
from ._model import (
    EPOCH_THRESHOLD,
    EVIDENCE_HEADERS,
    EVIDENCE_PREFIXES,
    MAX_CLOCK_SKEW,
    MAX_HINT_SECONDS,
    MAX_VALUE_CHARS,
    NO_RATE_LIMIT_INFO,
    Conflict,
    HeaderNote,
    Hint,
    RateLimitInfo,
)
from ._model import SKEW_EVIDENCE as SKEW_EVIDENCE
from ._model import HeaderInput as HeaderInput
from ._parsers import normalize_headers, parse_duration, parse_reset, parse_retry_after, parse_rfc3339
from ._read import parse_rate_limit_headers

__all__ = [
    "EPOCH_THRESHOLD",
    "EVIDENCE_HEADERS",
    "EVIDENCE_PREFIXES",
    "DEFAULT_HEADER_RULES",
    "MAX_CLOCK_SKEW",
    "MAX_HINT_SECONDS",
    "MAX_VALUE_CHARS",
    "NO_RATE_LIMIT_INFO",
    "Conflict",
    "HeaderNote",
    "HeaderRules",
    "Hint",
    "RateLimitInfo",
    "normalize_headers",
    "parse_duration",
    "parse_rate_limit_headers",
    "parse_reset",
    "parse_retry_after",
    "parse_rfc3339",
]
