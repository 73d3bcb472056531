"""Observability: hooks, per-operation stats, audit records, metrics and the review report."""

from ._hooks import AttemptEvent, Hook, WaitEvent
from ._redact import REDACTED, is_secret_header, redact_headers, redact_url

__all__ = ["REDACTED", "AttemptEvent", "Hook", "WaitEvent", "is_secret_header", "redact_headers",
           "redact_url"]
