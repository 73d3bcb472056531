"""Machine instructions per request of each retry layer's success path, counted, not timed.

Each contender sends requests through the canned transport of ``transport_overhead.py`` (a
GitHub 200, no network) in a child process run under valgrind's callgrind, which counts every
instruction the interpreter executes: twice, with no request and with ``--requests N``, so
start-up cancels out. The counts do not move with the machine's load (hash randomisation
is fixed), so a change of a few hundred instructions per request shows, where a timed
figure on a shared machine drifts by more than that. What instructions cost in time
varies (memory traffic is not counted): the timed ratios of ``transport_overhead.py
--mode canned`` are the targets; this is where a change starts from.

Reported per request, for the transport called itself (what ``--mode canned`` times) and
through an ``httpx.Client`` over it (how an application calls it): each layer's instructions
over the bare canned transport's and the ratio to httpx-retries'. The two yardsticks of
``transport_overhead.py`` (an outcome attached; an outcome that holds its response) show
what handing an outcome over costs at least; through a client the response is in a
reference cycle already (httpx's stream holds it), so holding it adds nothing there.
Needs ``valgrind`` on the PATH (``apt-get install valgrind``); about four minutes.

Run: python benchmarks/instructions.py [--requests N]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CONTENDERS = (
    "bare canned transport",
    "httpx-retries",
    "retrybudget, default policy",
    "retrybudget, github + MemoryCoordinator",
    "yardstick: outcome attached",
    "yardstick: outcome holding its response",
)
PEER = "httpx-retries"
COLLECTED = re.compile(r"Collected : (\d+)")


def _transport(name: str) -> object:
    """The contender ``name``, built as ``transport_overhead.py --mode canned`` builds it."""
    import httpx_retries

    import transport_overhead as bench
    from retrybudget import Policy, Retrier
    from retrybudget.integrations.httpx import RetryTransport

    made = {
        "bare canned transport": bench.CannedTransport,
        PEER: lambda: httpx_retries.RetryTransport(bench.CannedTransport(),
                                                   retry=httpx_retries.Retry(total=3)),
        "retrybudget, default policy": lambda: RetryTransport(bench.CannedTransport(),
                                                              retrier=Retrier(policy=Policy())),
        "retrybudget, github + MemoryCoordinator": lambda: RetryTransport(
            bench.CannedTransport(), retrier=bench._github_retrier()),
        "yardstick: outcome attached": lambda: bench.Attaching(bench.CannedTransport(),
                                                               holds_response=False),
        "yardstick: outcome holding its response": lambda: bench.Attaching(
            bench.CannedTransport(), holds_response=True),
    }
    return made[name]()


def child(name: str, requests: int, client: bool) -> None:
    """Send 200 warm-up requests, then ``requests`` more (what the count covers): to the
    transport itself, or through an ``httpx.Client`` over it (``client``)."""
    import httpx

    sys.path.insert(0, str(Path(__file__).parent))
    transport = _transport(name)
    url = "https://api.github.com/repos/octo/demo"
    if client:
        get = httpx.Client(transport=transport).get  # type: ignore[arg-type]
        for _ in range(200 + requests):
            get(url)
        return
    handle = transport.handle_request  # type: ignore[attr-defined]
    for _ in range(200):
        handle(httpx.Request("GET", url))
    for _ in range(requests):
        handle(httpx.Request("GET", url))


def _count(valgrind: str, name: str, requests: int, client: bool) -> int:
    """The instructions a child sending ``requests`` requests through ``name`` executes."""
    run = subprocess.run(
        [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         __file__, "--child", name, "--requests", str(requests),
         *(["--client"] if client else [])],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "PYTHONHASHSEED": "0"})
    found = COLLECTED.search(run.stderr)
    if run.returncode != 0 or found is None:
        raise SystemExit(f"the count of {name!r} failed: {run.stderr.strip()[-300:]}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    """Count each contender and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests counted")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        child(args.child, args.requests, args.client)
        return 0
    if args.requests < 1:
        print("instructions: --requests must be at least 1", file=sys.stderr)
        return 2
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("instructions: valgrind is not on the PATH (apt-get install valgrind)",
              file=sys.stderr)
        return 2
    jobs = [(name, n, client) for client in (False, True) for name in CONTENDERS
            for n in (0, args.requests)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        counts = dict(zip(jobs, pool.map(lambda job: _count(valgrind, *job), jobs), strict=True))
    for client, how in ((False, "the transport called"), (True, "through an httpx.Client")):
        per = {name: (counts[name, args.requests, client] - counts[name, 0, client])
               / args.requests for name in CONTENDERS}
        bare = per[CONTENDERS[0]]
        peer = per[PEER] - bare
        print(f"Instructions per request over the canned GitHub 200, {how} ({args.requests} "
              f"requests, callgrind); the bare canned transport: {bare:,.0f}")
        print(f"{'retry layer':<42} {'instructions':>12} {'vs ' + PEER:>18}")
        for name in CONTENDERS[1:]:
            over = per[name] - bare
            print(f"{name:<42} {over:>12,.0f} {over / peer:>17.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
