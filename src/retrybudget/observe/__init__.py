"""Observability: hooks, per-operation stats, audit records, metrics and the review report."""

from ._hooks import AttemptEvent, Hook, WaitEvent

__all__ = ["AttemptEvent", "Hook", "WaitEvent"]
