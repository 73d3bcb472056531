"""A token quota's ledger: the tokens a window has been charged, held against its limit.

Providers of language models limit tokens per window as well as requests (OpenAI ``tokens``,
Anthropic ``tokens``, ``input-tokens`` and ``output-tokens``). Each such dimension of a key
keeps one :class:`Ledger`: a request that charges it goes only while the window's count plus
its charge fits the limit the provider published, and waits for the window's reset otherwise.
The count is every charge made in the window (an estimate while its request is in flight),
corrected by the actual usage when it is known, and kept within what the provider's own count
(``limit - remaining``) says, as :func:`~retrybudget.coordination._logic.window_used` keeps the
requests' count. A usage read after its attempt was learned (a body the caller streamed)
corrects the count late (:func:`ledger_corrected`) where no answer names the provider's.
``lua/tokens.lua`` implements the same steps for the Redis backend.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...core import evolve, fast_init
from ._instants import EPSILON, NEVER

__all__ = ["TOKEN_DIMENSIONS", "Ledger", "ledger_charged", "ledger_closed", "ledger_corrected",
           "ledger_hold", "ledger_learn", "ledger_rolled"]

TOKEN_DIMENSIONS = ("tokens", "input-tokens", "output-tokens")
"""The token dimensions a ledger is kept for, in the order a charge lists them."""

_SAME_RESET = 1.0  # seconds two namings of one reset may differ by (as _logic.learn's)


@fast_init
@dataclass(frozen=True, slots=True)
class Ledger:
    """One token dimension of one key (instants on the coordinator's clock).

    Attributes:
        limit: the window's size the provider published (None: not known yet, nothing held).
        used: tokens the current window has been charged by this coordinator's count.
        reset_at: when the current window resets (None: not named yet).
        remaining: the lowest ``remaining`` an answer named for the current window.
        gate: no request charging this dimension starts before this instant (a rate limit
            that named it).
        window: how many windows the ledger has started (each reset passed, each later
            window an answer named): a late correction names the window it is for.
    """

    limit: int | None = None
    used: int = 0
    reset_at: float | None = None
    remaining: int | None = None
    gate: float = NEVER
    window: int = 0


def ledger_rolled(ledger: Ledger, now: float, in_flight: int) -> Ledger:
    """The ledger once its window has reset (unchanged before ``reset_at``).

    The count starts again from the charges still in flight (``in_flight``: they may land in
    the new window); the new window's reset is unknown until an answer names it (until then a
    full count holds for ``spread`` at a time: :func:`ledger_hold`).
    """
    reset_at = ledger.reset_at
    if reset_at is None or now + EPSILON < reset_at:
        return ledger
    used = in_flight if ledger.limit is None else min(in_flight, ledger.limit)
    return evolve(ledger, used=used, reset_at=None, remaining=None, window=ledger.window + 1)


def ledger_hold(ledger: Ledger, now: float, charge: int, spread: float,
                in_flight: int = 0) -> float | None:
    """When a request charging ``charge`` tokens of this dimension may go, if not now.

    A closed gate holds until it opens. A known limit holds a charge that does not fit what
    the window has left until the window resets; but only ``spread`` at a time while charges
    are ``in_flight`` (their answers correct estimates that ran high, and may leave room), or
    while the reset is unknown (an answer will name it). A charge larger than the whole limit
    goes alone, into an empty window (the provider refuses it, once, rather than every worker
    wait for ever).
    """
    if charge <= 0:
        return None
    if now < ledger.gate:
        return ledger.gate
    if ledger.limit is None or ledger.used + charge <= ledger.limit or ledger.used <= 0:
        return None
    soon = now + max(spread, EPSILON * 2)
    if ledger.reset_at is None:
        return soon
    reset = max(ledger.reset_at, now + EPSILON * 2)
    return min(reset, soon) if in_flight > 0 else reset


def ledger_charged(ledger: Ledger, amount: int) -> Ledger:
    """The ledger after ``amount`` tokens were charged to its window (negative: given back,
    never below nothing)."""
    if amount == 0:
        return ledger
    return evolve(ledger, used=max(ledger.used + amount, 0))


def ledger_closed(ledger: Ledger, until: float) -> Ledger:
    """The ledger after the provider refused a request on this dimension: closed until
    ``until`` (never earlier than it was), its window counted full."""
    full = ledger.used if ledger.limit is None else max(ledger.used, ledger.limit)
    return evolve(ledger, gate=max(ledger.gate, until), used=full)


def ledger_learn(ledger: Ledger, now: float, limit: int | None, remaining: int | None,
                 reset_in: float | None, in_flight: int) -> Ledger:
    """The ledger after an answer named this dimension's quota.

    ``in_flight``: the charges of the other requests still in flight (the answered one's is
    in the provider's count already). The answer's ``limit - remaining`` is the provider's
    count: the ledger's count stays between it and it plus ``in_flight`` (as
    :func:`~retrybudget.coordination._logic.window_used`), except that an answer staler than
    one already seen for the window (more remaining) may only raise it. An answer naming an
    earlier window than the ledger's is stale: only its limit is kept. One naming a later
    window (or the first named) starts it, counted from its answer (every charge in flight
    counted).
    """
    if limit is not None and (remaining is None or limit < remaining):
        return evolve(ledger, limit=limit)
    if limit is None or remaining is None or reset_in is None or reset_in <= 0:
        return ledger
    ledger = ledger_rolled(ledger, now, in_flight)
    reset_at = now + reset_in
    low = limit - remaining
    known = ledger.reset_at
    if known is not None and abs(reset_at - known) < _SAME_RESET:
        reset_at = min(reset_at, known)  # one reset named twice: the earlier is the closer
        stale = ledger.remaining is not None and remaining > ledger.remaining
        used = max(ledger.used, low) if stale else max(low, min(ledger.used, low + in_flight))
        ledger = evolve(ledger, limit=limit, used=used, reset_at=reset_at,
                        remaining=ledger.remaining if stale else remaining)
    elif known is not None and reset_at < known:
        return evolve(ledger, limit=limit)  # an answer from a window already over
    else:
        ledger = evolve(ledger, limit=limit, used=max(low + in_flight, 0), reset_at=reset_at,
                        remaining=remaining, window=ledger.window + 1)
    return ledger


def ledger_corrected(ledger: Ledger, window: int, amount: int) -> Ledger:
    """The ledger after a late correction of ``amount`` tokens (the usage less the charge) for a
    request charged in window number ``window``: a usage read after its attempt was learned.

    It corrects only what no answer reconciles: a window in which an answer named this
    dimension's count (``remaining``) keeps the provider's count (the request is in it as the
    provider counted it; later answers reconcile it again), and a window other than the one
    the charge was counted in is left alone (its count restarted without the charge). Never
    below nothing.
    """
    if amount == 0 or window != ledger.window or ledger.remaining is not None:
        return ledger
    return evolve(ledger, used=max(ledger.used + amount, 0))
