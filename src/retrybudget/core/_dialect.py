"""What a provider says about its response headers, below both the header reader and the
profiles: the units a delay or reset is read in, a quota family's header names, and a
profile's header dialect (:class:`HeaderRules`).

A provider's profile entry declares these; the header reader (``core.headers``) gathers
every built-in entry's quota families and header names when it is imported, so this module
holds no provider's data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DELAY_UNITS = frozenset({"seconds", "ms", "epoch", "duration", "rfc3339", "auto"})
"""How a delay or reset header's value is read: delay-seconds (or an HTTP-date, for a delay),
milliseconds, epoch seconds, a Go duration, an RFC 3339 time, or ``auto`` (the generic
magnitude heuristic: a number at or above ``EPOCH_THRESHOLD`` is an epoch)."""


@dataclass(frozen=True, slots=True)
class QuotaFamily:
    """The lower-case header names of one vendor quota family: its ``*-limit``,
    ``*-remaining``, ``*-reset`` (and optionally ``*-used`` and resource) headers, read as
    plain counts, a reset and a bucket name (OpenAI's ``x-ratelimit-limit-requests``…).

    Attributes:
        limit: the header holding the quota size.
        remaining: the header holding what is left of it.
        resets: the headers naming when it refills (the latest valid one wins).
        used: the header holding what has been used, if any.
        resources: the headers naming the quota's bucket, first valid one wins.
        names: every header name above (computed).
    """

    limit: str
    remaining: str
    resets: tuple[str, ...]
    used: str | None = None
    resources: tuple[str, ...] = ()
    names: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        used = (self.used,) if self.used else ()
        names = frozenset((self.limit, self.remaining, *self.resets, *self.resources, *used))
        object.__setattr__(self, "names", names)


@dataclass(frozen=True, slots=True)
class HeaderRules:
    """How one provider's delay and reset headers are read (a profile's header dialect).

    Attributes:
        delays: ``(header, unit)`` pairs naming a time to retry, in precedence order (the
            first valid one wins); units from :data:`DELAY_UNITS`.
        resets: ``(header, unit)`` pairs saying how a quota family's reset header is read;
            a reset header not listed is read ``auto``.
        provider_clock: measure absolute times (HTTP-dates, epochs, RFC 3339) against the
            response's ``Date`` header, so a skewed local clock waits what the provider asked.
    """

    delays: tuple[tuple[str, str], ...] = (("retry-after-ms", "ms"), ("retry-after", "seconds"))
    resets: tuple[tuple[str, str], ...] = ()
    provider_clock: bool = True
    relevant: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The header names these rules add to what there is to read (beside the evidence
    headers every rules read), as prefixes."""
    own: frozenset[str] = field(init=False, repr=False, compare=False)
    """The delay and reset header names these rules add to the evidence."""
    roles: dict[object, tuple[Any, ...]] = field(init=False, repr=False, compare=False)
    """What each header name seen so far is to the fast reader (bounded)."""
    plans: dict[object, Any] = field(init=False, repr=False, compare=False)
    """What each header set seen so far says apart from the time, for the fast reader
    (bounded)."""

    def __post_init__(self) -> None:
        for field_name in ("delays", "resets"):
            pairs = tuple((str(h).strip().lower(), str(u)) for h, u in getattr(self, field_name))
            for header, unit in pairs:
                if not header:
                    raise ValueError(f"{field_name}: a header name is empty")
                if unit not in DELAY_UNITS:
                    known = ", ".join(sorted(DELAY_UNITS))
                    raise ValueError(f"{field_name}: unknown unit {unit!r} for {header} ({known})")
            object.__setattr__(self, field_name, pairs)
        own = frozenset(h for h, _ in (*self.delays, *self.resets))
        object.__setattr__(self, "own", own)
        object.__setattr__(self, "relevant", tuple(sorted(own)))
        object.__setattr__(self, "roles", {})
        object.__setattr__(self, "plans", {})


DEFAULT_HEADER_RULES = HeaderRules()
"""The generic header dialect: ``retry-after-ms`` then ``retry-after``; resets read ``auto``."""
