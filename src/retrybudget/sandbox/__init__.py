"""The sandbox provider: a synthetic third-party HTTP API served over real loopback HTTP.

It has synthetic rental records, scripted fixtures in the acceptance-fixture format,
primary rate limits in GitHub, IETF and plain Retry-After styles, a secondary limit
on concurrent requests, seeded faults, and an LLM provider (OpenAI's chat completions and
Anthropic's messages behind request and token quotas, :class:`LlmLimits`). Start one with::

    from retrybudget.sandbox import RateLimit, SandboxConfig, serve_in_thread

    with serve_in_thread(SandboxConfig(rate_limit=RateLimit(limit=5, window_s=1))) as sandbox:
        url = sandbox.url("/rentals/1/availability")
        ...
        print(sandbox.stats("default")["count"])

or from a shell: ``python -m retrybudget.sandbox --port 8080``.
"""

from __future__ import annotations

from retrybudget._fixtures import (
    FixtureError,
    Step,
    load_fixture_file,
    parse_script,
    resolve_placeholders,
)
from retrybudget.sandbox._app import (
    DEFAULT_RUN,
    IDEMPOTENCY_HEADER,
    RESET_EXTENSION,
    RUN_HEADER,
    create_app,
    is_available,
)
from retrybudget.sandbox._config import Faults, LlmLimits, RateLimit, RateLimitStyle, SandboxConfig
from retrybudget.sandbox._faults import MALFORMED_BODY
from retrybudget.sandbox._server import (
    SandboxH11Protocol,
    SandboxServer,
    bind_loopback,
    serve_in_thread,
)

__all__ = [
    "DEFAULT_RUN",
    "IDEMPOTENCY_HEADER",
    "MALFORMED_BODY",
    "RESET_EXTENSION",
    "RUN_HEADER",
    "Faults",
    "FixtureError",
    "LlmLimits",
    "RateLimit",
    "RateLimitStyle",
    "SandboxConfig",
    "SandboxH11Protocol",
    "SandboxServer",
    "Step",
    "bind_loopback",
    "create_app",
    "is_available",
    "load_fixture_file",
    "parse_script",
    "resolve_placeholders",
    "serve_in_thread",
]
