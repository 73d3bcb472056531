"""The coordinator's answers, as the flow expects them (an admission, a permit)."""

from __future__ import annotations

from ...core.actions import Admission, Permit
from ...core.outcome import WaitReason
from ._breaker import Verdict

_ADMITTED = (Admission(), Admission(probe=True))
"""An admission, and one as the half-open probe (frozen values, made once)."""


def admission_of(verdict: Verdict, wall: float) -> Admission:
    """The breaker's verdict as an :class:`Admission` (``retry_at`` on the caller's wall clock)."""
    if verdict.allowed:
        return _ADMITTED[verdict.probe]
    retry_at = None if verdict.retry_in is None else wall + verdict.retry_in
    return Admission(False, retry_at=retry_at, detail="circuit open")


def permit_of(code: str, wait: float, gate_in: float, lease: str | None, wall: float,
              reset_in: float | None = None) -> Permit:
    """An acquire answer as a :class:`Permit`.

    ``code`` is ``"go"`` (send now, holding ``lease`` if any), ``"gate"`` (wait for a slot
    behind a closed gate that opens in ``gate_in`` seconds), ``"pace"`` (wait for a slot;
    ``reset_in``: seconds until the window resets, when its used-up count holds the wait) or
    ``"busy"`` (the concurrency cap is reached). Waits are relative; ``retry_at`` is put on the
    caller's wall clock, so clocks that disagree still wait for the same instant. Behind a
    closed gate whose window count is also used up, ``retry_at`` is the later of the two.
    """
    if code == "gate":
        opens_in = max(gate_in, 0.0 if reset_in is None else reset_in)
        return Permit(wait, WaitReason.GATE, retry_at=wall + max(opens_in, 0.0))
    if code == "pace":
        retry_at = None if reset_in is None else wall + max(reset_in, 0.0)
        return Permit(wait, WaitReason.PACING, retry_at=retry_at)
    if code == "busy":
        return Permit(wait, WaitReason.CONCURRENCY)
    return Permit(lease=lease or None)
