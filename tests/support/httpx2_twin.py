"""A test module of the httpx transports, run again over httpx2 (support for the
``test_httpx2_*`` modules): its own code, built with ``httpx``/``httpcore`` answered by
``httpx2``/``httpcore2`` and the transports by :mod:`retrybudget.integrations.httpx2`'s, as
:mod:`retrybudget.integrations.httpx2` itself is built."""

from __future__ import annotations

from typing import Any

from retrybudget.integrations._family import build_over

OVER_HTTPX2 = {
    "httpx": "httpx2", "httpcore": "httpcore2",
    "retrybudget.integrations.httpx": "retrybudget.integrations.httpx2",
}


def twin(namespace: dict[str, Any], source: str) -> None:
    """Build test module ``source`` over httpx2 in ``namespace``; its gateway tests are left
    out (the gateway's own client is httpx: they run once, in ``source``)."""
    build_over(namespace, source, OVER_HTTPX2)
    for name in [name for name in namespace if name.startswith("test_") and "gateway" in name]:
        del namespace[name]


def assert_over_httpx2(namespace: dict[str, Any]) -> None:
    """The module built in ``namespace`` ran over httpx2."""
    import httpx2

    from retrybudget.integrations import httpx2 as rb_httpx2

    assert namespace["httpx"] is httpx2
    assert namespace["AsyncRetryTransport"] is rb_httpx2.AsyncRetryTransport
