"""``python -m retrybudget.sandbox``: run the sandbox provider in the foreground.

Example::

    python -m retrybudget.sandbox --port 8080 --limit 20 --window 1 --style github \\
        --fault-5xx 0.2 --seed 1 --fixtures acceptance.json
    python -m retrybudget.sandbox --port 8080 --llm-rpm 60 --llm-tpm 30000 --llm-window 2
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import get_args

import uvicorn

from retrybudget._cmdline import (
    cannot_listen,
    count,
    in_option_words,
    log_level,
    os_reason,
    port,
    positive_int,
    report_bad_input,
    seconds,
    share,
)
from retrybudget._fixtures import FixtureError, load_fixture_file
from retrybudget.sandbox._app import create_app
from retrybudget.sandbox._config import Faults, LlmLimits, RateLimit, RateLimitStyle, SandboxConfig
from retrybudget.sandbox._server import bind_loopback, uvicorn_config

__all__ = ["build_parser", "config_from_args", "main", "run"]

_STYLES = get_args(RateLimitStyle)  # the styles the configuration takes, in its order


def _outage(text: str) -> tuple[float, float]:
    try:
        start, end = (float(part) for part in text.split(":", 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:END in seconds, got {text!r}") from None
    return start, end


def _statuses(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected statuses like 502,503, got {text!r}") from None


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The sandbox's command-line options, added to ``parser`` (a new one if omitted)."""
    if parser is None:
        parser = argparse.ArgumentParser(
            prog="python -m retrybudget.sandbox",
            description="Run the retrybudget sandbox provider (a synthetic HTTP API) on loopback.",
        )
    parser.add_argument("--host", default="127.0.0.1", help="loopback address (default: %(default)s)")
    parser.set_defaults(prog=parser.prog)
    parser.add_argument("--port", type=port, default=8080, help="port, 0 for any (default: %(default)s)")
    parser.add_argument("--rentals", type=count, default=100, help="synthetic records (default: %(default)s)")
    _add_limits(parser.add_argument_group("rate limits"))
    _add_faults(parser.add_argument_group("faults"))
    _add_llm(parser.add_argument_group(
        "LLM routes (POST /v1/chat/completions, POST /v1/messages)"))
    parser.add_argument(
        "--fixtures", default=None, help="fixture file (acceptance.json format) for run 'default'"
    )
    parser.add_argument("--log-level", type=log_level, default="warning",
                        help="uvicorn log level (default: %(default)s)")
    return parser


def _add_limits(limits: argparse._ArgumentGroup) -> None:
    """The rate-limit options."""
    limits.add_argument("--limit", type=count, default=None, help="requests per window (default: no limit)")
    limits.add_argument("--window", type=positive_int, default=60,
                        help="window in seconds (default: %(default)s)")
    limits.add_argument("--style", choices=_STYLES, default="github", help="how limits are signalled")
    limits.add_argument(
        "--github-403",
        action="store_true",
        help="github style: 403 with remaining 0, no Retry-After",
    )
    limits.add_argument(
        "--max-concurrent", type=positive_int, default=None, help="secondary limit on in-flight requests"
    )
    limits.add_argument(
        "--secondary-status",
        type=int,
        choices=(403, 429),
        default=403,
        help="status for the secondary limit",
    )


def _add_faults(faults: argparse._ArgumentGroup) -> None:
    """The fault options."""
    faults.add_argument("--seed", type=int, default=0, help="fault seed (default: %(default)s)")
    faults.add_argument("--fault-5xx", type=share, default=0.0, help="share of injected 5xx answers")
    faults.add_argument("--fault-statuses", type=_statuses, default=(503,), help="5xx statuses, e.g. 502,503")
    faults.add_argument("--fault-reset", type=share, default=0.0, help="share of reset connections")
    faults.add_argument("--fault-malformed", type=share, default=0.0, help="share of malformed 200 bodies")
    faults.add_argument("--fault-slow-body", type=share, default=0.0,
                        help="share of answers whose body trickles in one byte at a time")
    faults.add_argument("--slow-body-seconds", type=seconds, default=3.0,
                        help="how long a slow body takes (default: %(default)s)")
    faults.add_argument("--latency", type=seconds, default=0.0, help="added latency in seconds")
    faults.add_argument("--latency-jitter", type=seconds, default=0.0,
                        help="extra random latency in seconds")
    faults.add_argument(
        "--outage",
        type=_outage,
        action="append",
        default=[],
        metavar="START:END",
        help="seconds after start during which everything is 503 (repeatable)",
    )


def _add_llm(llm: argparse._ArgumentGroup) -> None:
    """The LLM routes' window options."""
    llm.add_argument("--llm-rpm", type=positive_int, default=None,
                     help="requests per LLM window (default: no limit)")
    llm.add_argument("--llm-tpm", type=positive_int, default=None,
                     help="tokens per LLM window (default: no limit)")
    llm.add_argument("--llm-input-tpm", type=positive_int, default=None,
                     help="input tokens per LLM window (default: no limit)")
    llm.add_argument("--llm-output-tpm", type=positive_int, default=None,
                     help="output tokens per LLM window (default: no limit)")
    llm.add_argument("--llm-window", type=positive_int, default=60,
                     help="LLM window in seconds (default: %(default)s)")
    llm.add_argument("--llm-output-share", type=share, default=1.0,
                     help="share of max_tokens an answer produces (default: %(default)s)")


def config_from_args(args: argparse.Namespace) -> SandboxConfig:
    """The :class:`SandboxConfig` described by parsed arguments (raises ``ValueError``)."""
    rate_limit = None
    if args.limit is not None and args.style != "none":
        rate_limit = RateLimit(
            limit=args.limit, window_s=args.window, style=args.style, github_403=args.github_403
        )
    faults = Faults(
        seed=args.seed,
        error_rate=args.fault_5xx,
        error_statuses=tuple(args.fault_statuses),
        latency_s=args.latency,
        latency_jitter_s=args.latency_jitter,
        reset_rate=args.fault_reset,
        malformed_rate=args.fault_malformed,
        slow_body_rate=args.fault_slow_body,
        slow_body_s=args.slow_body_seconds,
        outages=tuple(args.outage),
    )
    return SandboxConfig(
        rentals=args.rentals,
        rate_limit=rate_limit,
        max_concurrent=args.max_concurrent,
        secondary_status=args.secondary_status,
        faults=faults,
        llm=LlmLimits(rpm=args.llm_rpm, tpm=args.llm_tpm, input_tpm=args.llm_input_tpm,
                      output_tpm=args.llm_output_tpm, window_s=args.llm_window,
                      output_share=args.llm_output_share),
    )


_OPTIONS = {"error_rate": "--fault-5xx", "reset_rate": "--fault-reset",
            "malformed_rate": "--fault-malformed", "error_statuses": "--fault-statuses",
            "latency_jitter_s": "--latency-jitter", "latency_s": "--latency", "outage": "--outage",
            "max_concurrent": "--max-concurrent", "rentals": "--rentals", "window_s": "--window",
            "limit": "--limit"}


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (``sys.argv[1:]`` if omitted) and :func:`run` the sandbox."""
    return run(build_parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Serve the sandbox described by parsed :func:`build_parser` options until interrupted.

    Prints ``sandbox listening on http://HOST:PORT`` once bound. Returns the exit
    status: 0 after a normal stop, 2 for bad options or an unusable fixture file.
    """
    prog = getattr(args, "prog", "sandbox")
    try:
        config = config_from_args(args)
    except ValueError as exc:
        return report_bad_input(prog, in_option_words(str(exc), _OPTIONS))
    try:
        fixtures = load_fixture_file(args.fixtures) if args.fixtures else None
    except FileNotFoundError:
        return report_bad_input(prog, f"--fixtures {args.fixtures}: no such file")
    except (FixtureError, OSError, UnicodeDecodeError) as exc:
        why = os_reason(exc) if isinstance(exc, OSError) else str(exc)
        return report_bad_input(prog, f"--fixtures {why}" if isinstance(exc, FixtureError) else
                    f"--fixtures {args.fixtures}: cannot read: {why}")
    app = create_app(config, fixtures=fixtures)
    try:
        sock = bind_loopback(args.host, args.port)
    except ValueError as exc:
        return report_bad_input(prog, f"--host {args.host}: {exc}")
    except OSError as exc:
        return report_bad_input(prog, cannot_listen(args.host, args.port, exc))
    host, port = sock.getsockname()[:2]
    print(f"sandbox listening on http://{host}:{port}", flush=True)
    server = uvicorn.Server(uvicorn_config(app, log_level=args.log_level))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
