"""The argparse types the commands share: numbers in range, ports, log levels."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

__all__ = ["LOG_LEVELS", "count", "log_level", "non_negative_int", "number", "port", "positive_float",
           "positive_int", "seconds", "share"]

T = TypeVar("T", int, float)


def number(kind: Callable[[str], T], valid: Callable[[T], bool], what: str) -> Callable[[str], T]:
    """An argparse type: ``kind(text)``, refused unless ``valid``; ``what`` says what is wanted."""

    def parse(text: str) -> T:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not valid(value):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    return parse


positive_int = number(int, lambda v: v >= 1, "a whole number of at least 1")
positive_float = number(float, lambda v: math.isfinite(v) and v > 0, "a positive number of seconds")
non_negative_int = number(int, lambda v: v >= 0, "a whole number of at least 0")
share = number(float, lambda v: 0.0 <= v <= 1.0, "a share between 0 and 1")
count = number(int, lambda v: v >= 0, "a whole number of at least 0")
seconds = number(float, lambda v: math.isfinite(v) and v >= 0, "a number of seconds of at least 0")
port = number(int, lambda v: 0 <= v <= 65535, "a port from 0 to 65535 (0: any free port)")

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
"""The log levels the server commands accept."""


def log_level(text: str) -> str:
    """An argparse type: one of :data:`LOG_LEVELS`, in any case."""
    if text.lower() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(LOG_LEVELS)}, got {text!r}")
    return text.lower()
