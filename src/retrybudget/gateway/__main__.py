"""``python -m retrybudget.gateway``: run the reference gateway in the foreground.

Example::

    python -m retrybudget.gateway --provider http://127.0.0.1:8080 --db gateway.sqlite3 \\
        --port 8000 --audit audit.jsonl --provider-header-env Authorization=PROVIDER_AUTH
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import sys
from collections.abc import Sequence

import uvicorn

from .._cmdline import (
    CliError,
    cannot_listen,
    check_new_file,
    check_sqlite_file,
    in_option_words,
    log_level,
    os_reason,
    port,
    positive_float,
    report_bad_input,
    seconds,
    share,
)
from ..core.policy import PolicyError
from ._app import create_app
from ._config import GatewayConfig
from ._logging import configure_logging
from ._server import bind_socket, uvicorn_config
from ._store import TABLES

__all__ = ["build_parser", "config_from_args", "main", "run"]


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected 'Name: value', got {text!r}")
    return name.strip(), value.strip()


def _header_env(text: str) -> tuple[str, str]:
    name, sep, variable = text.partition("=")
    if not sep or not name.strip() or not variable.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=ENV_VARIABLE, got {text!r}")
    return name.strip(), variable.strip()


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The gateway's command-line options, added to ``parser`` (a new one if omitted)."""
    if parser is None:
        parser = argparse.ArgumentParser(
            prog="python -m retrybudget.gateway",
            description="Run the retrybudget reference gateway (rental availability lookups "
                        "and reservations) in front of a provider.",
        )
    parser.add_argument("--provider", required=True, metavar="URL",
                        help="the provider's base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--db", required=True, metavar="PATH",
                        help="SQLite file for stored facts and reservations (created if missing)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    parser.set_defaults(prog=parser.prog)
    parser.add_argument("--port", type=port, default=8000, help="port, 0 for any (default: %(default)s)")
    _add_budget(parser.add_argument_group("budget"))
    _add_client_connections(parser.add_argument_group("client connections"))
    _add_provider_requests(parser.add_argument_group("provider requests"))
    _add_operations(parser.add_argument_group("operations"))
    return parser


def _add_budget(budget: argparse._ArgumentGroup) -> None:
    """The provider operations' budget, breaker and admission options."""
    budget.add_argument("--deadline", type=positive_float, default=2.0,
                        help="seconds per provider operation, waits included (default: %(default)s)")
    budget.add_argument("--attempts", type=int, default=3,
                        help="attempts per lookup at most (default: %(default)s)")
    budget.add_argument("--attempt-timeout", type=seconds, default=1.0,
                        help="seconds one attempt may take, 0 for the deadline alone "
                             "(default: %(default)s)")
    budget.add_argument("--breaker-failures", type=int, default=5,
                        help="failed lookups in a row that open the breaker (default: %(default)s)")
    budget.add_argument("--breaker-failure-ratio", type=share, default=None, metavar="SHARE",
                        help="also open the breaker when this share of the last "
                             "--breaker-window lookups failed (at least 10 seen; default: off)")
    budget.add_argument("--breaker-window", type=int, default=20, metavar="N",
                        help="the lookups --breaker-failure-ratio looks at (default: %(default)s)")
    budget.add_argument("--breaker-cool-down", type=positive_float, default=5.0,
                        help="seconds the breaker stays open before a probe (default: %(default)s)")
    budget.add_argument("--max-in-flight", type=int, default=32,
                        help="provider operations running at once at most; more are answered "
                             "503 gateway_overloaded at once (default: %(default)s)")
    budget.add_argument("--min-budget", type=positive_float, default=0.25,
                        help="seconds of its deadline a request must have left to start a "
                             "provider operation (default: %(default)s)")


def _add_client_connections(server: argparse._ArgumentGroup) -> None:
    """The options on the connections of the gateway's own clients."""
    server.add_argument("--head-timeout", type=positive_float, default=5.0, metavar="SECONDS",
                        help="seconds a connection may take to send a request head; then it is "
                             "answered 408 and closed (default: %(default)s)")
    server.add_argument("--keep-alive-timeout", type=int, default=5, metavar="SECONDS",
                        help="whole seconds an idle kept-alive connection stays open "
                             "(default: %(default)s)")
    server.add_argument("--max-clients", type=int, default=512, metavar="N",
                        help="client connections open at once; one more is answered 503 "
                             "gateway_overloaded and closed (default: %(default)s)")
    server.add_argument("--max-head-size", type=int, default=16_384, metavar="BYTES",
                        help="bytes of a request head at most; a longer one is answered 400 "
                             "(default: %(default)s)")


def _add_provider_requests(provider: argparse._ArgumentGroup) -> None:
    """The headers of every provider request."""
    provider.add_argument("--provider-header", type=_header, action="append", default=[],
                          metavar="'NAME: VALUE'", help="a header for every provider request")
    provider.add_argument("--provider-header-env", type=_header_env, action="append", default=[],
                          metavar="NAME=ENV_VARIABLE",
                          help="a header whose value is read from the environment (for secrets)")


def _add_operations(ops: argparse._ArgumentGroup) -> None:
    """The audit file and the logs."""
    ops.add_argument("--audit", default=None, metavar="PATH",
                     help="JSONL file for one audit record per provider operation")
    ops.add_argument("--log-level", type=log_level, default="info", help="log level (default: %(default)s)")
    ops.add_argument("--log-format", choices=("json", "text"), default="json",
                     help="log line format (default: %(default)s)")


def config_from_args(args: argparse.Namespace) -> GatewayConfig:
    """The :class:`GatewayConfig` described by parsed arguments.

    Raises:
        PolicyError: a value is unusable, or a header's environment variable is unset.
    """
    headers = dict(args.provider_header)
    for name, variable in args.provider_header_env:
        value = os.environ.get(variable)
        if value is None:
            raise PolicyError(f"--provider-header-env {name}={variable}: the environment variable "
                              f"{variable} is not set")
        headers[name] = value
    return GatewayConfig(
        provider=args.provider,
        db_path=args.db,
        deadline=args.deadline,
        max_attempts=args.attempts,
        attempt_timeout=args.attempt_timeout or None,
        provider_headers=headers,
        audit_path=args.audit,
        breaker_failures=args.breaker_failures,
        breaker_cool_down=args.breaker_cool_down,
        max_in_flight=args.max_in_flight,
        min_budget=args.min_budget,
        breaker_failure_ratio=args.breaker_failure_ratio,
        breaker_window=args.breaker_window,
        head_timeout=args.head_timeout,
        keep_alive_timeout=args.keep_alive_timeout,
        max_clients=args.max_clients,
        max_head_size=args.max_head_size,
    )


def run(args: argparse.Namespace) -> int:
    """Serve the gateway described by parsed :func:`build_parser` options until interrupted.

    Prints ``gateway listening on http://HOST:PORT`` once bound. Returns the exit status:
    0 after a normal stop (Ctrl-C; SIGTERM ends the process by that signal once uvicorn has
    shut down gracefully), 2 for unusable options, a database that cannot be opened or an
    address that cannot be bound.
    """
    prog = getattr(args, "prog", "gateway")
    try:
        config = config_from_args(args)
        check_new_file(args.db, "--db", create_dirs=False)
        check_sqlite_file(args.db, "--db", "a gateway database", TABLES)
        if args.audit is not None:
            check_new_file(args.audit, "--audit", create_dirs=False)
    except (PolicyError, ValueError, CliError) as exc:
        return report_bad_input(prog, in_option_words(str(exc), _OPTIONS))
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as exc:
        return report_bad_input(prog, cannot_listen(args.host, args.port, exc))
    try:
        app = create_app(config)
    except (sqlite3.Error, OSError, ValueError) as exc:
        sock.close()
        why = os_reason(exc) if isinstance(exc, OSError) else str(exc)
        return report_bad_input(prog, f"--db {args.db}: cannot open the database: {why}")
    configure_logging(args.log_level, args.log_format, secrets=tuple(config.provider_headers.values()))
    print("gateway listening on http://{}:{}".format(*sock.getsockname()[:2]), flush=True)
    with contextlib.closing(sock), contextlib.suppress(KeyboardInterrupt):
        # uvicorn shuts down gracefully on Ctrl-C, then raises it again: a normal stop
        uvicorn.Server(uvicorn_config(app, log_level=args.log_level, quiet=True)).run(sockets=[sock])
    return 0


_OPTIONS = {"provider": "--provider", "db_path": "--db", "deadline": "--deadline",
            "max_attempts": "--attempts", "attempt_timeout": "--attempt-timeout",
            "breaker_failures": "--breaker-failures", "breaker_cool_down": "--breaker-cool-down",
            "max_in_flight": "--max-in-flight", "min_budget": "--min-budget",
            "provider header": "--provider-header", "audit_path": "--audit",
            "breaker_failure_ratio": "--breaker-failure-ratio", "breaker_window": "--breaker-window",
            "head_timeout": "--head-timeout", "keep_alive_timeout": "--keep-alive-timeout",
            "max_clients": "--max-clients", "max_head_size": "--max-head-size"}


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (``sys.argv[1:]`` if omitted) and :func:`run` the gateway."""
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
