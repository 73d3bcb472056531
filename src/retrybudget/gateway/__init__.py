"""The reference gateway: a rental availability service built on retrybudget.

One ``GET /rentals/{id}/availability`` is one logical lookup at the provider under the
interactive contract (docs/gateway.md); ``POST /rentals/{id}/reservations`` is a write
with an ``Idempotency-Key``, never replayed automatically and committed locally only once
the provider confirmed it. Stored facts live in SQLite; ``/metrics`` and ``/healthz`` serve
operations. Run it with::

    python -m retrybudget.gateway --provider http://127.0.0.1:8080 --db gateway.sqlite3 --port 8000

or embed it::

    from retrybudget.gateway import GatewayConfig, serve_in_thread

    with serve_in_thread(GatewayConfig(provider=url, db_path="facts.sqlite3")) as gateway:
        httpx.get(gateway.url("/rentals/7/availability"))

See docs/gateway.md for the contract table.
"""

from .._gateway_mapping import GATEWAY_MAPPING
from ._answers import PROBLEM_TYPE, TITLES
from ._app import Gateway, create_app
from ._config import GatewayConfig
from ._logging import LOGGER_NAME, JsonLogFormatter
from ._server import GatewayServer, bind_socket, serve_in_thread, uvicorn_config
from ._store import FactStore, StoredFact

__all__ = [
    "GATEWAY_MAPPING",
    "LOGGER_NAME",
    "PROBLEM_TYPE",
    "TITLES",
    "FactStore",
    "Gateway",
    "GatewayConfig",
    "GatewayServer",
    "JsonLogFormatter",
    "StoredFact",
    "bind_socket",
    "create_app",
    "serve_in_thread",
    "uvicorn_config",
]
