"""What every integration's front (a transport, an adapter, a middleware) shares: the options
it takes besides its own, the engine it builds from them, and the retrier it runs under."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from .._drivers import Retrier
from ..core.classify import FailureKind
from ..core.outcome import Outcome
from ._common import Engine, ErrorTable
from ._tokens import record_answers

if TYPE_CHECKING:
    from typing_extensions import TypedDict

    from ..core.policy import Policy

__all__ = ["Front", "Options", "Wiring"]

Q = TypeVar("Q")
"""The library's request type (what a ``key`` function reads)."""

if TYPE_CHECKING:

    class Options(TypedDict, Generic[Q], total=False):
        """:class:`Front`'s keywords, for a subclass that takes options of its own and passes
        these on (``**options: Unpack[Options[Request]]``)."""

        policy: Policy | None
        key: Callable[[Q], str] | None
        generate_idempotency_keys: bool
        redirects_ok: bool


@dataclass(frozen=True, slots=True)
class Wiring:
    """What an integration plugs into its engine: its library's side of the shared code.

    Args:
        errors: the exception class raised for each reason (each also the library's error).
        failure_kind: the library's one boundary from exceptions to failure kinds.
        attach: puts the outcome and its stats on a response.
        headers: the response headers the classifier reads, as normalised pairs.
        default_key: names a request's provider key when the caller gives no ``key`` (None:
            the integration reads the key itself).
        quota_headers: an answer's headers as the token ledgers read them (None: its
            ``headers.multi_items()``, as httpx's).
        body: an answer's body when it was read already, for its usage (None: never read).
    """

    errors: ErrorTable
    failure_kind: Callable[[BaseException], FailureKind]
    attach: Callable[[Any, Outcome[object]], object]
    headers: Callable[[Any], tuple[tuple[str, str], ...]]
    default_key: Callable[[Any], str] | None = None
    quota_headers: Callable[[Any], Any] | None = None
    body: Callable[[Any], object] | None = None


class Front(Generic[Q]):
    """An integration's front: each request it serves is one bounded, provider-aware operation.

    Args:
        retrier: the retrier: policy, clock, coordinator, hooks and random source.
        policy: a policy that replaces the retrier's (a shortcut for ``Retrier(policy=...)``).
        key: names a request's provider key (default ``scheme://host[:port]``).
        generate_idempotency_keys: give requests whose method is not idempotent under the
            policy (POST, PATCH…) a UUID4 ``Idempotency-Key`` when they carry none; it is sent
            unchanged on every attempt. A write is still only retried with
            ``policy.retry_writes_with_key=True``.
        redirects_ok: a 3xx answer ends the operation as ``ok`` and is handed over (the
            client above follows it; each hop is its own operation). False: a 3xx is what the
            profile makes of it (``unexpected`` unless the profile lists it).
    """

    _wiring: ClassVar[Wiring]

    def __init__(self, retrier: Retrier | None = None, *, policy: Policy | None = None,
                 key: Callable[[Q], str] | None = None, generate_idempotency_keys: bool = False,
                 redirects_ok: bool = True) -> None:
        wiring = self._wiring
        self._engine = Engine(retrier, policy, generate_idempotency_keys=generate_idempotency_keys,
                              redirects_ok=redirects_ok, errors=wiring.errors,
                              failure_kind=wiring.failure_kind, attach=wiring.attach,
                              headers=wiring.headers)
        record_answers(self._engine, wiring.quota_headers, wiring.body)  # token pacing
        self._key = key or wiring.default_key

    @property
    def retrier(self) -> Retrier:
        """The retrier every request runs under (its profile also accepts 3xx as final unless
        ``redirects_ok=False``)."""
        return self._engine.retrier
