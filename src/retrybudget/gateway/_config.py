"""The gateway's configuration: one frozen value, checked once when built."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

from ..core.policy import Policy, PolicyError, interactive, seconds

__all__ = ["GatewayConfig"]

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


def _path_template(value: str, name: str) -> str:
    if not isinstance(value, str) or not value.startswith("/") or "{rental_id}" not in value:
        raise PolicyError(f"{name} must be a path starting with / that holds {{rental_id}}")
    return value


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """Everything the reference gateway needs to know.

    Attributes:
        provider: the provider's base URL (``http://host:port``, optionally with a path
            prefix); request paths are appended to it.
        db_path: the SQLite file that holds the stored facts and reservations (created if
            missing).
        deadline: the end-to-end budget of one provider operation, in seconds (waits and
            every attempt included).
        max_attempts: attempts per lookup at most (a reservation is sent once).
        attempt_timeout: the cap on one attempt's timeout, so a hung attempt leaves room for
            another; always clipped to what is left of the deadline. None: the deadline alone.
        availability_path: the provider path of a lookup, holding ``{rental_id}``.
        reservation_path: the provider path of a reservation, holding ``{rental_id}``.
        provider_headers: headers sent with every provider request (an API key, say). Their
            values are treated as secrets: never logged, scrubbed from audit records.
        audit_path: a JSONL file that gets one audit record per provider operation, or None.
        db_threads: threads that run SQLite statements (one connection each).
        max_connections: the provider connection pool's size.
        breaker_failures: failed lookups in a row that open the circuit breaker.
        breaker_cool_down: seconds the open breaker refuses lookups before one probe.
        breaker_failure_ratio: the failed share of the last ``breaker_window`` lookups that
            opens the breaker too, once ``breaker_min_operations`` of them were seen; None
            (the default): off, only ``breaker_failures`` in a row open it.
        breaker_window: the recent lookups the failure ratio looks at.
        breaker_min_operations: the lookups the window must hold before the ratio counts.
        reservation_lease: seconds a reservation in flight holds its idempotency key; a
            request with the same key inside that time is answered 409.
        max_in_flight: provider operations (lookups and reservations) running at once at most;
            a request beyond it is answered 503 ``gateway_overloaded`` at once.
        min_budget: the least budget (seconds) a provider operation is started with; a request
            that has less left of its deadline (it waited, or the event loop lags) is answered
            503 ``gateway_overloaded`` at once.
        head_timeout: seconds a client connection may take to send a request head (a new
            connection, or a kept-alive one that started its next request); then it is
            answered 408 and closed, so slow or idle heads (slowloris) cannot hold connections.
        keep_alive_timeout: whole seconds an idle kept-alive client connection stays open.
        max_clients: client connections open at once at most; one beyond it is answered 503
            ``gateway_overloaded`` and closed before its request is read.
        max_head_size: bytes of an incomplete request head at most; a longer one is
            answered 400 and closed.
    """

    provider: str
    db_path: str | os.PathLike[str]
    deadline: float = 2.0
    max_attempts: int = 3
    attempt_timeout: float | None = 1.0
    availability_path: str = "/rentals/{rental_id}/availability"
    reservation_path: str = "/rentals/{rental_id}/reservations"
    provider_headers: Mapping[str, str] = field(default_factory=dict, hash=False)
    audit_path: str | os.PathLike[str] | None = None
    db_threads: int = 4
    max_connections: int = 100
    breaker_failures: int = 5
    breaker_cool_down: float = 5.0
    reservation_lease: float = 30.0
    max_in_flight: int = 32
    min_budget: float = 0.25
    breaker_failure_ratio: float | None = None
    breaker_window: int = 20
    breaker_min_operations: int = 10
    head_timeout: float = 5.0
    keep_alive_timeout: int = 5
    max_clients: int = 512
    max_head_size: int = 16_384

    def __post_init__(self) -> None:
        parts = urlsplit(self.provider) if isinstance(self.provider, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise PolicyError("provider must be an http(s) base URL")
        if parts.query or parts.fragment:
            raise PolicyError("provider must not carry a query or fragment")
        object.__setattr__(self, "provider", self.provider.rstrip("/"))
        if not str(self.db_path):
            raise PolicyError("db_path is required")
        for name in ("deadline", "breaker_cool_down", "reservation_lease", "min_budget",
                     "head_timeout"):
            positive = seconds(getattr(self, name), name)
            if not positive:
                raise PolicyError(f"{name} must be positive")
            object.__setattr__(self, name, positive)
        timeout = seconds(self.attempt_timeout, "attempt_timeout", allow_none=True)
        object.__setattr__(self, "attempt_timeout", timeout or None)
        ratio = self.breaker_failure_ratio
        if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, (int, float))
                                  or not 0 < ratio <= 1):
            raise PolicyError(f"breaker_failure_ratio must be above 0 and at most 1, got {ratio!r}")
        if self.min_budget > self.deadline / 2:
            raise PolicyError("min_budget must be at most half the deadline")
        _path_template(self.availability_path, "availability_path")
        _path_template(self.reservation_path, "reservation_path")
        headers: dict[str, str] = {}
        for name, value in dict(self.provider_headers).items():
            if not isinstance(name, str) or not _TOKEN.match(name):
                raise PolicyError(f"provider header name {name!r} is not a token")
            if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
                raise PolicyError(f"provider header {name} must be one line of text")
            headers[name] = value
        object.__setattr__(self, "provider_headers", MappingProxyType(headers))
        for name, low, high in (("max_attempts", 1, 10), ("db_threads", 1, 64),
                                ("max_connections", 1, 10_000), ("breaker_failures", 1, 10_000),
                                ("max_in_flight", 1, 10_000), ("breaker_window", 1, 1000),
                                ("breaker_min_operations", 1, 1000),
                                ("keep_alive_timeout", 1, 3600), ("max_clients", 1, 100_000),
                                ("max_head_size", 1024, 1_048_576)):
            count = getattr(self, name)
            if isinstance(count, bool) or not isinstance(count, int) or not low <= count <= high:
                raise PolicyError(f"{name} must be an integer from {low} to {high}, got {count!r}")

    def replace(self, **changes: Any) -> GatewayConfig:
        """A copy with ``changes`` applied and validated (``dataclasses.replace``)."""
        return dataclasses.replace(self, **changes)

    def policy(self) -> Policy:
        """The provider policy: :func:`~retrybudget.interactive` with this budget.

        Lookups (GET) are retried on 502/503/504 and network failures inside the deadline;
        429 fails fast; writes are never sent twice (only a connect failure, which never
        reached the provider, is tried again).
        """
        return interactive(name="gateway", deadline=self.deadline, max_attempts=self.max_attempts,
                           attempt_timeout=self.attempt_timeout, retry_writes_with_key=False)

    def url(self, template: str, rental_id: str) -> str:
        """The provider URL of ``template`` (a path) for ``rental_id``."""
        return self.provider + template.replace("{rental_id}", rental_id)

