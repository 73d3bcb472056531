"""The instants and tolerances every coordination rule shares."""

from __future__ import annotations

import math

EPSILON = 0.001
"""Seconds of tolerance: a slot this close to now is now (rounding and clock granularity)."""


NEVER = -math.inf
"""An instant that has always passed (an absent gate, tail or deadline)."""

FLIGHT_TTL = 30.0
"""Seconds an attempt that went counts as in flight when no concurrency cap sets ``lease_ttl``:
a holder that died (SIGKILLed, its host gone) stops counting after this long, whatever its
policy, as a queue lease of a dead worker lapses (an answer that comes later is still learned;
only the window's count of requests in flight forgets it sooner)."""

PROBE_PATIENCE = 1.0
"""Seconds a key in its first window (no answer yet) waits for its probe's answer before the
next request goes as another probe: the probe's holder may have died, and its answer never
comes (:func:`~retrybudget.coordination._logic.quota_hold`). At most one probe per this long."""
