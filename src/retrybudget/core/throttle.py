"""What one classified response says about the provider's quota, as one frozen value.

The flow turns every classified response into a :class:`Throttle` with the policy's profile
and hands it to the coordinator, so the shared gate and each operation wait by the same rule
(:func:`~retrybudget.core.decide.rate_limit_wait`): a coordinator never consults a profile of
its own. Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._values import fast_init
from .classify import Classified, Kind
from .decide import rate_limit_wait
from .headers import RateLimitInfo
from .outcome import WaitReason
from .profiles import GENERIC, Profile

__all__ = ["NO_THROTTLE", "Throttle", "ok_throttle", "throttle_of"]


@fast_init
@dataclass(frozen=True, slots=True)
class Throttle:
    """One response's quota facts, in seconds relative to when it was classified.

    Attributes:
        throttled: the provider throttles now (a rate limit, or ``remaining`` 0 with a reset).
        hint: seconds until the time the provider named (the profile's reset slack included),
            None when it named none (then :meth:`wait` uses the floor).
        floor: the profile's wait for a rate limit that names no time.
        multiplier: the floor's growth for each repeat.
        remaining: requests left in the window, when a header said so.
        limit: the window's quota size, when a header said so.
        reset: seconds until the window resets (the profile's slack included), when a header
            said so.
        bucket: the quota bucket the headers named (``x-ratelimit-resource``), if any.
    """

    throttled: bool = False
    hint: float | None = None
    floor: float = GENERIC.rate_limit_floor
    multiplier: float = GENERIC.rate_limit_multiplier
    remaining: int | None = None
    limit: int | None = None
    reset: float | None = None
    bucket: str | None = None

    @property
    def informative(self) -> bool:
        """Whether there is anything to record (else a coordinator may skip the write)."""
        return self.throttled or (self.remaining is not None and self.reset is not None)

    def wait(self, streak: int) -> float:
        """Seconds this throttle closes the gate after ``streak`` hint-less repeats: the hint,
        else the floor times the multiplier to the power of the streak (capped at 32)."""
        if self.hint is not None:
            return max(self.hint, 0.0)
        return self.floor * self.multiplier ** min(max(streak, 0), 32)


NO_THROTTLE = Throttle()
"""A response that says nothing about the quota (or an attempt that was not made)."""


def throttle_of(profile: Profile, classified: Classified | None) -> Throttle:
    """The throttle value of a classified response, read with ``profile``.

    The hint is the one :func:`~retrybudget.core.decide.rate_limit_wait` names (Retry-After,
    else the reset plus the profile's slack when the quota is exhausted or its state is not
    given); a throttle without one leaves the floor to the coordinator's shared streak. A
    rate limit of the ``shared`` scope says nothing of the key's own quota: no throttle.
    """
    if classified is None:
        return NO_THROTTLE
    if classified.scope == "shared":
        # Discord's shared scope: a per-resource limit that "does not count against" the
        # user; this operation waits, the key's gate stays open for the others.
        # https://discord.com/developers/docs/topics/rate-limits#header-format
        return NO_THROTTLE
    rate = classified.rate
    exhausted = rate.remaining == 0 and rate.reset is not None
    if not (classified.kind is Kind.RATE_LIMITED or exhausted):
        return ok_throttle(profile, rate)
    delay, reason, _ = rate_limit_wait(profile, classified, 0)
    hint = None if reason is WaitReason.RATE_LIMIT_BACKOFF else delay
    reset = None if rate.reset is None else rate.reset.delay + profile.reset_slack
    return Throttle(True, hint, profile.rate_limit_floor, profile.rate_limit_multiplier,
                    rate.remaining, rate.limit, reset, rate.resource)


def ok_throttle(profile: Profile, rate: RateLimitInfo) -> Throttle:
    """:func:`throttle_of` a response that is no rate limit, its quota not exhausted (the
    caller's check), whose rate-limit headers say ``rate``: the quota it names, if any."""
    if rate.remaining is None or rate.reset is None:
        return NO_THROTTLE
    return Throttle(False, None, profile.rate_limit_floor, profile.rate_limit_multiplier,
                    rate.remaining, rate.limit, rate.reset.delay + profile.reset_slack,
                    rate.resource)
