"""The token charges' arguments of the Redis scripts (``lua/tokens.lua``): what an acquire
charges, and what a learn reconciles, read from the operation's current
:class:`~retrybudget.coordination.TokenCall`; and the late corrections a coordinator holds
for its next acquire under their key (:class:`Corrections`)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..core.throttle import Throttle
from ..core.tokens import TokenUsage
from ._logic import TOKEN_DIMENSIONS
from ._tokens import Charge, TokenCall, current_call

__all__ = ["Corrections", "charged", "learned_args", "learned_late", "requests_throttle",
           "token_args"]

Arg = str | int | float
Windows = tuple[int, int, int]


class Corrections:
    """Late corrections of token charges (a usage read after its attempt was learned), held
    per key for the next acquire under it to carry (``lua/tokens.lua``'s
    ``tokens_corrected``): no round trip of their own while the key is busy. Those for one
    key and the same windows are summed, so what is held stays small."""

    __slots__ = ("_held", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, dict[Windows, list[int]]] = {}

    def add(self, key: str, windows: Windows, amounts: tuple[int, int, int]) -> None:
        """Hold a correction of ``amounts`` (by dimension) for the ledgers in ``windows``."""
        with self._lock:
            held = self._held.setdefault(key, {})
            total = held.setdefault(windows, [0, 0, 0])
            for i, amount in enumerate(amounts):
                total[i] += amount

    def take(self, key: str) -> tuple[Arg, ...]:
        """The corrections held for ``key``, as script arguments (their number, then each
        one's windows and amounts); () when none. They are no longer held."""
        if not self._held:
            return ()
        with self._lock:
            held = self._held.pop(key, None)
        if not held:
            return ()
        args: list[Arg] = [len(held)]
        for windows, amounts in held.items():
            args.extend((*windows, *amounts))
        return tuple(args)

    def held(self) -> list[str]:
        """The keys corrections are held for."""
        with self._lock:
            return list(self._held)


def token_args(seed: tuple[Arg, ...], corrections: tuple[Arg, ...] = ()) -> tuple[Arg, ...]:
    """An acquire's last arguments: the seed (padded to its three places when a charge
    follows), then the current operation's charge, if it has one (the call's answer is
    forgotten: a new attempt asks), then the late ``corrections`` to carry, if any (the
    charge padded to its three places before them)."""
    call = current_call()
    if call is None:
        charge: tuple[Arg, ...] = ("", "", "") if corrections else ()
    else:
        call.sent()
        charge = call.charge
    if not charge:
        return seed
    return (*(seed or ("", "", "")), *charge, *corrections)


def charged(lease: str) -> bool:
    """Whether a Redis lease is a request's that charged tokens (``r:<id>:<t>:<i>:<o>``)."""
    return lease.count(":") == 4


def learned_args(lease: str | None, wall: float) -> tuple[Arg, ...]:
    """A learn's last arguments for a lease that charged tokens, when the operation's token
    call is current: the answer's status, each token dimension's limit, remaining and seconds
    to its reset, the dimensions a 429 refused, and the usage read (``''``: not said)."""
    call = current_call()
    if call is None or lease is None or not charged(lease):
        return ()
    named: list[Arg] = []
    for dimension in TOKEN_DIMENSIONS:
        reading = call.readings.get(dimension)  # type: ignore[call-overload]
        if reading is None:
            named.extend(("", "", ""))
            continue
        named.extend(("" if reading.limit is None else reading.limit,
                      "" if reading.remaining is None else reading.remaining,
                      "" if reading.reset_at is None else reading.reset_at - wall))
    refused = call.refused()
    usage = call.usage
    spent: tuple[Arg, ...] = ("", "", "") if usage is None else (
        usage.total, usage.input_tokens, usage.output_tokens)
    return ("" if call.status is None else call.status, *named,
            *(1 if dimension in refused else 0 for dimension in TOKEN_DIMENSIONS), *spent)


def learned_late(lease: str | None, parse: Callable[[object], None],
                 hold: Callable[[Windows, tuple[int, int, int]], None]) -> Callable[[object], None]:
    """A learn's reply reader: ``parse``, and when the current token call's answer is a 2xx
    whose usage was not read (its lease charged tokens), the call's
    :attr:`~retrybudget.coordination.TokenCall.late` correction, from the ledgers' windows the
    script replies with: ``hold`` is given those windows and what to add to each dimension."""
    call = current_call()
    if (call is None or lease is None or not charged(lease) or call.usage is not None
            or call.status is None or not 200 <= call.status < 300):
        return parse
    return lambda raw: _late_from(raw, call, parse, hold)


def _late_from(raw: object, call: TokenCall, parse: Callable[[object], None],
               hold: Callable[[Windows, tuple[int, int, int]], None]) -> None:
    parse(raw)
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    parts = text.split(":")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        return
    windows = (int(parts[0]), int(parts[1]), int(parts[2]))
    charge: Charge = call.charge

    def late(usage: TokenUsage) -> None:
        spent = (usage.total, usage.input_tokens, usage.output_tokens)
        hold(windows, (spent[0] - charge[0], spent[1] - charge[1], spent[2] - charge[2]))

    call.late = late


def requests_throttle(throttle: Throttle) -> Throttle:
    """The current token call's :meth:`~retrybudget.coordination.TokenCall.requests_throttle`
    of ``throttle`` (``throttle`` itself when none is current)."""
    call = current_call()
    return throttle if call is None else call.requests_throttle(throttle)
