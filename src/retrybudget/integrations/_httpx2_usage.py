"""The usage of an LLM answer read from its body as the caller reads it:
:mod:`retrybudget.integrations._httpx_usage`'s code built over httpx2's classes (see
:mod:`retrybudget.integrations._family`)."""

from __future__ import annotations

from ._family import build_over

build_over(globals(), "retrybudget.integrations._httpx_usage", {"httpx": "httpx2"})
