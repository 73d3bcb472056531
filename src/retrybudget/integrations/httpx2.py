"""httpx2 transports that run every request as one bounded logical operation.

httpx2 is the next-generation httpx (its own package, with httpx's transport interface);
anthropic and openai build their clients on it::

    import anthropic
    import httpx2
    import retrybudget as rb
    from retrybudget.integrations.httpx2 import RetryTransport

    client = anthropic.Anthropic(
        max_retries=0,  # the retries happen underneath, once
        http_client=httpx2.Client(transport=RetryTransport(policy=rb.interactive())),
    )

:class:`RetryTransport` and :class:`AsyncRetryTransport` are :mod:`retrybudget.integrations.httpx`'s
transports, from the same code, built over httpx2's classes: the same options, outcome,
stats (``response.extensions``), deadline handling and errors (each also an httpx2 error:
``TransportRateLimited`` is a :class:`retrybudget.RateLimited` and an
``httpx2.TransportError``), with ``httpx2.HTTPTransport()`` / ``httpx2.AsyncHTTPTransport()``
as the default inner transports.
"""

from __future__ import annotations

import httpcore2  # noqa: F401 - a clear ImportError when httpx2 is not installed
import httpx2  # noqa: F401

from ._family import build_over

build_over(globals(), "retrybudget.integrations.httpx", {
    "httpx": "httpx2", "httpcore": "httpcore2",
    "retrybudget.integrations._httpx_io": "retrybudget.integrations._httpx2_io",
    "retrybudget.integrations._httpx_usage": "retrybudget.integrations._httpx2_usage",
})
