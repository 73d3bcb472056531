"""Per-request overhead of the retry layers: retrybudget's beside its peers.

Modes (``--mode``, default ``all``):

``canned``
    (Timed in this process's CPU time, which other processes' load on a shared machine does
    not inflate the way it does wall time; the loopback and requests modes use wall time.)
    Each transport wraps an inner ``httpx.BaseTransport`` that returns a canned 200 with
    GitHub's five ``x-ratelimit-*`` headers, so only the retry layer's own work is timed, not
    the network. Contenders: the bare canned transport, httpx-retries' ``RetryTransport``
    (3 attempts), retrybudget's ``RetryTransport`` with the default policy, and with
    ``background(profile="github")`` and a ``MemoryCoordinator``. Reported: each layer's
    overhead over the bare canned transport and its ratio to httpx-retries' (targets: at most
    1.5x with the default policy, 3x with github + MemoryCoordinator).
``async``
    The same with the async transports: retrybudget's ``AsyncRetryTransport`` beside
    httpx-retries' transport over an async canned inner transport.
``requests``
    requests over real loopback HTTP: a bare ``HTTPAdapter``, one with urllib3's
    ``Retry(total=3)`` and retrybudget's ``RetryAdapter``; ratios to the bare adapter.
``loopback``
    A client with ``RetryTransport`` beside one with a bare ``httpx.HTTPTransport`` over
    real loopback HTTP (below); target: at most 1.03x.
``async-loopback``
    The same with ``AsyncRetryTransport`` beside a bare ``httpx.AsyncHTTPTransport``, in one
    event loop (each attempt's exchange runs as a task of its own, cut at its end); the
    client's CPU per GET is reported beside the wall time.

Over loopback both clients GET one synthetic record from the sandbox provider over real loopback HTTP
(the success path: one attempt, no wait). They run in this one process, interleaved
request by request with the order alternating each round, so drift in the machine's
speed hits both alike. The sandbox runs in a child process by default (a provider is
remote: its work must not compete with the client for this process's GIL);
``--server thread`` serves it from a thread of this process instead.

Reports the median (and p90) per-request time of each and the ratio of the medians
(target: at most 1.03x).

Usage::

    python benchmarks/transport_overhead.py [--mode all] [--client] [--requests 3000] [--rounds 10]
        [--server process] [--calls 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator

import httpx

from retrybudget import MemoryCoordinator, Policy, Retrier, background
from retrybudget.integrations.httpx import AsyncRetryTransport, RetryTransport
from retrybudget.sandbox import serve_in_thread

TARGET = 1.03
CANNED_DEFAULT_TARGET = 1.5
CANNED_GITHUB_TARGET = 3.0
PATH = "/rentals/1/availability"
CANNED_URL = "https://api.github.com/repos/octo/demo"
GITHUB_HEADERS = [
    (b"content-type", b"application/json"),
    (b"x-ratelimit-limit", b"5000"),
    (b"x-ratelimit-remaining", b"4987"),
    (b"x-ratelimit-reset", str(int(time.time()) + 1800).encode()),
    (b"x-ratelimit-used", b"13"),
    (b"x-ratelimit-resource", b"core"),
]
"""A 200 from GitHub far from its quota: the five quota headers (reset in 30 minutes)."""


class CannedTransport(httpx.BaseTransport):
    """An inner transport that answers every request with a canned GitHub 200 (with the
    extensions httpx's own transport gives a response, which its client reads)."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=GITHUB_HEADERS, content=b"{}", request=request,
                              extensions={"http_version": b"HTTP/1.1", "reason_phrase": b"OK"})


class AsyncCannedTransport(httpx.AsyncBaseTransport):
    """The async twin of :class:`CannedTransport`."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=GITHUB_HEADERS, content=b"{}", request=request,
                              extensions={"http_version": b"HTTP/1.1", "reason_phrase": b"OK"})


class Attaching(httpx.BaseTransport):
    """A yardstick, not a retry layer: it reads the clock around the send and attaches a
    2xx's outcome (a tuple of the two readings) to the response, the least any layer that
    hands an outcome over does. ``holds_response``: the outcome also holds the response, as an
    outcome whose value is the response does; the response and its outcome then hold each
    other, and every response is freed by the cycle collector instead of its reference count.
    """

    def __init__(self, inner: httpx.BaseTransport, *, holds_response: bool) -> None:
        self._inner = inner
        self._holds = holds_response

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        start = time.monotonic()
        response = self._inner.handle_request(request)
        if 200 <= response.status_code < 300:
            outcome = ((start, time.monotonic(), response) if self._holds
                       else (start, time.monotonic()))
            response.extensions = {**response.extensions, "outcome": outcome}
        return response


FLOORS = ("yardstick: outcome attached", "yardstick: outcome holding its response")


def _check_ok(response: httpx.Response) -> None:
    if response.status_code != 200:
        raise SystemExit(f"unexpected status {response.status_code}")


def _overheads(samples: dict[str, list[float]], base: str) -> dict[str, tuple[float, float]]:
    """Each layer's overhead over ``base``: the median of the rounds' paired differences (each
    round times every contender once, so a burst of load hits them alike) and the difference
    of the best rounds (the least disturbed figure on a shared machine)."""
    bare = samples[base]
    return {
        name: (statistics.median(v - b for v, b in zip(values, bare, strict=True)), min(values) - min(bare))
        for name, values in samples.items() if name != base
    }


def _print_canned(title: str, samples: dict[str, list[float]], calls: int, rounds: int,
                  peer: str) -> None:
    over = _overheads(samples, "bare canned transport")
    bare = statistics.median(samples["bare canned transport"])
    print(f"{title}: {rounds} rounds x {calls} requests; µs of overhead per request over the "
          f"bare canned transport ({bare:.1f} µs): median of paired rounds, and best rounds")
    print(f"{'retry layer':<40} {'median µs':>10} {'vs ' + peer:>24} {'best µs':>9} {'ratio':>7}")
    for name, (median, best) in over.items():
        print(f"{name:<40} {median:>10.2f} {_ratio(median, over[peer][0]):>24} {best:>9.2f} "
              f"{_ratio(best, over[peer][1]):>7}")
    for name, target in (("retrybudget, default policy", CANNED_DEFAULT_TARGET),
                         ("retrybudget, github + MemoryCoordinator", CANNED_GITHUB_TARGET)):
        for label, index in (("median", 0), ("best", 1)):
            peer_over = over[peer][index]
            if peer_over <= 0:
                print(f"  {name} ({label}): {peer} measured no overhead: noise, no verdict")
                continue
            ratio = over[name][index] / peer_over
            verdict = "MET" if ratio <= target else "NOT MET"
            print(f"  {name} ({label}): {ratio:.2f}x {peer} (target <= {target}x: {verdict})")
    if FLOORS[1] in over and over[peer][0] > 0:
        print(f"  an outcome that holds its response costs at least "
              f"{over[FLOORS[1]][0] / over[peer][0]:.2f}x {peer} (median; "
              f"{over[FLOORS[0]][0] / over[peer][0]:.2f}x without the response)")


def _ratio(value: float, peer: float) -> str:
    return f"{value / peer:.2f}x" if peer > 0 else "n/a"


def _github_retrier() -> Retrier:
    return Retrier(policy=background(profile="github"), coordinator=MemoryCoordinator())


def run_canned(calls: int, rounds: int, client: bool = False) -> None:
    """Time each sync retry layer over the canned inner transport (``client``: through an
    ``httpx.Client`` over it, as an application calls it)."""
    import httpx_retries

    transports: dict[str, httpx.BaseTransport] = {
        "bare canned transport": CannedTransport(),
        "httpx-retries": httpx_retries.RetryTransport(CannedTransport(),
                                                      retry=httpx_retries.Retry(total=3)),
        "retrybudget, default policy": RetryTransport(CannedTransport(),
                                                      retrier=Retrier(policy=Policy())),
        "retrybudget, github + MemoryCoordinator": RetryTransport(CannedTransport(),
                                                                  retrier=_github_retrier()),
        FLOORS[0]: Attaching(CannedTransport(), holds_response=False),
        FLOORS[1]: Attaching(CannedTransport(), holds_response=True),
    }

    clients = {id(t): httpx.Client(transport=t) for t in transports.values()}

    def batch(transport: httpx.BaseTransport, n: int) -> float:
        if client:
            get = clients[id(transport)].get
            start = time.process_time_ns()
            for _ in range(n):
                get(CANNED_URL)
            return (time.process_time_ns() - start) / n / 1000
        handle = transport.handle_request
        start = time.process_time_ns()
        for _ in range(n):
            handle(httpx.Request("GET", CANNED_URL))
        return (time.process_time_ns() - start) / n / 1000

    for transport in transports.values():
        _check_ok(transport.handle_request(httpx.Request("GET", CANNED_URL)))
        batch(transport, 500)
    samples: dict[str, list[float]] = {name: [] for name in transports}
    gc.collect()
    for round_ in range(rounds):
        names = list(transports) if round_ % 2 == 0 else list(transports)[::-1]
        for name in names:
            samples[name].append(batch(transports[name], calls))
    _print_canned("httpx sync transports over a canned GitHub 200"
                  + (", through an httpx.Client" if client else ""), samples, calls, rounds,
                  "httpx-retries")


def run_async(calls: int, rounds: int, client: bool = False) -> None:
    """Time each async retry layer over the async canned inner transport (``client``: through
    an ``httpx.AsyncClient`` over it)."""
    import httpx_retries

    transports: dict[str, httpx.AsyncBaseTransport] = {
        "bare canned transport": AsyncCannedTransport(),
        "httpx-retries (async)": httpx_retries.RetryTransport(AsyncCannedTransport(),
                                                              retry=httpx_retries.Retry(total=3)),
        "retrybudget, default policy": AsyncRetryTransport(AsyncCannedTransport(),
                                                           retrier=Retrier(policy=Policy())),
        "retrybudget, github + MemoryCoordinator": AsyncRetryTransport(
            AsyncCannedTransport(), retrier=_github_retrier()),
    }

    clients = {id(t): httpx.AsyncClient(transport=t) for t in transports.values()}

    async def batch(transport: httpx.AsyncBaseTransport, n: int) -> float:
        if client:
            get = clients[id(transport)].get
            start = time.process_time_ns()
            for _ in range(n):
                await get(CANNED_URL)
            return (time.process_time_ns() - start) / n / 1000
        handle: Callable[[httpx.Request], Awaitable[httpx.Response]] = \
            transport.handle_async_request
        start = time.process_time_ns()
        for _ in range(n):
            await handle(httpx.Request("GET", CANNED_URL))
        return (time.process_time_ns() - start) / n / 1000

    async def main() -> dict[str, list[float]]:
        for transport in transports.values():
            _check_ok(await transport.handle_async_request(httpx.Request("GET", CANNED_URL)))
            await batch(transport, 500)
        samples: dict[str, list[float]] = {name: [] for name in transports}
        gc.collect()
        for round_ in range(rounds):
            names = list(transports) if round_ % 2 == 0 else list(transports)[::-1]
            for name in names:
                samples[name].append(await batch(transports[name], calls))
        return samples

    _print_canned("httpx async transports over a canned GitHub 200"
                  + (", through an httpx.AsyncClient" if client else ""), asyncio.run(main()),
                  calls, rounds, "httpx-retries (async)")


def run_requests(base: str, per_round: int, rounds: int, warmup: int) -> None:
    """requests over loopback: bare adapter, urllib3 Retry, retrybudget's RetryAdapter."""
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.util.retry import Retry

    from retrybudget.integrations.requests import RetryAdapter

    url = base + PATH
    adapters = {
        "bare HTTPAdapter": HTTPAdapter(),
        "HTTPAdapter + urllib3 Retry(3)": HTTPAdapter(max_retries=Retry(total=3)),
        "retrybudget RetryAdapter": RetryAdapter(Retrier(policy=Policy())),
    }
    sessions = {}
    for name, adapter in adapters.items():
        session = requests.Session()
        session.mount("http://", adapter)
        sessions[name] = session

    cpu: dict[str, list[float]] = {name: [] for name in sessions}

    def one(session: requests.Session, name: str | None = None) -> float:
        start, start_cpu = time.perf_counter_ns(), time.thread_time_ns()
        response = session.get(url, timeout=10)
        elapsed = (time.perf_counter_ns() - start) / 1000
        if name is not None:
            cpu[name].append((time.thread_time_ns() - start_cpu) / 1000)
        if response.status_code != 200:
            raise SystemExit(f"unexpected status {response.status_code}")
        return elapsed

    for session in sessions.values():
        for _ in range(warmup):
            one(session)
    gc.collect()
    samples: dict[str, list[float]] = {name: [] for name in sessions}
    names = list(sessions)
    for round_ in range(rounds):
        order = names if round_ % 2 == 0 else names[::-1]
        for _ in range(per_round):
            for name in order:
                samples[name].append(one(sessions[name], name))
    for session in sessions.values():
        session.close()
    medians = {name: statistics.median(values) for name, values in samples.items()}
    bare = medians["bare HTTPAdapter"]
    print(f"requests GET {PATH} over loopback, {per_round * rounds} requests per session, "
          f"{rounds} interleaved rounds")
    print(f"{'adapter':<32} {'median µs':>10} {'vs bare':>9} {'overhead µs':>12}")
    for name, value in medians.items():
        print(f"{name:<32} {value:>10.1f} {value / bare:>8.3f}x {value - bare:>12.1f}")
    cpus = {name: statistics.median(values) for name, values in cpu.items()}
    bare_cpu = cpus["bare HTTPAdapter"]
    peer = cpus["HTTPAdapter + urllib3 Retry(3)"] - bare_cpu
    print("client CPU µs per request (median), over the bare adapter's:")
    for name, value in cpus.items():
        over = value - bare_cpu
        versus = f"  {over / peer:.2f}x urllib3 Retry's" if peer > 0 and name != "bare HTTPAdapter" else ""
        print(f"  {name:<32} {value:>8.1f} ({value / bare_cpu:.3f}x, +{over:.1f}){versus}")


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


CPU: dict[int, list[float]] = {}
"""This process's CPU µs of each timed request, per client (by id)."""


def timed(get: Callable[[], httpx.Response], client: object = None) -> float:
    """One request, in microseconds of wall time; checks it succeeded. With ``client``, its
    CPU time in this process (the client's own work: the server is another process) is kept
    in :data:`CPU`."""
    cpu = time.process_time_ns()
    start = time.perf_counter_ns()
    response = get()
    elapsed = (time.perf_counter_ns() - start) / 1000
    if client is not None:
        CPU.setdefault(id(client), []).append((time.process_time_ns() - cpu) / 1000)
    if response.status_code != 200:
        raise SystemExit(f"unexpected status {response.status_code}")
    return elapsed


def interleaved(names: list[str], rounds: int, per_round: int) -> Iterator[str]:
    """Whose request comes next: one each in turn, the order alternating each round."""
    for round_ in range(rounds):
        order = names if round_ % 2 == 0 else names[::-1]
        for _ in range(per_round):
            yield from order


GITHUB_LOOPBACK = "RetryTransport, github + MemoryCoordinator"


def run_loopback(base: str, per_round: int, rounds: int, warmup: int, server: str) -> None:
    """RetryTransport beside a bare HTTPTransport over real loopback HTTP."""
    url = base + PATH
    bare = httpx.Client(transport=httpx.HTTPTransport())
    retry = httpx.Client(transport=RetryTransport(httpx.HTTPTransport(),
                                                  retrier=Retrier(policy=Policy())))
    coordinated = httpx.Client(transport=RetryTransport(httpx.HTTPTransport(),
                                                        retrier=_github_retrier()))
    clients = {"bare HTTPTransport": bare, "RetryTransport": retry,
               GITHUB_LOOPBACK: coordinated}
    samples: dict[str, list[float]] = {name: [] for name in clients}
    with bare, retry, coordinated:
        for client in clients.values():
            for _ in range(warmup):
                timed(lambda c=client: c.get(url))
        gc.collect()
        for name in interleaved(list(clients), rounds, per_round):
            samples[name].append(timed(lambda c=clients[name]: c.get(url), clients[name]))
        stats = retry.get(url).extensions["retrybudget"]  # the success path: one attempt
        if (stats["attempts"], stats["outcome"]) != (1, "ok"):
            raise SystemExit(f"not the success path: {stats}")

    medians = {name: statistics.median(values) for name, values in samples.items()}
    print(f"sandbox GET {PATH} (server: {server}), {per_round * rounds} requests "
          f"per client, {rounds} interleaved rounds, Python {sys.version.split()[0]}")
    print(f"{'transport':<36} {'median µs':>10} {'p90 µs':>10}")
    for name, values in samples.items():
        p90 = statistics.quantiles(values, n=10)[-1]
        print(f"{name:<36} {medians[name]:>10.1f} {p90:>10.1f}")
    cpu = {name: statistics.median(CPU[id(client)]) for name, client in clients.items()}
    bare_wall, bare_cpu = medians["bare HTTPTransport"], cpu["bare HTTPTransport"]
    for name in ("RetryTransport", GITHUB_LOOPBACK):
        ratio = medians[name] / bare_wall
        verdict = "MET" if ratio <= TARGET else "NOT MET"
        print(f"ratio, {name:<29} {ratio:>7.3f}x  (+{medians[name] - bare_wall:.1f} µs; "
              f"target <= {TARGET}x: {verdict})")
        print(f"  client CPU µs per request (median): bare {bare_cpu:.1f}, {name} "
              f"{cpu[name]:.1f} (+{cpu[name] - bare_cpu:.1f} µs, {cpu[name] / bare_cpu:.3f}x)")


def run_calls(calls: int) -> None:
    """Python calls per request each retry layer makes over the bare canned transport's own
    (cProfile's count: a figure no machine load moves)."""
    import cProfile
    import pstats

    import httpx_retries

    def counted(handle: Callable[[httpx.Request], object]) -> float:
        for _ in range(50):
            handle(httpx.Request("GET", CANNED_URL))
        requests = [httpx.Request("GET", CANNED_URL) for _ in range(calls)]
        profile = cProfile.Profile()
        profile.enable()
        for request in requests:
            handle(request)
        profile.disable()
        return pstats.Stats(profile).total_calls / calls  # type: ignore[attr-defined,no-any-return]

    def acounted(transport: httpx.AsyncBaseTransport) -> float:
        async def main() -> float:
            for _ in range(50):
                await transport.handle_async_request(httpx.Request("GET", CANNED_URL))
            requests = [httpx.Request("GET", CANNED_URL) for _ in range(calls)]
            profile = cProfile.Profile()
            profile.enable()
            for request in requests:
                await transport.handle_async_request(request)
            profile.disable()
            return pstats.Stats(profile).total_calls / calls  # type: ignore[attr-defined,no-any-return]

        return asyncio.run(main())

    sync: dict[str, httpx.BaseTransport] = {
        "httpx-retries": httpx_retries.RetryTransport(CannedTransport(),
                                                      retry=httpx_retries.Retry(total=3)),
        "retrybudget, default policy": RetryTransport(CannedTransport(),
                                                      retrier=Retrier(policy=Policy())),
        "retrybudget, background() (profile=auto)": RetryTransport(
            CannedTransport(), retrier=Retrier(policy=background())),
        "retrybudget, github + MemoryCoordinator": RetryTransport(CannedTransport(),
                                                                  retrier=_github_retrier()),
    }
    asynchronous: dict[str, httpx.AsyncBaseTransport] = {
        "httpx-retries (async)": httpx_retries.RetryTransport(AsyncCannedTransport(),
                                                              retry=httpx_retries.Retry(total=3)),
        "async retrybudget, default policy": AsyncRetryTransport(
            AsyncCannedTransport(), retrier=Retrier(policy=Policy())),
        "async retrybudget, github + MemoryCoordinator": AsyncRetryTransport(
            AsyncCannedTransport(), retrier=_github_retrier()),
    }
    bare = counted(CannedTransport().handle_request)
    abare = acounted(AsyncCannedTransport())
    print(f"Python calls per request over the bare canned transport's ({bare:.0f} sync, "
          f"{abare:.0f} async), cProfile, {calls} requests")
    for name, transport in sync.items():
        print(f"{name:<48} {counted(transport.handle_request) - bare:>6.0f}")
    for name, atransport in asynchronous.items():
        print(f"{name:<48} {acounted(atransport) - abare:>6.0f}")


def run_async_loopback(base: str, per_round: int, rounds: int, warmup: int,
                       server: str) -> None:
    """AsyncRetryTransport beside a bare AsyncHTTPTransport over real loopback HTTP."""
    url = base + PATH

    async def sample(client: httpx.AsyncClient, wall: list[float], cpu: list[float]) -> None:
        cpu_started = time.process_time_ns()
        started = time.perf_counter_ns()
        response = await client.get(url)
        wall.append((time.perf_counter_ns() - started) / 1000)
        cpu.append((time.process_time_ns() - cpu_started) / 1000)
        if response.status_code != 200:
            raise SystemExit(f"unexpected status {response.status_code}")

    async def run() -> tuple[dict[str, list[float]], dict[str, list[float]]]:
        clients = {"bare AsyncHTTPTransport": httpx.AsyncClient(
                       transport=httpx.AsyncHTTPTransport()),
                   "AsyncRetryTransport": httpx.AsyncClient(transport=AsyncRetryTransport(
                       httpx.AsyncHTTPTransport(), retrier=Retrier(policy=Policy())))}
        wall: dict[str, list[float]] = {name: [] for name in clients}
        cpu: dict[str, list[float]] = {name: [] for name in clients}
        for client in clients.values():
            for _ in range(warmup):
                await sample(client, [], [])
        gc.collect()
        for name in interleaved(list(clients), rounds, per_round):
            await sample(clients[name], wall[name], cpu[name])
        stats = (await clients["AsyncRetryTransport"].get(url)).extensions["retrybudget"]
        if (stats["attempts"], stats["outcome"]) != (1, "ok"):
            raise SystemExit(f"not the success path: {stats}")
        for client in clients.values():
            await client.aclose()
        return wall, cpu

    wall, cpu = asyncio.run(run())
    print(f"sandbox GET {PATH} (server: {server}), async, {per_round * rounds} requests "
          f"per client, {rounds} interleaved rounds, Python {sys.version.split()[0]}")
    print(f"{'transport':<24} {'median µs':>10} {'p90 µs':>10} {'CPU mean µs':>12}")
    for name, values in wall.items():
        p90 = statistics.quantiles(values, n=10)[-1]
        print(f"{name:<24} {statistics.median(values):>10.1f} {p90:>10.1f} "
              f"{statistics.fmean(cpu[name]):>12.1f}")
    bare, retry = "bare AsyncHTTPTransport", "AsyncRetryTransport"
    ratio = statistics.median(wall[retry]) / statistics.median(wall[bare])
    cpu_ratio = statistics.fmean(cpu[retry]) / statistics.fmean(cpu[bare])
    verdict = "MET" if ratio <= TARGET else "NOT MET"
    print(f"{'ratio':<24} {ratio:>10.3f}x wall, {cpu_ratio:.3f}x CPU "
          f"(+{statistics.fmean(cpu[retry]) - statistics.fmean(cpu[bare]):.1f} µs CPU; "
          f"target <= {TARGET}x: {verdict})")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mode", choices=("all", "canned", "async", "calls", "requests",
                                           "loopback", "async-loopback"),
                        default="all", help="what to time (default: all)")
    parser.add_argument("--calls", type=int, default=5000,
                        help="requests per round in the canned modes (default 5000)")
    parser.add_argument("--requests", type=int, default=3000,
                        help="requests per client (default 3000)")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    parser.add_argument("--warmup", type=int, default=300, help="warm-up requests per client")
    parser.add_argument("--server", choices=("process", "thread"), default="process",
                        help="where the sandbox runs (default: a child process)")
    parser.add_argument("--client", action="store_true",
                        help="canned and async modes: send through an httpx.Client / "
                             "AsyncClient over each transport (as an application calls it)")
    args = parser.parse_args(argv)
    per_round = max(1, args.requests // args.rounds)
    serve = sandbox_process if args.server == "process" else sandbox_thread
    if args.mode in ("all", "canned"):
        run_canned(args.calls, args.rounds, args.client)
    if args.mode in ("all", "async"):
        run_async(args.calls, args.rounds, args.client)
    if args.mode in ("all", "calls"):
        run_calls(min(args.calls, 1000))
    if args.mode in ("all", "requests", "loopback", "async-loopback"):
        with serve() as base:
            if args.mode in ("all", "loopback"):
                run_loopback(base, per_round, args.rounds, args.warmup, args.server)
            if args.mode in ("all", "async-loopback"):
                run_async_loopback(base, per_round, args.rounds, args.warmup, args.server)
            if args.mode in ("all", "requests"):
                run_requests(base, per_round, args.rounds, args.warmup)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
