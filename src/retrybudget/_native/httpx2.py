"""httpx2, the next-generation httpx: httpx's exception tree, read by :mod:`.httpx`'s reader
(one reading for both)."""

from __future__ import annotations

from .httpx import read

__all__ = ["read"]
