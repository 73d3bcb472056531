"""One key's token ledgers in the memory coordinator: a :class:`~._logic._tokens.Ledger` per
token dimension and the charge of each request in flight (by its lease)."""

from __future__ import annotations

from collections.abc import Callable, Container
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

from ..core.tokens import TokenUsage
from . import _logic
from ._tokens import Charge, TokenCall

__all__ = ["Ledgers"]

_REFUSED_FOR = 1.0
"""Seconds a dimension a 429 refused stays closed when no header names its reset."""


class Ledgers:
    """A key's token ledgers (the memory coordinator's lock held for every call but a late
    correction's, which takes ``lock`` and reads the time from ``now``)."""

    __slots__ = ("charges", "dims", "lock", "now")

    def __init__(self, lock: AbstractContextManager[Any], now: Callable[[], float]) -> None:
        self.dims = [_logic.Ledger() for _ in _logic.TOKEN_DIMENSIONS]
        self.charges: dict[str, Charge] = {}  # lease -> its request's charge
        self.lock = lock
        self.now = now

    def in_flight(self, live: Container[str]) -> list[int]:
        """The charges of the requests in flight, by dimension (a lease no longer ``live``
        lapsed: its charge is dropped)."""
        sums = [0, 0, 0]
        for lease in [lease for lease in self.charges if lease not in live]:
            del self.charges[lease]
        for charge in self.charges.values():
            for i, amount in enumerate(charge):
                sums[i] += amount
        return sums

    def hold(self, now: float, charge: Charge, spread: float,
             live: Container[str]) -> float | None:
        """The instant every dimension ``charge`` charges has room for it, if not now."""
        flight = self.in_flight(live)
        until = None
        for i, amount in enumerate(charge):
            self.dims[i] = ledger = _logic.ledger_rolled(self.dims[i], now, flight[i])
            held = _logic.ledger_hold(ledger, now, amount, spread, flight[i])
            if held is not None:
                until = held if until is None else max(until, held)
        return until

    def charged(self, lease: str, charge: Charge) -> None:
        """A request that charges ``charge`` went under ``lease``."""
        self.charges[lease] = charge
        for i, amount in enumerate(charge):
            self.dims[i] = _logic.ledger_charged(self.dims[i], amount)

    def learned(self, lease: str, call: TokenCall, now: float, wall: float,
                live: Container[str]) -> None:
        """The attempt under ``lease`` was answered as ``call`` recorded (or not at all).

        A 429 gives its charge back (the provider counted nothing) and closes each dimension
        it refused until its reset; a usage read corrects the charge to it; and every
        dimension the answer names is reconciled with the provider's count. A 2xx whose usage
        was not read leaves ``call`` its :attr:`~._tokens.TokenCall.late` correction
        (:meth:`corrected`) for the windows its charge is counted in: none of a dimension
        whose window rolled over here (the count restarted without it) or whose answer
        started a new one (the count is the provider's from then on).
        """
        charge = self.charges.pop(lease, None)
        if charge is None:
            return
        flight = self.in_flight(live)
        refused = call.refused()
        windows = []
        for i, dimension in enumerate(_logic.TOKEN_DIMENSIONS):
            windows.append(self.dims[i].window)  # the window its charge is counted in
            ledger = _logic.ledger_rolled(self.dims[i], now, flight[i])
            if call.status == 429:
                ledger = _logic.ledger_charged(ledger, -charge[i])
            elif call.usage is not None:
                spent = (call.usage.total, call.usage.input_tokens, call.usage.output_tokens)[i]
                ledger = _logic.ledger_charged(ledger, spent - charge[i])
            reading = call.readings.get(dimension)  # type: ignore[call-overload]
            reset_in = None
            if reading is not None:
                reset_in = None if reading.reset_at is None else reading.reset_at - wall
                ledger = _logic.ledger_learn(ledger, now, reading.limit, reading.remaining, reset_in,
                                      flight[i])
            if dimension in refused:
                ledger = _logic.ledger_closed(ledger, now + (reset_in if reset_in and reset_in > 0
                                                      else _REFUSED_FOR))
            self.dims[i] = ledger
        if call.usage is None and call.status is not None and 200 <= call.status < 300:
            call.late = partial(self.corrected, charge, tuple(windows), live)

    def corrected(self, charge: Charge, windows: tuple[int, ...], live: Container[str],
                  usage: TokenUsage) -> None:
        """A request that charged ``charge`` and was learned with the ledgers in ``windows``
        spent ``usage`` (read late): each dimension still in that window is corrected
        (:func:`~._logic._tokens.ledger_corrected`)."""
        spent = (usage.total, usage.input_tokens, usage.output_tokens)
        with self.lock:
            now = self.now()
            flight = self.in_flight(live)
            for i, window in enumerate(windows):
                ledger = _logic.ledger_rolled(self.dims[i], now, flight[i])
                self.dims[i] = _logic.ledger_corrected(ledger, window, spent[i] - charge[i])
