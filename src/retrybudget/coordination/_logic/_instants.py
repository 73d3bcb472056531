"""The instants and tolerances every coordination rule shares."""

from __future__ import annotations

import math

EPSILON = 0.001
"""Seconds of tolerance: a slot this close to now is now (rounding and clock granularity)."""


NEVER = -math.inf
"""An instant that has always passed (an absent gate, tail or deadline)."""

FLIGHT_TTL = 60.0
"""Seconds an attempt that went counts as in flight when no concurrency cap sets ``lease_ttl``
(a holder that died stops counting after this long)."""
