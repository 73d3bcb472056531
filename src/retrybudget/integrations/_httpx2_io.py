"""httpx2's exchange bounded by the attempt's end: :mod:`retrybudget.integrations._httpx_io`'s
code built over httpx2's classes (see :mod:`retrybudget.integrations._family`)."""

from __future__ import annotations

from ._family import build_over

build_over(globals(), "retrybudget.integrations._httpx_io", {"httpx": "httpx2", "httpcore": "httpcore2"})
