"""Entry point of the ``retrybudget`` command.

Each command's module is imported only when that command runs, so ``offline-demo`` and
``report`` work without the ``cli`` extra (rich, httpx, the sandbox's server).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from .._clock import SYSTEM_CLOCK, Clock, FakeClock
from .._cmdline import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, CliError
from ..acceptance import load_cases, run_offline
from . import _options

__all__ = ["build_parser", "closed_stdout", "main", "offline_demo"]

_INTERRUPTED = 130
_BROKEN_PIPE = 1  # as rich's console and Python's own guide end on a closed pipe
_EXTRAS = frozenset({"rich", "httpx", "starlette", "uvicorn", "redis"})


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: error: MESSAGE (see PROG --help)`` and exit with status 2."""
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


Subparsers = argparse._SubParsersAction  # argparse exposes no public name for it


def _add(sub: Subparsers[_Parser], name: str, help_: str, description: str,
         example: str) -> _Parser:
    parser: _Parser = sub.add_parser(name, help=help_, description=textwrap.fill(description, 88),
                                     epilog=example, formatter_class=_formatter)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``retrybudget`` command."""
    parser = _Parser(
        prog="retrybudget",
        description="Bounded, provider-aware retries for third-party HTTP APIs.",
        epilog="examples:\n  retrybudget demo\n  retrybudget fetch urls.txt --workers 8\n"
               "  retrybudget check --policy my-policy.toml\n\n"
               "Run 'retrybudget COMMAND --help' for a command's options and an example.",
        formatter_class=_formatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    demo = _add(sub, "demo", "run the main job against a rate-limited sandbox, with a report",
                "Start the sandbox provider with a rate limit and seeded faults, fetch a list "
                "of rental availability URLs with several coordinated workers, show live "
                "progress, then print a report and write results, audit and a chart.",
                _options.DEMO_EXAMPLE)
    _options.add_demo_arguments(demo)
    fetch = _add(sub, "fetch", "GET every URL of a file with bounded, coordinated retries",
                 "Fetch every URL of INPUT with bounded, provider-aware, coordinated retries. "
                 "Durable: the state file makes every run resumable, even after kill -9.",
                 _options.FETCH_EXAMPLE)
    _options.add_fetch_arguments(fetch)
    check = _add(sub, "check", "run the acceptance checklist against the sandbox",
                 "Run the acceptance checklist over real loopback HTTP against the sandbox "
                 "provider, through the httpx transport: every acceptance case and every rule "
                 "of the contract, each with its expected behaviour, actual behaviour and "
                 "evidence. Exits 1 when any safeguard is absent.",
                 _options.CHECK_EXAMPLE)
    _options.add_check_arguments(check)
    _add_report(sub)
    _add_servers(sub)
    _add_offline_demo(sub)
    _add_queue(sub)
    _add_review(sub)
    return parser


def _add_report(sub: Subparsers[_Parser]) -> None:
    """``report AUDIT.jsonl…``: its files, ``--json`` or ``--html FILE``."""
    report = _add(sub, "report", "summarize the review of an audit file (or print it as JSON)",
                  "Read an audit JSONL file and print a short summary of its review: outcomes, "
                  "waits and who asked for them, throttled answers, the checklist's results and "
                  "the steps proposed to a reviewer. --json prints the whole review report "
                  "(observed facts with their sources, missing inputs, proposed steps, the "
                  "checklist, whether review is required, an explanation); --html writes a "
                  "self-contained HTML report with a timeline and a table per operation.",
                  "examples:\n  retrybudget report out/demo-audit.jsonl\n"
                  "  retrybudget report host-a/out/rentals.audit.jsonl host-b/out/rentals.audit.jsonl\n"
                  "  retrybudget report out/demo-audit.jsonl --json > review.json\n"
                  "  retrybudget report out/demo-audit.jsonl --html out/review.html")
    report.add_argument("audit", metavar="AUDIT.jsonl", nargs="+",
                        help="an audit file (JSON lines); several (each fetch process of one "
                             "job writes its own) are merged: ordered by recording time, a "
                             "record in more than one file kept once")
    shape = report.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="print the whole review report as JSON")
    shape.add_argument("--html", metavar="FILE", default=None,
                       help="write a self-contained HTML report (timeline and per-operation table)")


def _add_servers(sub: Subparsers[_Parser]) -> None:
    """``sandbox`` and ``gateway``: each server's own options (from its package)."""
    sandbox = _add(sub, "sandbox", "serve the sandbox provider (a synthetic HTTP API)",
                   "Serve the sandbox provider on loopback: synthetic rentals, scripted "
                   "fixtures, rate limits in GitHub / IETF / Retry-After styles and seeded "
                   "faults. Stop it with Ctrl-C.",
                   "example:\n  retrybudget sandbox --port 8080 --limit 20 --window 1 "
                   "--fault-5xx 0.1 --seed 1")
    _server_options(sandbox, _sandbox_module)
    gateway = _add(sub, "gateway", "serve the reference gateway in front of a provider",
                   "Serve the reference gateway: rental availability lookups (interactive "
                   "contract: 3 attempts in one short deadline, 429 fails fast) and "
                   "reservations (never replayed), in front of a provider.",
                   "example:\n  retrybudget gateway --provider http://127.0.0.1:8080 "
                   "--db gateway.sqlite3 --port 8000")
    _server_options(gateway, _gateway_module)


def _add_offline_demo(sub: Subparsers[_Parser]) -> None:
    """``offline-demo``: the acceptance cases against an in-process provider."""
    offline = _add(sub, "offline-demo",
                   "play the acceptance cases against an in-process scripted provider",
                   "Play every public acceptance case against an in-process scripted provider "
                   "(no network) and print attempts, waits and the outcome of each.",
                   "example:\n  retrybudget offline-demo --real-time")
    offline.add_argument("--real-time", action="store_true",
                         help="sleep for real instead of on a simulated clock")


def _add_queue(sub: Subparsers[_Parser]) -> None:
    """``queue``: its actions (from the queue command's module)."""
    queue = _add(sub, "queue", "watch a job's queue and its leases, requeue its dead letters, "
                 "release a dead worker's leases, export its results",
                 "Inspect the queue of a fetch job: a state file, or a Redis URL with --job.",
                 "examples:\n  retrybudget queue status out/rentals.sqlite\n"
                 "  retrybudget queue requeue redis://127.0.0.1:6379/0 --job rentals\n"
                 "  retrybudget queue release redis://127.0.0.1:6379/0 --job rentals --dead\n"
                 "  retrybudget queue export out/rentals.sqlite --out results.jsonl")
    _queue_module().add_arguments(queue)


def _add_review(sub: Subparsers[_Parser]) -> None:
    """``review``: ``list`` and ``decide`` (from the review command's module)."""
    review = _add(sub, "review", "list what awaits a reviewer's decision, record one (a retry "
                  "requeued)",
                  "List the operations of an audit file that await a reviewer's decision, or "
                  "append one (accept, reject or retry, with the time); a retry given --queue "
                  "goes back on the job's queue. 'retrybudget report' then reflects it.",
                  "examples:\n  retrybudget review list out/rentals.audit.jsonl\n"
                  "  retrybudget review decide out/rentals.audit.jsonl line-3 "
                  "--decision retry --reviewer dana --note 'provider fixed the record' "
                  "--queue out/rentals.sqlite")
    _review_module().add_arguments(review)


def _review_module() -> Any:
    from . import _review  # noqa: PLC0415

    return _review


def _queue_module() -> Any:
    from . import _queue  # noqa: PLC0415

    return _queue


def _server_options(parser: _Parser, module: Callable[[], Any]) -> None:
    """Add a server command's own options; without its extra, say which one to install."""
    try:
        module().build_parser(parser)
    except ImportError as exc:
        parser.set_defaults(missing_extra=exc.name)


def _sandbox_module() -> Any:
    from ..sandbox import __main__ as sandbox_main  # noqa: PLC0415 - needs the server extra

    return sandbox_main


def _gateway_module() -> Any:
    from ..gateway import __main__ as gateway_main  # noqa: PLC0415 - needs the server extra

    return gateway_main


def offline_demo(*, real_time: bool = False) -> int:
    """Print each acceptance case's attempts, waits and outcome; 0 when all pass."""
    cases = load_cases()
    failed = 0
    clock_name = "real time" if real_time else "simulated time (the waits are computed, not slept)"
    print(f"retrybudget: {len(cases)} scripted provider cases, {clock_name}\n")
    print(f"{'case':5} {'outcome':16} {'att':>3} {'requests':>8}  {'waits':28} title")
    for case in cases:
        clock: Clock = SYSTEM_CLOCK if real_time else FakeClock()
        result = run_offline(case, clock=clock)
        waits = ", ".join(f"{w.seconds:.2f}s {w.reason.value}" for w in result.outcome.waits) or "-"
        mark = "ok" if result.passed else "FAIL"
        print(f"{case.id:5} {result.outcome.reason.value:16} {result.outcome.attempts:>3} "
              f"{result.requests:>8}  {waits[:28]:28} {case.title} [{mark}]")
        failed += not result.passed
    print(f"\n{len(cases) - failed} passed, {failed} failed")
    return EXIT_FAILED if failed else EXIT_OK


def _console() -> Any:
    from rich.console import Console  # noqa: PLC0415 - rich is the cli extra

    return Console(highlight=False, soft_wrap=True)


def _report(args: argparse.Namespace) -> int:
    from . import _report  # noqa: PLC0415

    return _report.run(args)


def _fetch(args: argparse.Namespace) -> int:
    from . import _fetch  # noqa: PLC0415

    return _fetch.run(args, _console())


def _demo(args: argparse.Namespace) -> int:
    from . import _demo  # noqa: PLC0415

    return _demo.run(args, _console())


def _check(args: argparse.Namespace) -> int:
    from . import _check  # noqa: PLC0415

    return _check.run(args, _console())


def _sandbox(args: argparse.Namespace) -> int:
    result: int = _sandbox_module().run(args)
    return result


def _gateway(args: argparse.Namespace) -> int:
    result: int = _gateway_module().run(args)
    return result


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "demo": _demo,
    "fetch": _fetch,
    "check": _check,
    "report": _report,
    "sandbox": _sandbox,
    "gateway": _gateway,
    "offline-demo": lambda args: offline_demo(real_time=args.real_time),
    "queue": lambda args: int(_queue_module().run(args)),
    "review": lambda args: int(_review_module().run(args)),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``retrybudget`` command; returns the exit status (2 for bad input).

    A reader that closes stdout early (``retrybudget report AUDIT | head -3``) ends the
    command quietly, without a traceback, whatever it was printing (help text included).
    """
    try:
        try:
            return _main(argv)
        finally:  # here, where a closed pipe is caught, not at the interpreter's exit
            sys.stdout.flush()
    except BrokenPipeError:
        return closed_stdout()


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_BAD_INPUT
    missing = getattr(args, "missing_extra", None)
    if missing is not None:
        print(f"retrybudget {args.command}: needs {missing}: pip install 'retrybudget[cli]'",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        status = _COMMANDS[args.command](args)
    except ModuleNotFoundError as exc:
        if exc.name not in _EXTRAS:
            raise
        print(f"retrybudget {args.command}: needs {exc.name}: pip install 'retrybudget[cli]'",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    except CliError as exc:
        print(f"retrybudget {args.command}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"retrybudget {args.command}: interrupted; run it again to resume", file=sys.stderr)
        return _INTERRUPTED
    return status


def closed_stdout() -> int:
    """The reader of stdout went away (``| head``): end quietly, as ``cat`` does.

    What is still buffered for stdout is dropped (stdout now writes to the null device, so
    Python's own flush at exit raises nothing); the exit status is 1, as when rich's console
    meets the closed pipe first.
    """
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return _BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
