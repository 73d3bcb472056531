"""Per-request overhead of RetryTransport over a bare httpx.HTTPTransport.

Both clients GET one synthetic record from the sandbox provider over real loopback HTTP
(the success path: one attempt, no wait). They run in this one process, interleaved
request by request with the order alternating each round, so drift in the machine's
speed hits both alike. The sandbox runs in a child process by default (a provider is
remote: its work must not compete with the client for this process's GIL);
``--server thread`` serves it from a thread of this process instead.

Reports the median (and p90) per-request time of each and the ratio of the medians
(target: at most 1.03x).

Usage::

    python benchmarks/transport_overhead.py [--requests 3000] [--rounds 10] [--server process]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import httpx

from retrybudget import Policy, Retrier
from retrybudget.integrations.httpx import RetryTransport
from retrybudget.sandbox import serve_in_thread

TARGET = 1.03
PATH = "/rentals/1/availability"


@contextlib.contextmanager
def sandbox_process() -> Iterator[str]:
    """``python -m retrybudget.sandbox`` on a free loopback port; yields its base URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "retrybudget.sandbox", "--port", str(port)]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                if httpx.get(base + "/_health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if child.poll() is not None or time.monotonic() > deadline:
                error = child.stderr.read().decode() if child.stderr else ""
                raise SystemExit(f"the sandbox did not start: {error}")
            time.sleep(0.05)
        yield base
    finally:
        child.terminate()
        child.wait(10)


@contextlib.contextmanager
def sandbox_thread() -> Iterator[str]:
    """The sandbox served by a thread of this process; yields its base URL."""
    with serve_in_thread() as server:
        yield server.base_url


def timed(get: Callable[[], httpx.Response]) -> float:
    """One request, in microseconds; checks it succeeded."""
    start = time.perf_counter_ns()
    response = get()
    elapsed = (time.perf_counter_ns() - start) / 1000
    if response.status_code != 200:
        raise SystemExit(f"unexpected status {response.status_code}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000,
                        help="requests per client (default 3000)")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    parser.add_argument("--warmup", type=int, default=300, help="warm-up requests per client")
    parser.add_argument("--server", choices=("process", "thread"), default="process",
                        help="where the sandbox runs (default: a child process)")
    args = parser.parse_args(argv)
    per_round = max(1, args.requests // args.rounds)
    serve = sandbox_process if args.server == "process" else sandbox_thread

    with serve() as base:
        url = base + PATH
        bare = httpx.Client(transport=httpx.HTTPTransport())
        retry = httpx.Client(transport=RetryTransport(httpx.HTTPTransport(),
                                                      retrier=Retrier(policy=Policy())))
        clients = {"bare HTTPTransport": bare, "RetryTransport": retry}
        samples: dict[str, list[float]] = {name: [] for name in clients}
        with bare, retry:
            for client in clients.values():
                for _ in range(args.warmup):
                    timed(lambda c=client: c.get(url))
            gc.collect()
            names = list(clients)
            for round_ in range(args.rounds):
                order = names if round_ % 2 == 0 else names[::-1]
                for _ in range(per_round):
                    for name in order:
                        samples[name].append(timed(lambda c=clients[name]: c.get(url)))
            stats = retry.get(url).extensions["retrybudget"]  # the success path: one attempt
            if (stats["attempts"], stats["outcome"]) != (1, "ok"):
                raise SystemExit(f"not the success path: {stats}")

    medians = {name: statistics.median(values) for name, values in samples.items()}
    ratio = medians["RetryTransport"] / medians["bare HTTPTransport"]
    print(f"sandbox GET {PATH} (server: {args.server}), {per_round * args.rounds} requests "
          f"per client, {args.rounds} interleaved rounds, Python {sys.version.split()[0]}")
    print(f"{'transport':<20} {'median µs':>10} {'p90 µs':>10}")
    for name, values in samples.items():
        p90 = statistics.quantiles(values, n=10)[-1]
        print(f"{name:<20} {medians[name]:>10.1f} {p90:>10.1f}")
    overhead = medians["RetryTransport"] - medians["bare HTTPTransport"]
    verdict = "within" if ratio <= TARGET else "ABOVE"
    print(f"{'ratio':<20} {ratio:>10.3f}x  (+{overhead:.1f} µs; {verdict} the {TARGET}x target)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
