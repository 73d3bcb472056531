"""The sync and async drivers: thin loops that perform the flow's actions.

Both loops only *act*: every decision comes from :func:`~retrybudget.core.flow.operation_flow`.
They differ by ``await`` alone, and share the dispatch of hooks and the reading of results.

The package's modules, one responsibility each: ``_retrier`` (the :class:`Retrier`, its
``call``/``acall``/``run``/``arun``, :class:`BoundRetrier`, ``retrying``), ``_loop`` (the loop
both drivers share, the operation ids), ``_first`` (an uncoordinated first attempt without the
generic flow), ``_coordinated`` (a coordinated one), ``_interpret`` (what an attempt reads:
its timeout, a returned value or a raised error, a validator's verdict).

What an HTTP integration drives, by name: :class:`Begun` (an operation's quick first attempt
and the next step, the one sequence every driver runs), :func:`quick_first` and
:func:`coordinated_first` (which first attempt a retrier takes), :class:`Gated` and
:func:`gated_first` (a coordinated operation's quick first attempt), :func:`validated`,
:func:`ended` and :data:`PLAIN_OK`.
"""

from ._coordinated import Gated, coordinated_first, gated_first
from ._first import Begun, Described, quick_first
from ._interpret import (
    PLAIN_OK,
    CallInterpreter,
    Interpreter,
    attempt_timeout,
    ended,
    last_failed_outcome,
    validated,
    validation_error,
)
from ._retrier import CALL_FIELDS, BoundRetrier, Retrier, acall, call, retrying

__all__ = [
    "CALL_FIELDS",
    "PLAIN_OK",
    "Begun",
    "BoundRetrier",
    "CallInterpreter",
    "Described",
    "Gated",
    "Interpreter",
    "Retrier",
    "acall",
    "attempt_timeout",
    "call",
    "coordinated_first",
    "ended",
    "gated_first",
    "last_failed_outcome",
    "quick_first",
    "retrying",
    "validated",
    "validation_error",
]
