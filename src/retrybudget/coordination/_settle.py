"""Which settlements of an operation a shared coordinator may hold back, and how they age.

An operation's last learn and its finish (its settlement) tell the other workers nothing they
need at once when the answer was a healthy success far from the quota: the lease it gives
back only makes the shared count more careful while it is held (a request in flight counts
as sent), the breaker's success and the retry budget's deposit only loosen. Such a
settlement may travel with the worker's next call. Anything that closes or tightens (a
throttle, a quota running low, a failure, a probe's answer, a concurrency slot others wait
for) goes at once.
"""

from __future__ import annotations

import dataclasses

from ..core.throttle import Throttle
from ._config import CoordinationConfig
from ._logic import Health, Schedule, pacing_interval

__all__ = ["aged", "deferrable"]


def deferrable(config: CoordinationConfig, throttle: Throttle | None, verdict: Health,
               probe: bool) -> bool:
    """Whether an operation's settlement (its final learn of ``throttle`` and a finish with
    ``verdict``) may wait for the worker's next call.

    Only a healthy success that is not the breaker's probe, under a configuration without a
    concurrency cap (a held lease would keep a slot from the others), whose answer was not a
    throttle and does not show the quota low enough to pace (:func:`pacing_interval`).
    """
    if verdict is not Health.SUCCESS or probe or config.concurrency is not None:
        return False
    if throttle is None or throttle.throttled:
        return False
    if throttle.remaining is None or throttle.reset is None:
        return True
    window = Schedule(remaining=throttle.remaining, limit=throttle.limit,
                      reset_at=throttle.reset)
    return pacing_interval(window, 0.0, config.pacing) <= 0


def aged(throttle: Throttle, age: float) -> Throttle:
    """``throttle`` as it reads ``age`` seconds after it was classified: its reset that much
    closer (a reset already passed names no window any more: no quota observation)."""
    if age <= 0 or throttle.reset is None:
        return throttle
    if throttle.reset <= age:
        return dataclasses.replace(throttle, remaining=None, limit=None, reset=None)
    return dataclasses.replace(throttle, reset=throttle.reset - age)
