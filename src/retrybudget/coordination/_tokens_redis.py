"""The token charges' arguments of the Redis scripts (``lua/tokens.lua``): what an acquire
charges, and what a learn reconciles, read from the operation's current
:class:`~retrybudget.coordination.TokenCall`."""

from __future__ import annotations

from ..core.throttle import Throttle
from ._logic import TOKEN_DIMENSIONS
from ._tokens import current_call

__all__ = ["charged", "learned_args", "requests_throttle", "token_args"]

Arg = str | int | float


def token_args(seed: tuple[Arg, ...]) -> tuple[Arg, ...]:
    """An acquire's last arguments: the seed (padded to its three places when a charge
    follows), then the current operation's charge, if it has one (the call's answer is
    forgotten: a new attempt asks)."""
    call = current_call()
    if call is None:
        return seed
    call.sent()
    return (*(seed or ("", "", "")), *call.charge)


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


def requests_throttle(throttle: Throttle) -> Throttle:
    """The current token call's :meth:`~retrybudget.coordination.TokenCall.requests_throttle`
    of ``throttle`` (``throttle`` itself when none is current)."""
    call = current_call()
    return throttle if call is None else call.requests_throttle(throttle)
