"""Provider profiles: how each provider signals rate limits and failures, as data.

A :class:`Profile` is a frozen value. Derive your own from an existing one with
:meth:`Profile.derive` instead of touching internals::

    internal = GENERIC.derive("internal", transient=GENERIC.transient | {500})

The figures come from each provider's published documentation and the
behaviour of its official SDK.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .headers import DEFAULT_HEADER_RULES, HeaderRules

__all__ = [
    "ANTHROPIC",
    "AUTO",
    "AWS",
    "AZURE",
    "BODY_KINDS",
    "CLOUDFLARE",
    "DISCORD",
    "GENERIC",
    "GITHUB",
    "GITLAB",
    "GOOGLE",
    "IETF",
    "OPENAI",
    "PROFILES",
    "PROVIDERS",
    "SHOPIFY",
    "SLACK",
    "STRIPE",
    "TWILIO",
    "X",
    "BodySignal",
    "Profile",
    "auto",
    "get_profile",
]

BODY_KINDS = frozenset({"rate_limited", "rejected", "transient", "delay", "global"})
"""What a body signal says: a rate limit, a rejection, a transient failure, only a delay, or
that the rate limit is the provider's global one (Discord's body ``"global": true``)."""

SCOPES = frozenset({"global", "shared", "user"})
"""The rate-limit scopes a provider may name (Discord's ``X-RateLimit-Scope``)."""

WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})
"""The mutating methods a profile's ``write_pacing`` spaces apart."""

BODY_LIMIT = 8192
"""The most bytes of a body any profile reads for classification."""


def _statuses(values: Iterable[int]) -> frozenset[int]:
    out = frozenset(int(v) for v in values)
    for v in out:
        if not 100 <= v <= 599:
            raise ValueError(f"{v} is not an HTTP status code")
    return out


def _check_pattern(where: str, pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{where}: invalid pattern: {exc}") from exc


@dataclass(frozen=True, slots=True)
class BodySignal:
    """A provider signal found in a bounded, already-read response body.

    Attributes:
        pattern: a regular expression searched (case-insensitively) in the body text.
        kind: what a match means, from :data:`BODY_KINDS` (``delay`` only reads a delay).
        statuses: the statuses it applies to.
        delay: an optional regular expression whose first group is a delay named in the body.
        unit: the delay's unit: ``seconds``, ``ms`` or ``duration`` (``"3s"``, Google's form).
        methods: request methods whose 2xx bodies are read for it (empty: any method).
        source: the documentation or SDK file the rule comes from.
    """

    pattern: str
    kind: str
    statuses: frozenset[int] = frozenset(range(400, 600))
    delay: str = ""
    unit: str = "seconds"
    methods: frozenset[str] = frozenset()
    source: str = ""

    def __post_init__(self) -> None:
        if self.kind not in BODY_KINDS:
            raise ValueError(f"body signal kind must be one of {sorted(BODY_KINDS)}, got {self.kind!r}")
        if self.unit not in ("seconds", "ms", "duration"):
            raise ValueError(f"body signal unit must be seconds, ms or duration, got {self.unit!r}")
        _check_pattern("body signal", self.pattern)
        if self.delay:
            _check_pattern("body signal delay", self.delay)
            if re.compile(self.delay).groups < 1:
                raise ValueError("body signal delay needs one group that captures the delay")
        object.__setattr__(self, "statuses", _statuses(self.statuses))
        object.__setattr__(self, "methods", frozenset(str(m).upper() for m in self.methods))


@dataclass(frozen=True, slots=True)
class Profile:
    """How one provider's responses are classified.

    Status sets are checked in this order: quota messages, body signals, ``rate_limited``,
    ``conditional_rate_limited`` (a rate limit only with evidence), ``not_found``,
    ``rejected``, ``transient``, then any 2xx (or a status in ``ok``) is ok and every other
    status is unexpected. A retry hint header (``x-should-retry: false``) then overrides the
    result both ways.

    Attributes:
        name: the profile's name.
        rate_limited: statuses that always mean a rate limit.
        conditional_rate_limited: statuses that are a rate limit only with evidence (remaining 0,
            a Retry-After, or a secondary-limit message), and otherwise fall through.
        not_found: statuses meaning a reachable, missing record.
        rejected: statuses meaning the provider rejected the request (not retried).
        transient: statuses retried while budget remains.
        secondary_patterns: regular expressions on the error message that mark a secondary limit.
        permission_patterns: messages that read as a permission error (flagged when they
            contradict rate-limit headers).
        quota_patterns: messages meaning a quota or billing limit that waiting cannot fix.
        rate_limit_floor: seconds to wait for a rate limit that names no time, doubled on each
            repeat by ``rate_limit_multiplier``.
        rate_limit_multiplier: growth of the no-hint rate-limit wait.
        reset_slack: seconds added after a reset time, so the retry lands after the reset.
        transient_hints: whether a Retry-After on a transient status (503) is honoured.
        ok: statuses besides 2xx that end an operation as ok, unvalidated (the HTTP
            integrations add 3xx: the client above them follows redirects).
        delay_headers: ``(header, unit)`` pairs naming when to retry, first valid one wins
            (units: ``seconds`` — delay-seconds or an HTTP-date —, ``ms``, ``epoch``,
            ``duration``, ``rfc3339``, ``auto``).
        reset_units: ``(header, unit)`` pairs: how this provider's reset headers are read
            (a reset header not listed is read ``auto``, by magnitude).
        provider_clock: measure absolute times against the response's ``Date`` header.
        retry_hint_headers: headers whose ``true``/``false`` overrides retryability both ways
            (``x-should-retry``, ``stripe-should-retry``).
        body_signals: signals read from the bounded body (:class:`BodySignal`).
        body_limit: the most bytes of a body read for classification (at most 8192).
        bucket_headers: headers naming the provider's rate-limit bucket (coordination key).
        bucket_path: a regular expression searched in the request URL's path whose first group
            names the rate-limit bucket the request spends (Slack: the Web API method of
            ``/api/chat.postMessage``); requests of one bucket coordinate under their own key
            (:meth:`coordination_key`). Empty: the provider key is the bucket.
        route_majors: path segments whose next segment is a major parameter (Discord's
            ``channels``, ``guilds``, ``webhooks``): with any, the bucket is the request's route
            — its method and path with the major parameters kept and every other id replaced
            by ``{id}`` — while a rate limit of the ``global`` scope holds the whole provider
            key (:meth:`coordination_key`).
        scope_headers: headers naming the scope of a rate limit: a value of :data:`SCOPES`
            (Discord's ``X-RateLimit-Scope``), or ``true`` for the global one
            (``X-RateLimit-Global``).
        graphql_cost: read the GraphQL ``extensions.cost`` of a bounded body (Shopify's
            ``requestedQueryCost`` and ``throttleStatus``): the points left are the remaining
            quota, and a throttled query waits until enough points are restored.
        zero_hint_wait: the least wait after a rate limit whose named time is now or past
            (GitHub: 60 s); 0 means the policy's backoff, with jitter.
        longest_wait: a provider wait longer than this is not waited for (the SDK's own cap);
            None: only the policy's ``max_server_wait`` and deadline decide.
        write_pacing: seconds the provider asks between mutating requests (0: none).
        idempotency_header: the request header that makes a write safe to repeat, when the
            provider honours one (``Idempotency-Key``); empty when it has none.
        hosts: well-known API hosts this profile is chosen for by :func:`auto`.
        sdk_headers: request headers the provider's official SDK sends (lower case; one
            ending in ``-`` is a prefix): :func:`auto` picks this profile by them for a host
            it does not know (a proxy, a gateway), ``anthropic-version`` say.
        sdk_paths: regular expressions one of which the request path must match as well for
            :attr:`sdk_headers` to pick this profile (an OpenAI-shaped path: other SDKs
            send ``x-stainless-*`` too); empty: any path.
        sources: documentation pages and SDK files the profile is built from.
    """

    name: str
    rate_limited: frozenset[int] = frozenset({429})
    conditional_rate_limited: frozenset[int] = frozenset()
    not_found: frozenset[int] = frozenset({404})
    rejected: frozenset[int] = frozenset({400, 401, 403})
    transient: frozenset[int] = frozenset({502, 503, 504})
    secondary_patterns: tuple[str, ...] = ()
    permission_patterns: tuple[str, ...] = ()
    quota_patterns: tuple[str, ...] = ()
    rate_limit_floor: float = 1.0
    rate_limit_multiplier: float = 2.0
    reset_slack: float = 0.0
    transient_hints: bool = True
    ok: frozenset[int] = frozenset()
    delay_headers: tuple[tuple[str, str], ...] = DEFAULT_HEADER_RULES.delays
    reset_units: tuple[tuple[str, str], ...] = ()
    provider_clock: bool = True
    retry_hint_headers: tuple[str, ...] = ()
    body_signals: tuple[BodySignal, ...] = ()
    body_limit: int = 4096
    bucket_headers: tuple[str, ...] = ()
    bucket_path: str = ""
    route_majors: tuple[str, ...] = ()
    scope_headers: tuple[str, ...] = ()
    graphql_cost: bool = False
    zero_hint_wait: float = 0.0
    longest_wait: float | None = None
    write_pacing: float = 0.0
    idempotency_header: str = ""
    hosts: tuple[str, ...] = ()
    sdk_headers: tuple[str, ...] = ()
    sdk_paths: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    routes: tuple[tuple[str, Profile], ...] = field(default=(), repr=False)
    header_rules: HeaderRules = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a profile needs a non-empty name")
        for f in ("rate_limited", "conditional_rate_limited", "not_found", "rejected", "transient",
                  "ok"):
            object.__setattr__(self, f, _statuses(getattr(self, f)))
        for f in ("secondary_patterns", "permission_patterns", "quota_patterns"):
            patterns = tuple(getattr(self, f))
            for p in patterns:
                _check_pattern(f, p)
            object.__setattr__(self, f, patterns)
        for f in ("rate_limit_floor", "reset_slack", "zero_hint_wait", "write_pacing"):
            v = float(getattr(self, f))
            if not 0 <= v <= 3600:
                raise ValueError(f"{f} must be between 0 and 3600 seconds, got {v}")
            object.__setattr__(self, f, v)
        if self.longest_wait is not None:
            v = float(self.longest_wait)
            if not 0 < v <= 7 * 24 * 3600:
                raise ValueError(f"longest_wait must be positive and at most a week, got {v}")
            object.__setattr__(self, "longest_wait", v)
        if not 1.0 <= float(self.rate_limit_multiplier) <= 10.0:
            raise ValueError("rate_limit_multiplier must be between 1 and 10")
        if isinstance(self.body_limit, bool) or not 0 <= int(self.body_limit) <= BODY_LIMIT:
            raise ValueError(f"body_limit must be between 0 and {BODY_LIMIT} bytes")
        object.__setattr__(self, "body_limit", int(self.body_limit))
        signals = tuple(self.body_signals)
        if not all(isinstance(s, BodySignal) for s in signals):
            raise ValueError("body_signals must be BodySignal values")
        object.__setattr__(self, "body_signals", signals)
        for f in ("retry_hint_headers", "bucket_headers", "scope_headers", "hosts",
                  "route_majors"):
            names = tuple(str(n).strip().lower() for n in getattr(self, f))
            if any(not n for n in names):
                raise ValueError(f"{f}: a name is empty")
            object.__setattr__(self, f, names)
        object.__setattr__(self, "idempotency_header", str(self.idempotency_header).strip())
        object.__setattr__(self, "graphql_cost", bool(self.graphql_cost))
        if self.bucket_path and self.route_majors:
            raise ValueError("bucket_path and route_majors both name the bucket: choose one")
        if self.bucket_path:
            _check_pattern("bucket_path", self.bucket_path)
            if re.compile(self.bucket_path).groups < 1:
                raise ValueError("bucket_path needs one group that captures the bucket")
        object.__setattr__(self, "sources", tuple(str(s) for s in self.sources))
        object.__setattr__(self, "sdk_headers", tuple(str(h).lower() for h in self.sdk_headers))
        for path in self.sdk_paths:
            _check_pattern("sdk_paths", path)
        object.__setattr__(self, "sdk_paths", tuple(self.sdk_paths))
        object.__setattr__(self, "header_rules", HeaderRules(
            tuple(self.delay_headers), tuple(self.reset_units), bool(self.provider_clock)))
        object.__setattr__(self, "delay_headers", self.header_rules.delays)
        object.__setattr__(self, "reset_units", self.header_rules.resets)
        routes = tuple((str(h).strip().lower(), p) for h, p in self.routes)
        if not all(isinstance(p, Profile) for _, p in routes):
            raise ValueError("routes map hosts to Profile values")
        object.__setattr__(self, "routes", routes)

    def derive(self, name: str, **changes: object) -> Profile:
        """A new profile based on this one, with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, name=name, **changes)  # type: ignore[arg-type]

    def with_ok(self, statuses: Iterable[int]) -> Profile:
        """This profile with ``statuses`` also ending an operation as ok (and each it may pick)."""
        extra = frozenset(statuses)
        routes = tuple((host, p.with_ok(extra)) for host, p in self.routes)
        return self.derive(self.name, ok=self.ok | extra, routes=routes)

    def body_statuses(self) -> frozenset[int]:
        """The non-2xx statuses whose body this profile reads to classify a response.

        The integrations ask this before a body is read: quota messages make every 4xx/5xx
        worth reading; secondary-limit and permission messages the (conditional) rate-limit
        statuses; each body signal its own statuses. 2xx bodies: :meth:`reads_body`.
        """
        if self.routes:
            return frozenset().union(*(p.body_statuses() for _, p in self.routes), self._own_body())
        return self._own_body()

    def _own_body(self) -> frozenset[int]:
        out: set[int] = set()
        if self.quota_patterns:
            out.update(range(400, 600))
        if self.secondary_patterns or self.permission_patterns:
            out.update(self.rate_limited | self.conditional_rate_limited)
        for signal in self.body_signals:
            out.update(s for s in signal.statuses if not 200 <= s < 300)
        return frozenset(out)

    def write_gap(self, method: str | None) -> float:
        """Seconds to keep between the start of this request and the previous write under its
        provider key: ``write_pacing`` for a mutating method, else 0 (None: a plain callable,
        no write known)."""
        if not self.write_pacing or method is None:
            return 0.0
        return self.write_pacing if method.upper() in WRITE_METHODS else 0.0

    def coordination_key(self, key: str, url: str | None, method: str | None = None) -> str:
        """The key a request to ``url`` coordinates its gate and pacing under: ``key`` itself,
        with a ``bucket_path`` ``key`` and the bucket the path names (``key#bucket``), with
        ``route_majors`` ``key`` and the request's route (``key#GET /channels/1/messages/{id}``,
        the major parameters kept)."""
        if not url or not (self.bucket_path or self.route_majors):
            return key
        if self.route_majors:
            route = _route_of(_path(url), self.route_majors)
            return f"{key}#{method.upper()} {route}"[:300] if method else f"{key}#{route}"[:300]
        match = _compiled(self.bucket_path).search(_path(url))
        return key if match is None or not match.group(1) else f"{key}#{match.group(1)[:100]}"

    def header_names(self) -> frozenset[str]:
        """The response headers this profile reads besides the built-in rate-limit families."""
        profiles = [p for _, p in self.routes] if self.routes else [self]
        return frozenset(
            name for p in profiles
            for name in (*(h for h, _ in p.delay_headers), *(h for h, _ in p.reset_units),
                         *p.retry_hint_headers, *p.bucket_headers, *p.scope_headers)
        )

    def reads_body(self, status: int, method: str | None = None) -> bool:
        """Whether a response of ``status`` to ``method`` has its (bounded) body read to classify it.

        A 2xx body is read only for a body signal on that status whose methods include
        ``method`` (GitHub's GraphQL ``RATE_LIMITED`` in a 200: POST only); ``method`` None
        (a plain callable's response that names no request) is any method.
        """
        if not 200 <= status < 300:
            return status in self.body_statuses()
        if not self.body_signals and not self.routes:
            return False  # most profiles: a 2xx body is never read
        m = None if method is None else method.upper()
        profiles = [p for _, p in self.routes] if self.routes else [self]
        return any(status in s.statuses and (not s.methods or m is None or m in s.methods)
                   for p in profiles for s in p.body_signals)

    def resolve(self, url: str | None, headers: Mapping[str, str] | None = None) -> Profile:
        """The profile for a request to ``url``: this one, or for :func:`auto`, the host's.

        A host :func:`auto` does not know (a proxy, a gateway, a loopback test server) is
        classified by the profile whose official SDK sent the request, when ``headers`` (the
        request's) carry one's :attr:`sdk_headers` on one of its :attr:`sdk_paths`; else by
        the fallback.
        """
        if not self.routes:
            return self
        host = _host(url)
        for pattern, profile in self.routes:
            if host == pattern or (pattern.startswith(".") and host.endswith(pattern)):
                return profile
        if headers:
            sent = _sdk_of(self, headers, url)
            if sent is not None:
                return sent
        return _fallback(self)


_HOST_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#@]*@)?(\[[^\]]*\]|[^/?#:]*)")


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


_LITERAL_RE = re.compile(r"@?[A-Za-z][A-Za-z0-9_.-]{0,31}")
"""A path segment that names a resource (``messages``, ``v10``, ``@me``), not an id or token."""


def _route_of(path: str, majors: Iterable[str]) -> str:
    """The rate-limit route of a request ``path``: a segment after one of ``majors`` is a major
    parameter and is kept, any other segment that is no plain word (an id, a token, an emoji)
    is ``{id}``. Discord: "rate limits take into account major parameters in the URL"
    (``channel_id``, ``guild_id``, ``webhook_id``), so ``/channels/1/messages/7`` and
    ``/channels/1/messages/8`` share one bucket and ``/channels/2/messages/7`` has its own.
    https://discord.com/developers/docs/topics/rate-limits
    """
    major = frozenset(majors)
    segments = path.split("/")
    return "/".join(
        segment if (not segment or _LITERAL_RE.fullmatch(segment)
                    or (segment.isdigit() and previous in major)) else "{id}"
        for previous, segment in zip(["", *segments], segments, strict=False)
    )


def _path(url: str) -> str:
    """The path of ``url`` (after an absolute URL's host, a port aside; no query, no fragment)."""
    match = _HOST_RE.match(url)
    rest = url[match.end():] if match is not None else url
    return rest.split("?", 1)[0].split("#", 1)[0]


def _host(url: str | None) -> str:
    if not url:
        return ""
    match = _HOST_RE.match(url)
    return "" if match is None else match.group(1).lower()


def _sdk_of(profile: Profile, headers: Mapping[str, str], url: str | None) -> Profile | None:
    """The routed profile whose official SDK sent a request with ``headers`` to ``url``.

    An exact header name (``anthropic-version``) picks before a prefix (``x-stainless-``),
    which every Stainless-built SDK sends: anthropic's requests carry both.
    """
    names = {str(name).lower() for name in headers}
    path = _path(url or "")
    candidates = [p for pattern, p in profile.routes if pattern != "*" and p.sdk_headers]
    for exact in (True, False):
        for routed in candidates:
            for wanted in routed.sdk_headers:
                if wanted.endswith("-") == exact:
                    continue
                found = (wanted in names if exact
                         else any(name.startswith(wanted) for name in names))
                if found and (not routed.sdk_paths
                              or any(re.search(p, path) for p in routed.sdk_paths)):
                    return routed
    return None


def _fallback(profile: Profile) -> Profile:
    for pattern, routed in profile.routes:
        if pattern == "*":
            return routed
    return GENERIC


_RETRY_AFTER = (("retry-after", "seconds"),)
_STAINLESS = (("retry-after-ms", "ms"), ("retry-after", "seconds"))

GENERIC = Profile(
    "generic",
    # A 403 with remaining 0 is a rate limit for nearly every API that sends the pair; a 403
    # with quota left stays a rejection (RFC 6585 section 4 names 429; the x-ratelimit-* pair
    # is the de facto convention, e.g. https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api).
    conditional_rate_limited=frozenset({403}),
    sources=("https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3",
             "https://www.rfc-editor.org/rfc/rfc6585#section-4"),
)
"""The contract for unknown providers: 429 rate limit (and 403 with remaining 0); 502/503/504
transient; 400/401/403 rejected; 404 not found. Reset headers are read by magnitude."""

GITHUB = Profile(
    "github",
    # 403 or 429 with remaining 0 (primary) or a "secondary rate" message (secondary):
    # https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api
    rate_limited=frozenset({429}),
    conditional_rate_limited=frozenset({403}),
    # Octokit plugin-throttling src/index.ts: /\bsecondary rate\b/i on the message.
    secondary_patterns=(r"\bsecondary rate\b",),
    permission_patterns=(r"not accessible", r"permission", r"forbidden", r"must have"),
    # GraphQL errors[].type == "RATE_LIMITED", even in a 200 (Octokit plugin-throttling
    # src/wrap-request.ts); GraphQL is always a POST.
    body_signals=(
        BodySignal(r'"type"\s*:\s*"RATE_LIMITED"', "rate_limited", frozenset({200, 403}),
                   methods=frozenset({"POST"}),
                   source="octokit/plugin-throttling.js src/wrap-request.ts"),
    ),
    # "wait at least one minute", then exponentially longer (best-practices page).
    rate_limit_floor=60.0,
    rate_limit_multiplier=2.0,
    zero_hint_wait=60.0,  # Octokit: fallbackSecondaryRateRetryAfter = 60 when missing or 0
    reset_slack=1.0,  # Octokit: ceil(reset - now) + 1 "so we retry after the reset time"
    # x-ratelimit-reset is UTC epoch seconds (rate-limits page), whatever its magnitude.
    reset_units=(("x-ratelimit-reset", "epoch"),),
    delay_headers=_RETRY_AFTER,  # retry-after in seconds (rate-limits page)
    bucket_headers=("x-ratelimit-resource",),  # core, search, graphql… (rate-limits page)
    # "wait at least one second between each" POST/PATCH/PUT/DELETE:
    # https://docs.github.com/rest/using-the-rest-api/best-practices-for-using-the-rest-api
    write_pacing=1.0,
    hosts=("api.github.com",),
    sdk_headers=("x-github-api-version",),  # octokit, githubkit (REST API versions page)
    sources=("https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api",
             "https://docs.github.com/rest/using-the-rest-api/best-practices-for-using-the-rest-api",
             "octokit/plugin-throttling.js src/index.ts"),
)
"""GitHub REST and GraphQL: 403/429 with remaining 0 is the primary limit (wait for the epoch
reset, plus 1 s); 403/429 with Retry-After or a "secondary rate limit" message is a secondary
limit (Retry-After, else at least 60 s, doubling); GraphQL ``RATE_LIMITED`` in a 200 body is a
rate limit; any other 403 is a permission rejection."""

STRIPE = Profile(
    "stripe",
    # stripe-python stripe/_http_client.py _should_retry: 409 and >= 500 retried.
    transient=frozenset({409, 500, 502, 503, 504}),
    # Stripe-Should-Retry: true|false overrides the status rule (same function).
    retry_hint_headers=("stripe-should-retry",),
    # Lock timeouts come as a 429 with code lock_timeout: retried as a transient conflict
    # (https://docs.stripe.com/rate-limits#object-lock-timeouts; stripe-php PR #718).
    body_signals=(
        BodySignal(r'"code"\s*:\s*"lock_timeout"', "transient", frozenset({429}),
                   source="https://docs.stripe.com/rate-limits#object-lock-timeouts"),
    ),
    # No Retry-After is sent (stripe-python 15.3.1 removed its support as unused).
    delay_headers=(),
    # stripe-python adds an Idempotency-Key to every POST, reused across its retries.
    idempotency_header="Idempotency-Key",
    hosts=("api.stripe.com", "files.stripe.com"),
    sdk_headers=("stripe-version",),  # every Stripe SDK pins its API version
    sources=("https://docs.stripe.com/rate-limits", "https://docs.stripe.com/idempotency",
             "stripe/stripe-python stripe/_http_client.py"),
)
"""Stripe: 429 (rate and concurrency limits); 409 and 5xx retried; a 429 lock timeout is a
transient conflict; ``Stripe-Should-Retry`` overrides both ways; an idempotency key on writes."""

OPENAI = Profile(
    "openai",
    # openai-python src/openai/_base_client.py _should_retry: 408, 409, 429, >= 500.
    transient=frozenset({408, 409, *range(500, 600)}),
    # insufficient_quota is billing, not fixed by waiting (help.openai.com article 6891839).
    quota_patterns=(r"insufficient_quota", r"exceeded your current quota"),
    retry_hint_headers=("x-should-retry",),  # _base_client.py: x-should-retry true|false
    delay_headers=_STAINLESS,  # _base_client.py: retry-after-ms, then retry-after
    # x-ratelimit-reset-requests / -tokens are durations ("1s", "6m0s"):
    # https://platform.openai.com/docs/guides/rate-limits
    reset_units=(("x-ratelimit-reset-requests", "duration"),
                 ("x-ratelimit-reset-tokens", "duration")),
    longest_wait=120.0,  # _constants.py MAX_RETRY_AFTER_DELAY: a longer wait is not retried
    # Azure OpenAI: {resource}.openai.azure.com (learn.microsoft.com azure/ai-services/openai)
    hosts=("api.openai.com", ".openai.azure.com"),
    # openai-python sends x-stainless-* (as every Stainless-built SDK does): with the paths
    # of the OpenAI API (and of Azure OpenAI's deployments) it is OpenAI's
    sdk_headers=("x-stainless-",),
    sdk_paths=(r"/(chat/)?completions$", r"/responses(/|$)", r"/embeddings$", r"/models(/|$)",
               r"/(images|audio|files|uploads|batches|moderations|fine_tuning|assistants"
               r"|threads|vector_stores|realtime|conversations)(/|$)",
               r"/openai/deployments/"),
    sources=("https://platform.openai.com/docs/guides/rate-limits",
             "openai/openai-python src/openai/_base_client.py"),
)
"""OpenAI: 429 rate limit (``insufficient_quota`` is billing: rejected); 408/409/5xx retried;
``x-should-retry`` both ways; ``retry-after-ms`` before ``retry-after``; at most 120 s waited."""

ANTHROPIC = Profile(
    "anthropic",
    # anthropic-sdk-python src/anthropic/_base_client.py: 408, 409, 429, >= 500 (529 too).
    transient=frozenset({408, 409, *range(500, 600)}),
    quota_patterns=(r"enforced_spend_limit_reached",),  # monthly spend cap: not fixed by waiting
    retry_hint_headers=("x-should-retry",),  # _base_client.py
    delay_headers=_STAINLESS,  # _base_client.py: retry-after-ms, then retry-after
    # anthropic-ratelimit-*-reset are RFC 3339 times: https://docs.anthropic.com/en/api/rate-limits
    reset_units=tuple((f"anthropic-ratelimit-{k}-reset", "rfc3339")
                      for k in ("requests", "tokens", "input-tokens", "output-tokens")),
    hosts=("api.anthropic.com",),
    sdk_headers=("anthropic-version",),  # sent by every anthropic SDK (api versioning page)
    sources=("https://docs.anthropic.com/en/api/rate-limits",
             "https://docs.anthropic.com/en/api/errors",
             "anthropics/anthropic-sdk-python src/anthropic/_base_client.py"),
)
"""Anthropic: 429 ``rate_limit_error``; 529 ``overloaded_error`` and other 5xx transient; spend
caps rejected; ``x-should-retry`` both ways; resets are RFC 3339 times."""

SLACK = Profile(
    "slack",
    # 429 + Retry-After seconds: https://docs.slack.dev/apis/web-api/rate-limits
    transient=frozenset({500, 502, 503, 504}),
    delay_headers=_RETRY_AFTER,
    # A 429's body says {"ok": false, "error": "ratelimited"} (python-slack-sdk tests).
    body_signals=(BodySignal(r'"error"\s*:\s*"ratelimited"', "rate_limited", frozenset({200, 429}),
                             source="python-slack-sdk slack_sdk/http_retry/builtin_handlers.py"),),
    # Limits apply "per API method per workspace per app", each method in its tier: the
    # method named by the path (/api/chat.postMessage) is the bucket.
    # https://docs.slack.dev/apis/web-api/rate-limits
    bucket_path=r"/api/([A-Za-z][A-Za-z0-9_.]*)",
    hosts=("slack.com", ".slack.com"),
    sources=("https://docs.slack.dev/apis/web-api/rate-limits",),
)
"""Slack Web API: 429 with Retry-After in seconds; per-method tiers: each Web API method
(``/api/<method>``) coordinates under its own bucket."""

DISCORD = Profile(
    "discord",
    # 401/403 count toward the invalid-request ban: never retried.
    # https://discord.com/developers/docs/topics/rate-limits#invalid-request-limit
    rejected=frozenset({400, 401, 403}),
    # Retry-After (s), else X-RateLimit-Reset-After (s, decimals), same page.
    delay_headers=(("retry-after", "seconds"), ("x-ratelimit-reset-after", "seconds")),
    reset_units=(("x-ratelimit-reset", "epoch"), ("x-ratelimit-reset-after", "seconds")),
    # The 429 body's retry_after (float seconds) is more precise than the header.
    body_signals=(
        BodySignal(r'"retry_after"', "delay", frozenset({429}),
                   delay=r'"retry_after"\s*:\s*([0-9]+(?:\.[0-9]+)?)',
                   source="https://discord.com/developers/docs/topics/rate-limits"),
        # The 429 body's "global": true: the bot's global limit, one gate for the provider key.
        BodySignal(r'"global"\s*:\s*true', "global", frozenset({429}),
                   source="https://discord.com/developers/docs/topics/rate-limits#exceeding-a-rate-limit"),
    ),
    bucket_headers=("x-ratelimit-bucket",),
    # Per-route limits: a route is its method and path, major parameters (channel_id,
    # guild_id, webhook_id) kept; a global 429 holds every route (same page).
    route_majors=("channels", "guilds", "webhooks"),
    # X-RateLimit-Scope (user | global | shared) and X-RateLimit-Global, on a 429 only; a
    # shared-scope 429 does not count against the user (same page, invalid-request limit).
    scope_headers=("x-ratelimit-scope", "x-ratelimit-global"),
    hosts=("discord.com", "discordapp.com"),
    sources=("https://discord.com/developers/docs/topics/rate-limits",),
)
"""Discord: 429 with Retry-After, ``X-RateLimit-Reset-After`` and body ``retry_after``;
``X-RateLimit-Bucket`` is the bucket; ``X-RateLimit-Global`` / body ``global`` mark the global
limit and ``X-RateLimit-Scope: shared`` a per-resource one that leaves the key's gate open;
401/403 rejected (they count toward Discord's ban)."""

SHOPIFY = Profile(
    "shopify",
    # Admin REST client retries 429, 500, 503 (shopify-app-js admin-api-client constants.ts).
    transient=frozenset({500, 502, 503, 504}),
    delay_headers=_RETRY_AFTER,  # Retry-After: 2.0 (float seconds), REST rate-limits page
    # GraphQL throttling is in the body: errors[].extensions.code == "THROTTLED".
    body_signals=(BodySignal(r'"code"\s*:\s*"THROTTLED"', "rate_limited",
                             frozenset({200, 429}), methods=frozenset({"POST"}),
                             source="https://shopify.dev/docs/api/usage/rate-limits"),),
    # extensions.cost: requestedQueryCost and throttleStatus {maximumAvailable,
    # currentlyAvailable, restoreRate}: points left, and the wait until enough are restored.
    # https://shopify.dev/docs/apps/build/apis/graphql-admin/rate-limits
    graphql_cost=True,
    hosts=(".myshopify.com",),
    sources=("https://shopify.dev/docs/api/admin-rest/usage/rate-limits",
             "https://shopify.dev/docs/apps/build/apis/graphql-admin/rate-limits"),
)
"""Shopify Admin: 429 with fractional Retry-After; ``X-Shopify-Shop-Api-Call-Limit`` used/size;
GraphQL ``THROTTLED`` in the body is a rate limit, waited until the query's cost is restored
(``extensions.cost``), whose points left pace the next queries."""

X = Profile(
    "x",
    # x-rate-limit-reset is a Unix timestamp; 429 when exceeded:
    # https://docs.x.com/x-api/fundamentals/rate-limits
    reset_units=(("x-rate-limit-reset", "epoch"),),
    delay_headers=_RETRY_AFTER,  # Retry-After is not documented by X; read if sent
    hosts=("api.x.com", "api.twitter.com"),
    sources=("https://docs.x.com/x-api/fundamentals/rate-limits",),
)
"""X API v2: 429 with ``x-rate-limit-*`` headers, the reset an epoch; doubling backoff."""

_AWS_THROTTLING = (
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
    "TooManyRequestsException", "ProvisionedThroughputExceededException",
    "TransactionInProgressException", "RequestLimitExceeded", "BandwidthLimitExceeded",
    "LimitExceededException", "RequestThrottled", "SlowDown", "EC2ThrottledException",
)
_AWS_TRANSIENT = ("RequestTimeout", "RequestTimeoutException", "PriorRequestNotComplete")

AWS = Profile(
    "aws",
    # botocore/retries/standard.py: 500/502/503/504 transient; throttling by error code only.
    transient=frozenset({500, 502, 503, 504}),
    body_signals=(
        BodySignal(r"\b(?:" + "|".join(_AWS_THROTTLING) + r")\b", "rate_limited",
                   source="botocore/retries/standard.py THROTTLING_ERROR_CODES"),
        BodySignal(r"\b(?:" + "|".join(_AWS_TRANSIENT) + r")\b", "transient",
                   source="botocore/retries/standard.py TRANSIENT_ERROR_CODES"),
    ),
    # x-amz-retry-after: integer milliseconds (botocore, opt-in 2026 retries); no Retry-After.
    delay_headers=(("x-amz-retry-after", "ms"),),
    hosts=(".amazonaws.com",),
    sources=("https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html",
             "boto/botocore botocore/retries/standard.py"),
)
"""AWS: throttling and transient error codes read from the body (any status); 5xx transient;
``x-amz-retry-after`` in milliseconds."""

GOOGLE = Profile(
    "google",
    # google-api-core retry_base.py if_transient_error: 429, 500, 503.
    transient=frozenset({500, 502, 503, 504}),
    body_signals=(
        # Some APIs answer 403 "User rate limit exceeded" (reasons rateLimitExceeded,
        # userRateLimitExceeded): https://developers.google.com/drive/api/guides/limits
        BodySignal(r'"reason"\s*:\s*"(?:rateLimitExceeded|userRateLimitExceeded)"',
                   "rate_limited", frozenset({403, 429}),
                   source="https://developers.google.com/drive/api/guides/handle-errors"),
        # google.rpc.RetryInfo.retryDelay ("3s") in the error details.
        BodySignal(r'"retryDelay"', "delay", frozenset({429, 500, 503}),
                   delay=r'"retryDelay"\s*:\s*"([0-9.]+s)"', unit="duration",
                   source="https://cloud.google.com/apis/design/errors#retry_info"),
    ),
    hosts=(".googleapis.com",),
    sources=("https://cloud.google.com/apis/design/errors",
             "https://developers.google.com/drive/api/guides/limits",
             "googleapis/python-api-core google/api_core/retry/retry_base.py"),
)
"""Google APIs: 429 and 403 ``rateLimitExceeded``/``userRateLimitExceeded`` are rate limits;
``RetryInfo.retryDelay`` in the error details names the wait."""

AZURE = Profile(
    "azure",
    transient=frozenset({408, 500, 502, 503, 504}),
    # @azure/core-rest-pipeline throttlingRetryStrategy.ts: retry-after-ms, x-ms-retry-after-ms
    # (milliseconds), then Retry-After (seconds or a date), on 429 and 503.
    delay_headers=(("retry-after-ms", "ms"), ("x-ms-retry-after-ms", "ms"),
                   ("retry-after", "seconds")),
    hosts=(".azure.com", ".windows.net", ".microsoft.com"),
    sources=("Azure/azure-sdk-for-js "
             "sdk/core/core-rest-pipeline/src/retryStrategies/throttlingRetryStrategy.ts",
             "https://learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling"),
)
"""Azure: 429/503 with ``retry-after-ms``, ``x-ms-retry-after-ms`` (ms) or Retry-After."""

GITLAB = Profile(
    "gitlab",
    # RateLimit-Reset is a Unix time, RateLimit-ResetTime an HTTP date, Retry-After seconds:
    # https://docs.gitlab.com/ee/user/gitlab_com/index.html#gitlabcom-specific-rate-limits
    reset_units=(("ratelimit-reset", "epoch"),),
    delay_headers=_RETRY_AFTER,
    transient=frozenset({500, 502, 503, 504}),
    hosts=("gitlab.com",),
    sources=("https://docs.gitlab.com/ee/administration/settings/user_and_ip_rate_limits.html",),
)
"""GitLab: 429 with ``RateLimit-*`` headers (the reset an epoch) and Retry-After."""

TWILIO = Profile(
    "twilio",
    # 429 error 20429: too many concurrent requests, never processed, safe to retry after
    # backing off: https://www.twilio.com/docs/api/errors/20429
    body_signals=(BodySignal(r'"code"\s*:\s*20429\b', "rate_limited", frozenset({429}),
                             source="https://www.twilio.com/docs/api/errors/20429"),),
    delay_headers=_RETRY_AFTER,  # urllib3 Retry honours it on 429 (twilio-python http_client.py)
    hosts=("api.twilio.com", ".twilio.com"),
    sources=("https://www.twilio.com/docs/api/errors/20429",),
)
"""Twilio: 429 (error 20429, concurrency) is safe to retry after backing off."""

CLOUDFLARE = Profile(
    "cloudflare",
    # Ratelimit / Ratelimit-Policy (IETF draft), retry-after (s, rounded up) on a 429:
    # https://developers.cloudflare.com/fundamentals/api/reference/limits/
    delay_headers=_RETRY_AFTER,
    hosts=("api.cloudflare.com",),
    sources=("https://developers.cloudflare.com/fundamentals/api/reference/limits/",),
)
"""Cloudflare API: 429 with Retry-After; the IETF ``Ratelimit`` fields on every response."""

IETF = Profile(
    "ietf",
    # RateLimit / RateLimit-Policy structured fields; Retry-After MUST take precedence:
    # draft-ietf-httpapi-ratelimit-headers-10 section 5.
    delay_headers=_RETRY_AFTER,
    sources=("https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/",
             "https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3"),
)
"""An API that speaks the IETF RateLimit fields: Retry-After wins over them."""

PROFILES: dict[str, Profile] = {
    p.name: p for p in (GENERIC, GITHUB, STRIPE, OPENAI, ANTHROPIC, SLACK, DISCORD, SHOPIFY, X,
                        AWS, GOOGLE, AZURE, GITLAB, TWILIO, CLOUDFLARE, IETF)
}
"""The built-in profiles by name."""

PROVIDERS: tuple[Profile, ...] = tuple(PROFILES.values())
"""The built-in provider profiles, in documentation order."""


def auto(hosts: Mapping[str, Profile | str] | None = None, *,
         fallback: Profile | str = "generic", name: str = "auto") -> Profile:
    """A profile that picks one per request host.

    Args:
        hosts: an explicit host → profile mapping (``"api.internal"`` exact, ``".corp"`` any
            subdomain); it wins over the well-known API hosts of the built-in profiles.
        fallback: the profile for any other host (generic by default).
        name: the name shown in stats and audit.

    Its own status sets are the union of those it may pick, so an integration reads (and
    releases) every body one of them may need; classification always uses the picked one.
    On a host neither names (a proxy, a gateway), an integration's request sent by an
    official SDK is classified by that provider's profile, picked by the headers the SDK
    sends (:attr:`Profile.sdk_headers`: ``anthropic-version``, ``Stripe-Version``,
    ``X-GitHub-Api-Version``, openai's ``x-stainless-*`` on an OpenAI path).
    """
    routes: list[tuple[str, Profile]] = [
        (host, get_profile(p)) for host, p in (hosts or {}).items()
    ]
    routes += [(host, p) for p in PROFILES.values() for host in p.hosts]
    routes.append(("*", get_profile(fallback)))
    picked = [p for _, p in routes]

    def union(attr: str) -> frozenset[int]:
        return frozenset().union(*(getattr(p, attr) for p in picked))

    return Profile(
        name,
        rate_limited=union("rate_limited"),
        conditional_rate_limited=union("conditional_rate_limited"),
        transient=union("transient"),
        routes=tuple(routes),
        sources=("the profile of each request's host",),
    )


def get_profile(name: str | Profile) -> Profile:
    """Look a built-in profile up by name (a :class:`Profile` is returned as it is).

    ``"auto"`` is :data:`AUTO`: the profile is picked per request host.

    Raises:
        ValueError: for an unknown name, listing the known ones.
    """
    if isinstance(name, Profile):
        return name
    if name == "auto":
        return AUTO
    try:
        return PROFILES[name]
    except (KeyError, TypeError):
        known = ", ".join(["auto", *sorted(PROFILES)])
        raise ValueError(f"unknown provider profile {name!r} (known: {known})") from None


AUTO = auto()
"""Picks the built-in profile by request host (``api.github.com`` → github…), else by the
official SDK that sent the request (its headers), else generic."""


# Profiles from data (a TOML or JSON file's tables) -----------------------------------

_STATUS_KEYS = ("rate_limited", "conditional_rate_limited", "not_found", "rejected", "transient",
                "ok")
_LIST_KEYS = ("secondary_patterns", "permission_patterns", "quota_patterns",
              "retry_hint_headers", "bucket_headers", "scope_headers", "hosts", "sources",
              "route_majors", "sdk_headers", "sdk_paths")
_SCALAR_KEYS = ("rate_limit_floor", "rate_limit_multiplier", "reset_slack", "transient_hints",
                "provider_clock", "body_limit", "zero_hint_wait", "longest_wait", "write_pacing",
                "idempotency_header", "bucket_path", "graphql_cost")
_BOOL_KEYS = frozenset({"transient_hints", "provider_clock", "graphql_cost"})
_TEXT_KEYS = frozenset({"idempotency_header", "bucket_path"})
_BODY_KEYS = frozenset({"pattern", "kind", "statuses", "delay", "unit", "methods", "source"})
PROFILE_KEYS = frozenset({"name", "base", "delay", "reset", "body", "retry_hint",
                          "bucket_header", "delay_headers", "reset_units", *_STATUS_KEYS,
                          *_LIST_KEYS, *_SCALAR_KEYS})
"""The keys a profile file (or a policy file's ``[profile]`` table) may hold."""


def _list(data: Mapping[str, object], key: str) -> list[object]:
    value = data[key]
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{key} must be a list")  # noqa: TRY004 - file content
    return list(value)


def _header_units(value: object, key: str) -> tuple[tuple[str, str], ...]:
    """``[{header = "x", unit = "ms"}, …]`` or ``[["x", "ms"], …]``."""
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{key} must be a list of {{header, unit}} tables")  # noqa: TRY004 - file content
    out: list[tuple[str, str]] = []
    for item in value:
        if isinstance(item, Mapping):
            extra = sorted(set(item) - {"header", "unit"})
            if extra or "header" not in item:
                raise ValueError(f"{key}: each entry has a header and a unit (got {sorted(item)})")
            out.append((str(item["header"]), str(item.get("unit", "seconds"))))
        elif isinstance(item, (list, tuple)) and len(item) == 2:
            out.append((str(item[0]), str(item[1])))
        else:
            raise ValueError(f"{key}: each entry is a {{header, unit}} table")
    return tuple(out)


def _body_signal(item: object) -> BodySignal:
    if not isinstance(item, Mapping):
        raise ValueError("body: each entry is a table with pattern and kind")  # noqa: TRY004 - file content
    extra = sorted(set(item) - _BODY_KEYS)
    if extra:
        raise ValueError(f"body: unknown key(s) {', '.join(extra)} "
                         f"(known: {', '.join(sorted(_BODY_KEYS))})")
    if "pattern" not in item or "kind" not in item:
        raise ValueError("body: each entry needs a pattern and a kind")
    changes: dict[str, object] = {"pattern": str(item["pattern"]), "kind": str(item["kind"])}
    for key in ("delay", "unit", "source"):
        if key in item:
            changes[key] = str(item[key])
    for key in ("statuses", "methods"):
        if key in item:
            changes[key] = frozenset(_list(item, key))
    return BodySignal(**changes)  # type: ignore[arg-type]


def profile_changes(data: Mapping[str, object]) -> dict[str, object]:
    """The :class:`Profile` fields a profile table declares (its ``name`` and ``base`` aside).

    Raises:
        ValueError: an unknown key or a value of the wrong shape, named.
    """
    extra = sorted(set(data) - PROFILE_KEYS)
    if extra:
        raise ValueError(f"unknown key(s) {', '.join(extra)} (known: {', '.join(sorted(PROFILE_KEYS))})")
    changes: dict[str, object] = {}
    for key in _STATUS_KEYS:
        if key in data:
            values = _list(data, key)
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                raise ValueError(f"{key} must be a list of status codes")
            changes[key] = frozenset(values)
    for key in _LIST_KEYS:
        if key in data:
            changes[key] = tuple(str(v) for v in _list(data, key))
    for key in _SCALAR_KEYS:
        if key in data:
            value = data[key]
            if key in _BOOL_KEYS and not isinstance(value, bool):
                raise ValueError(f"{key} must be true or false")
            if key in _TEXT_KEYS and not isinstance(value, str):
                raise ValueError(f"{key} must be text")
            if key not in _BOOL_KEYS and key not in _TEXT_KEYS and (
                    isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ValueError(f"{key} must be a number")
            changes[key] = value
    for key, field_name in (("delay", "delay_headers"), ("delay_headers", "delay_headers"),
                            ("reset", "reset_units"), ("reset_units", "reset_units")):
        if key in data:
            changes[field_name] = _header_units(data[key], key)
    if "retry_hint" in data:
        changes["retry_hint_headers"] = (str(data["retry_hint"]),)
    if "bucket_header" in data:
        changes["bucket_headers"] = (str(data["bucket_header"]),)
    if "body" in data:
        changes["body_signals"] = tuple(_body_signal(item) for item in _list(data, "body"))
    return changes


def profile_from_mapping(data: Mapping[str, object], *, default_name: str = "custom") -> Profile:
    """A profile from a table (a parsed TOML or JSON profile file), derived from its ``base``.

    Keys mirror the :class:`Profile` fields, with shorthands: ``delay`` and ``reset`` are lists
    of ``{header, unit}`` tables, ``body`` a list of body-signal tables (``pattern``, ``kind``,
    ``statuses``, ``delay``, ``unit``, ``methods``, ``source``), ``retry_hint`` and
    ``bucket_header`` one header name each. Only the keys given change the base.

    Raises:
        ValueError: an unknown key, an unknown base, or a value the profile refuses.
    """
    base = get_profile(str(data.get("base", "generic")))
    changes = profile_changes(data)
    return base.derive(str(data.get("name", default_name)), **changes)
