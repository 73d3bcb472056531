"""Structured logs: one record per answer on ``retrybudget.gateway``, fields in ``extra``.

:class:`JsonLogFormatter` renders a record and its extra fields as one JSON line; every
string goes through :func:`~retrybudget.observe.redact_text` first. The gateway never puts
a header, a body or an idempotency key in a log record (a key appears as a short hash).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from ..observe import redact_text, scrub

__all__ = ["LOGGER_NAME", "JsonLogFormatter", "configure_logging"]

LOGGER_NAME = "retrybudget.gateway"
"""The logger every gateway record goes to."""

_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonLogFormatter(logging.Formatter):
    """Formats a record as one JSON object: time, level, logger, message and extra fields.

    Args:
        secrets: secret values to scrub wherever they appear (provider API keys, say).
    """

    def __init__(self, secrets: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.secrets = secrets

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        data: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        data.update((k, v) for k, v in vars(record).items() if k not in _STANDARD)
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(scrub(data, self.secrets), default=lambda v: redact_text(str(v)))


def configure_logging(level: str = "info", fmt: str = "json", secrets: tuple[str, ...] = ()) -> None:
    """Send ``retrybudget`` records to stderr, as JSON lines (``fmt="json"``) or plain text."""
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonLogFormatter(secrets))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logger = logging.getLogger("retrybudget")
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False
