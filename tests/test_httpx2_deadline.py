"""The httpx transports' deadline tests (a trickling provider, a connect that hangs), run
again over httpx2: ``test_deadline_exchange``'s and ``test_deadline_connect``'s own code with
``httpx``/``httpcore`` answered by ``httpx2``/``httpcore2`` (see ``test_httpx2_transport``)."""

from __future__ import annotations

import httpx2 as httpx2_package

from retrybudget.integrations import httpx2 as rb_httpx2
from retrybudget.integrations._family import build_over

build_over(globals(), "test_deadline_exchange", {
    "httpx": "httpx2", "httpcore": "httpcore2",
    "retrybudget.integrations.httpx": "retrybudget.integrations.httpx2",
})
for _name in [name for name in globals() if name.startswith("test_") and "gateway" in name]:
    del globals()[_name]  # the gateway's own client is httpx: run once, in the httpx module


def test_the_tests_above_ran_over_httpx2() -> None:
    assert globals()["httpx"] is httpx2_package
    assert globals()["RetryTransport"] is rb_httpx2.RetryTransport
