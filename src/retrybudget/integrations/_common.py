"""What the HTTP integrations share, written once.

An integration (httpx's two transports, requests' adapter) only sends, reads and closes.
Everything else is here: the provider key, the request's description for the flow, the
method rules and idempotency keys, reading a response into an observation (with the
payload validator), the attempt's absolute end that bounds the whole exchange (connect,
status line, headers and the body read), and turning an outcome into what the caller gets:
the final response with the operation's stats attached, or a typed error that is also the
HTTP library's own.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Awaitable, Callable, Hashable, Mapping, MutableMapping
from functools import lru_cache
from typing import Any, ParamSpec, Protocol, TypeVar, cast

from .._drivers import Retrier, coordinated_first, quick_first, validated
from .._native import (
    EVIDENCE,
    OUTCOME,
    OUTCOME_ATTRIBUTE,
    RETRY_COUNT_HEADER,
    Carried,
    evidence,
    outcome_of,
    sdk_retries_taken,
)
from ..core.actions import Attempt, AttemptResult, RequestInfo
from ..core.classify import MESSAGE_LIMIT, FailureKind, FailureSeen, ResponseSeen, ok_unread
from ..core.headers import normalize_headers
from ..core.outcome import Outcome, Reason
from ..core.policy import Policy, Validator
from ..core.profiles import Profile
from ..errors import RetryBudgetError, error_for
from ..observe import logs_steps, redact_url
from ._deadline import Deadline

__all__ = [
    "IDEMPOTENCY_HEADER",
    "JOB_ID",
    "OUTCOME",
    "OUTCOME_ATTRIBUTE",
    "REDIRECTS",
    "RETRY_COUNT_HEADER",
    "STATS",
    "STATS_ATTRIBUTE",
    "VALIDATOR",
    "Described",
    "Engine",
    "ErrorTable",
    "Operation",
    "ResponseLike",
    "UnreadShape",
    "asend_with_outcome",
    "key_of_url",
    "outcome_of",
    "provider_key",
    "safe_url",
    "send_with_outcome",
    "stats_of",
]

P = ParamSpec("P")
R = TypeVar("R")

IDEMPOTENCY_HEADER = "Idempotency-Key"
"""The request header that makes a write safe to send again."""

STATS = "retrybudget"
"""Where the operation's stats dict is attached to the final response."""

STATS_ATTRIBUTE = "retrybudget"
"""The attribute of a requests response that holds the stats dict."""

VALIDATOR = "retrybudget.validator"
"""The httpx request extension that carries a per-request payload validator."""

JOB_ID = "retrybudget.job_id"
"""The httpx request extension that carries the caller's job or fixture id, for audit."""

REDIRECTS = frozenset(range(300, 400))
"""3xx answers end an operation as ok (an integration's ``redirects_ok=True``, the default):
the client above the integration follows redirects."""

_DEFAULT_PORTS = {"http": 80, "https": 443}
_ANY_METHOD = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE", "POST", "PATCH",
                         "CONNECT"})
_NO_CONTENT = frozenset({204, 205})
_AUTHORITY = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://(?:[^/?#@]*@)?([^/?#]*)")

ErrorTable = Mapping[Reason, type[RetryBudgetError]]
"""The exception class an integration raises for each outcome reason."""


class ResponseLike(Protocol):
    """What the shared code reads from httpx's and requests' responses alike."""

    status_code: int

    @property
    def text(self) -> str:
        """The body as text (only read once the body has been read)."""


@lru_cache(maxsize=1024)
def provider_key(scheme: str, netloc: str) -> str:
    """The default provider key: ``scheme://host[:port]`` (no userinfo, no default port)."""
    host = netloc.rpartition("@")[2].lower()
    scheme = scheme.lower()
    default = _DEFAULT_PORTS.get(scheme)
    if default is not None and host.endswith(f":{default}"):
        host = host[: -len(str(default)) - 1]
    return f"{scheme}://{host}"


def key_of_url(url: str) -> str:
    """The default provider key of an absolute URL (``"default"`` for anything else)."""
    match = _AUTHORITY.match(url)
    return "default" if match is None else provider_key(match[1], match[2])


def safe_url(url: str) -> str:
    """``url`` as a request's description keeps it (its secrets redacted)."""
    # redact_url parses and re-encodes; a URL with no query, userinfo or fragment has no secret.
    return redact_url(url) if ("?" in url or "@" in url or "#" in url) else url


def stats_of(response: object) -> dict[str, Any] | None:
    """The stats of the operation that produced ``response`` (httpx or requests), or None.

    httpx: ``response.extensions["retrybudget"]``; requests: ``response.retrybudget``.
    """
    extensions = getattr(response, "extensions", None)
    found = extensions.get(STATS) if isinstance(extensions, Mapping) else None
    if found is None:
        found = getattr(response, STATS_ATTRIBUTE, None)
    return cast("dict[str, Any] | None", found)


def _carried(error: Exception) -> Outcome[object]:
    """The outcome an error carries; an error raised before any operation propagates."""
    outcome = outcome_of(error)
    if outcome is None:
        raise error
    return outcome


def _ended(outcome: Outcome[object] | None, response: R) -> tuple[Outcome[object], R]:
    if outcome is None:
        raise TypeError("the response carries no retrybudget outcome: send it through a "
                        "retrybudget transport, adapter or middleware")
    return outcome, response


def send_with_outcome(send: Callable[P, R], /, *args: P.args,
                      **kwargs: P.kwargs) -> tuple[Outcome[object], R | None]:
    """Send through an integration: the operation's outcome, and the response it handed over.

    ``send(*args, **kwargs)`` sends one request through a retrybudget integration (an
    ``httpx.Client`` with a ``RetryTransport``, a ``requests.Session`` with a
    ``RetryAdapter``…). Every ending comes back in one shape: ``(outcome, response)`` when the
    integration handed a response over (``outcome.ok`` or not: a 404 is an answer), and
    ``(outcome, None)`` when it raised, a typed error or an error it raised again as it was
    (then ``outcome.error`` is that error). An error raised before the operation began (no
    outcome attached) propagates.

    Raises:
        TypeError: the response did not come through a retrybudget integration.
    """
    try:
        response = send(*args, **kwargs)
    except Exception as exc:
        return _carried(exc), None
    return _ended(outcome_of(response), response)


async def asend_with_outcome(send: Callable[P, Awaitable[R]], /, *args: P.args,
                             **kwargs: P.kwargs) -> tuple[Outcome[object], R | None]:
    """The async twin of :func:`send_with_outcome` (``httpx.AsyncClient``, aiohttp)."""
    try:
        response = await send(*args, **kwargs)
    except Exception as exc:
        return _carried(exc), None
    return _ended(outcome_of(response), response)


_SHAPES_MAX = 256
"""How many hosts an engine remembers the quick shape of (then it starts again)."""

_ROUTED_MAX = 64
"""The per-profile retriers one engine keeps for ``profile="auto"`` (the profiles it routes to)."""



class Engine:
    """The shared half of an integration: its retrier, its rules and its error table.

    Built once per transport or adapter; immutable; safe to share between threads and tasks.

    Args:
        retrier: the retrier (policy, clock, coordinator, hooks, random); default ``Retrier()``.
        policy: a policy that replaces the retrier's.
        generate_idempotency_keys: add a UUID4 ``Idempotency-Key`` to requests whose method is
            not idempotent under the policy and that carry none.
        redirects_ok: a 3xx ends the operation as ``ok`` (:data:`REDIRECTS` added to the
            policy's profile); False leaves the profile as it is.
        errors: the exception class for each reason (subclasses of the library's errors too).
        failure_kind: the integration's one boundary from exceptions to failure kinds.
        attach: puts the outcome and its stats on a response.
        headers: the response headers the classifier reads, as normalised pairs.
    """

    __slots__ = (
        "attach",
        "clock",
        "coordinated",
        "coordinated_methods",
        "coordinated_url",
        "errors",
        "failure_kind",
        "generate_keys",
        "headers",
        "max_attempts",
        "message_statuses",
        "observed",
        "own_headers",
        "policy",
        "quick",
        "quick_methods",
        "quick_routed",
        "quick_routes",
        "read_statuses",
        "retrier",
        "routed",
        "shapes",
        "sniffing",
    )

    def __init__(
        self,
        retrier: Retrier | None,
        policy: Policy | None,
        *,
        generate_idempotency_keys: bool,
        redirects_ok: bool = True,
        errors: ErrorTable,
        failure_kind: Callable[[BaseException], FailureKind],
        attach: Callable[[Any, Outcome[object]], object],
        headers: Callable[[Any], tuple[tuple[str, str], ...]],
    ) -> None:
        retrier = retrier if retrier is not None else Retrier()
        policy = policy if policy is not None else retrier.policy
        profile = policy.profile
        if redirects_ok and not profile.ok >= REDIRECTS:
            policy = policy.replace(profile=profile.with_ok(REDIRECTS))
        profile = policy.profile
        self.retrier = retrier.with_options(policy=policy)
        self.routed: dict[int, tuple[Profile, Retrier]] = {}
        self.clock = retrier.clock
        # Only hooks (audit among them) and a coordinator read a request's URL.
        self.observed = bool(retrier.hooks) or not retrier.coordinator.passive
        self.policy = policy
        self.max_attempts = policy.max_attempts
        self.generate_keys = bool(generate_idempotency_keys)
        self.errors = dict(errors)
        self.failure_kind = failure_kind
        self.attach = attach
        self.headers = headers
        # Statuses whose body the profile reads to classify them (quota, secondary limits…),
        # and those the policy may retry: read (and so released) at once, before any wait.
        self.message_statuses = profile.body_statuses()
        self.read_statuses = policy.retried_statuses() | self.message_statuses
        self._plan_first_attempts(policy, profile)
        wanted = (*EVIDENCE, *profile.header_names())  # a user profile's own headers too
        self.shapes: dict[Hashable, tuple[str, UnreadShape | None]] = {}
        self.own_headers = len(wanted) > len(EVIDENCE) and not all(
            n.startswith(EVIDENCE) for n in wanted)
        if self.own_headers:
            self.headers = lambda r: evidence(normalize_headers(r.headers), wanted)

    def _plan_first_attempts(self, policy: Policy, profile: Profile) -> None:
        """Which requests take a quick first attempt, uncoordinated or coordinated."""
        # A quick first attempt (sent before any Operation or RequestInfo is built) needs a
        # retrier that takes the first-attempt fast path, no payload validator, and a method
        # (quick_methods) whose 2xx body the profile never reads and that gets no idempotency
        # key added (generated, or the provider's own on a POST).
        # Under profile="auto" the host's profile decides (quick_for).
        self.quick: Retrier | None = None
        self.quick_methods: frozenset[str] = frozenset()
        self.quick_routed = bool(profile.routes) and not self.observed and policy.validator is None
        # profile="auto" picks a profile by the official SDK's request headers for a host it
        # does not know: such a request's profile is its own, not its host's
        self.sniffing = any(p.sdk_headers for _, p in profile.routes)
        self.quick_routes: dict[int, tuple[Profile, Retrier | None, frozenset[str]]] = {}
        if quick_first(self.retrier) and not self.observed and policy.validator is None:
            self.quick = self.retrier
            self.quick_methods = self._quick_methods(self.retrier)
        # A coordinated quick first attempt (no hook, one profile, no payload validator): sent
        # before any Operation is built, its RequestInfo made from the request as it came.
        self.coordinated: Retrier | None = None
        self.coordinated_methods: frozenset[str] = frozenset()
        # Whether the coordinated first attempt's RequestInfo names the URL: only a profile
        # whose gate is the URL's bucket or route reads it (no hook is there to).
        self.coordinated_url = bool(profile.bucket_path or profile.route_majors)
        if coordinated_first(self.retrier) and policy.validator is None:
            self.coordinated = self.retrier
            self.coordinated_methods = self._quick_methods(self.retrier)

    def unread_of(self, url: str, method: str) -> tuple[UnreadShape, str] | None:
        """The shape a request's first-attempt 2xx is handed over unread in and its default
        key (``scheme://host[:port]``), remembered per key (see :meth:`shape`); None for the
        generic path (a logger that prints sees every step)."""
        # Remembered by the URL up to its first "/" after "://" (all of it without one): that
        # names its scheme, userinfo, host and port in full, as key_of_url reads them, in two
        # finds rather than a parse; URLs with one default key may take more than one entry.
        end = url.find("://")
        end = -1 if end < 0 else url.find("/", end + 3)
        host = url if end < 0 else url[:end]
        key, unread = self.shapes.get(host) or self.shape(host, url)
        if unread is None or method not in unread.methods or logs_steps():
            return None
        return unread, key

    def shape(self, host: Hashable, url: str) -> tuple[str, UnreadShape | None]:
        """The default key of a request to ``url`` and its :meth:`unread_for` shape, kept in
        :attr:`shapes` under ``host`` (what names the request's scheme, host and port: both
        read no more of it); bounded, it starts again when full."""
        shapes = self.shapes
        if len(shapes) >= _SHAPES_MAX:
            shapes.clear()
        found = shapes[host] = (key_of_url(url), self.unread_for(url))
        return found

    def unread_for(self, url: str) -> UnreadShape | None:
        """The shape a quick first attempt's 2xx of a request to ``url`` is handed over unread
        in (see :meth:`Begun.unread`), or None: the integration's own quick path or the
        generic one.

        UnreadShape: the retrier of the request's profile (``profile="auto"``: its host's) takes
        a quick first attempt (see :attr:`quick`), reads every 2xx nobody reads the body of
        as ``ok`` whatever its headers (:func:`~retrybudget.core.classify.ok_unread`), and
        the classifier reads only its own headers (no user profile's).
        """
        retrier, methods = self.quick, self.quick_methods
        if retrier is None and self.quick_routed:
            profile = self.policy.profile
            resolved = profile.resolve(url)
            if self.sniffing and resolved is profile.resolve(None):
                return None  # an unknown host: each request's headers may name its SDK
            retrier, methods = self.quick_for(resolved)
        if retrier is None or self.own_headers or not ok_unread(retrier.policy.profile):
            return None
        return UnreadShape(retrier, methods)

    def retrier_for(self, profile: Profile) -> Retrier:
        """The retrier of a request whose profile (``profile="auto"``: its host's) is ``profile``.

        For a profile that picks by host, the retrier of each profile it picks is made once:
        the policy with that profile, as the flow would resolve it per operation, so the
        operation runs (and may take the first-attempt fast path) under it directly.
        """
        if profile is self.policy.profile:
            return self.retrier
        found = self.routed.get(id(profile))
        if found is None or found[0] is not profile:
            if len(self.routed) >= _ROUTED_MAX:
                self.routed.clear()
            derived = self.retrier.with_options(policy=self.policy.replace(profile=profile))
            found = self.routed[id(profile)] = (profile, derived)
        return found[1]

    def _quick_methods(self, retrier: Retrier) -> frozenset[str]:
        """The methods a quick first attempt sends under ``retrier``'s profile."""
        policy = retrier.policy
        profile = policy.profile
        methods = policy.idempotent_methods if self.generate_keys else _ANY_METHOD
        return frozenset(m for m in methods
                         if not (profile.idempotency_header and m == "POST")
                         and not any(profile.reads_body(status, m) for status in range(200, 300)))

    def quick_for(self, profile: Profile) -> tuple[Retrier | None, frozenset[str]]:
        """Under ``profile="auto"``: the quick retrier and methods of a request whose host's
        profile is ``profile`` (None: that retrier takes no first-attempt fast path)."""
        found = self.quick_routes.get(id(profile))
        if found is None or found[0] is not profile:
            if len(self.quick_routes) >= _ROUTED_MAX:
                self.quick_routes.clear()
            retrier = self.retrier_for(profile)
            quick = retrier if quick_first(retrier) else None
            found = self.quick_routes[id(profile)] = (profile, quick, self._quick_methods(retrier))
        return found[1], found[2]

    def deadline(self, attempt: Attempt) -> Deadline | None:
        """The absolute end of ``attempt`` on the retrier's clock (None: no time limit)."""
        return Deadline.of(self.clock, attempt)

    def error(self, outcome: Outcome[object], request: object) -> RetryBudgetError:
        """The typed error for an outcome with no response to return (bound to ``request``)."""
        error = error_for(outcome, base=self.errors)
        cast("Any", error).request = request
        return error


class UnreadShape:
    """A request whose first-attempt 2xx is handed over unread (:meth:`Engine.unread_for`): the
    ``retrier`` that sends it by a quick first attempt (:class:`~retrybudget._drivers.Begun`,
    whose ``unread`` builds what its outcome is read from) and the ``methods`` it sends so."""

    __slots__ = ("methods", "retrier")

    def __init__(self, retrier: Retrier, methods: frozenset[str]) -> None:
        self.retrier = retrier
        self.methods = methods


class Described:
    """What a plain first success reads of its request: method, key and job id (no URL, no
    idempotency key: a request that may get one is never sent by a quick first attempt)."""

    __slots__ = ("job_id", "key", "method")

    def __init__(self, method: str, key: str, job_id: str | None) -> None:
        self.method = method
        self.key = key
        self.job_id = job_id


class Operation:
    """One request's logical operation: what the flow needs and what the caller gets.

    Args:
        engine: the integration's shared half.
        method: the request method.
        url: the request URL (only its redacted form is kept).
        headers: the request headers (case-insensitive; an idempotency key may be added).
        key: the provider key.
        validator: the payload validator for this request (None: the policy's).
        job_id: the caller's job or fixture id, for audit (None: the retrier's).
    """

    __slots__ = ("counted", "engine", "info", "profile", "retrier", "validator")

    def __init__(
        self,
        engine: Engine,
        method: str,
        url: str,
        headers: MutableMapping[str, str],
        key: str,
        validator: Validator | None = None,
        job_id: str | None = None,
    ) -> None:
        # The retry count a Stainless-built SDK (openai, anthropic) sends: each retry made
        # underneath counts on top of the SDK's own (see count_retry)
        sent = headers.get(RETRY_COUNT_HEADER)
        self.counted = None if sent is None else (headers, sdk_retries_taken(sent))
        policy = engine.policy
        profile = policy.profile.resolve(url, headers)  # profile="auto": an SDK's headers too
        # The provider's own key header; one that asks for it (Stripe) gets one on every POST.
        own = profile.idempotency_header
        has_key = (own or IDEMPOTENCY_HEADER) in headers
        if not has_key and ((engine.generate_keys and method not in policy.idempotent_methods)
                            or (own and method == "POST")):
            headers[own or IDEMPOTENCY_HEADER] = str(uuid.uuid4())
            has_key = True
        self.engine = engine
        self.profile = profile  # the request's own (its host's, under profile="auto")
        # The URL is read by hooks and a coordinator; profile="auto" (which picks by host) is
        # resolved here, and the operation runs under its host's profile, unless they read it.
        observed = engine.observed
        self.retrier = (engine.retrier if observed and not engine.sniffing
                        else engine.retrier_for(profile))
        wants_url = observed or bool(self.retrier.policy.profile.routes)
        self.info = RequestInfo(method, key, has_key, safe_url(url) if wants_url else None,
                                job_id if job_id is not None else engine.retrier.job_id)
        # HEAD carries no payload to validate.
        self.validator = None if method == "HEAD" else (validator or policy.validator)

    def count_retry(self, attempt: Attempt) -> None:
        """Before ``attempt`` is sent: the SDK's retry-count header says how many retries this
        call has taken (the SDK's own and those made underneath), as the SDK counts them."""
        counted = self.counted
        if counted is not None:
            headers, taken = counted
            headers[RETRY_COUNT_HEADER] = str(taken + attempt.number - 1)

    def wants_body(self, response: ResponseLike, attempt: Attempt) -> bool:
        """Whether to read the body now: to validate a 2xx, to classify, or to release it.

        A response the policy may still retry is read at once, so its connection goes back to
        the pool before any wait; the others stay unread for the caller (``client.stream``).
        """
        status = response.status_code
        if 200 <= status < 300 and self.profile.reads_body(status, self.info.method):
            return True  # a body signal in a 2xx (GitHub GraphQL RATE_LIMITED)
        if 200 <= status < 300:
            # 204 and 205 carry no content by definition: there is no payload to check.
            return self.validator is not None and status not in _NO_CONTENT
        engine = self.engine
        if status not in engine.read_statuses:
            return False
        if status in engine.message_statuses:
            return True
        info = self.info
        return attempt.number < engine.max_attempts and engine.policy.may_retry(
            info.method, has_idempotency_key=info.has_idempotency_key, sent=True)

    def seen(self, response: ResponseLike, body: bytes | None) -> AttemptResult:
        """The observation of a response; ``body`` is what was read, None if it was not."""
        status = response.status_code
        message = payload_error = ""
        payload = None
        if body is not None:
            if status >= 400 or self.profile.reads_body(status, self.info.method):
                message = response.text  # a body signal of the request's own profile
            if 200 <= status < 300:  # a 2xx read for its signals is still validated
                payload_error, payload = validated(self.validator, response)
        observation = ResponseSeen(status, self.engine.headers(response),
                                   message[:MESSAGE_LIMIT], payload_error)
        return AttemptResult(observation, response, None, payload)

    def failed(self, error: Exception) -> AttemptResult:
        """The observation of an attempt that raised (mapped at the integration's boundary)."""
        kind = self.engine.failure_kind(error)
        return AttemptResult(FailureSeen(kind, type(error).__name__), None, error)

    def finish(self, outcome: Outcome[object], request: object) -> Any:
        """What the caller gets: the final response with its stats, or a raised error.

        The last response is returned whatever the reason (a 503 that exhausted the budget, a
        404, a 429 under ``fail_fast``…), except a 2xx whose payload failed validation: that is
        never handed over as if it were a success. An error the integration does not know as a
        provider failure (a bug, an invalid URL) is raised again as it was, the outcome attached
        (``error.retrybudget_outcome``). Every other outcome without a response raises the
        engine's typed error (``error.outcome``).
        """
        response = outcome.last
        if response is not None and outcome.reason is not Reason.INVALID_PAYLOAD:
            self.engine.attach(response, outcome)
            return response
        if outcome.reason is Reason.UNEXPECTED and outcome.error is not None:
            with contextlib.suppress(AttributeError, TypeError):  # a class without a __dict__
                setattr(outcome.error, OUTCOME_ATTRIBUTE, Carried(outcome))
            raise outcome.error
        raise self.engine.error(outcome, request)
