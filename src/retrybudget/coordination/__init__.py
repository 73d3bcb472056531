"""Coordination of every worker that shares a provider: breaker, gate, pacing, retry budget."""

from ._base import Coordinator, NoCoordination

__all__ = ["Coordinator", "NoCoordination"]
