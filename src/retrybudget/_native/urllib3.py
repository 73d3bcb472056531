"""urllib3: failure kinds and errors."""

from __future__ import annotations

from ..core.classify import FailureKind, Observation
from ._shared import _failure

__all__ = ["read", "urllib3_failure_kind"]


def urllib3_failure_kind(error: BaseException) -> FailureKind:
    """urllib3's exceptions as failure kinds (``error`` for the ones that are no failure)."""
    from urllib3 import exceptions as u3  # noqa: PLC0415 - only once urllib3 is in use

    if isinstance(error, u3.MaxRetryError) and isinstance(error.reason, BaseException):
        return urllib3_failure_kind(error.reason)
    if isinstance(error, (u3.NewConnectionError, u3.ConnectTimeoutError, u3.EmptyPoolError,
                          u3.ClosedPoolError, u3.SSLError)):
        return FailureKind.CONNECT  # the request never left
    if isinstance(error, u3.TimeoutError):
        return FailureKind.TIMEOUT
    if isinstance(error, (u3.ProtocolError, u3.IncompleteRead, u3.InvalidChunkLength)):
        return FailureKind.NETWORK
    if isinstance(error, u3.DecodeError):
        return FailureKind.PROTOCOL
    return FailureKind.ERROR


def read(error: BaseException) -> Observation | None:
    """A urllib3 exception as the failure of its kind."""
    return _failure(urllib3_failure_kind(error), error, None)
