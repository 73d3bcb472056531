"""What a profile is: :class:`Profile` and :class:`BodySignal`, frozen values, with the
per-request steps they take (a coordination key, the host an ``auto`` profile picks by) and
:data:`GENERIC`, the contract for unknown providers."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .._dialect import DEFAULT_HEADER_RULES, HeaderRules, QuotaFamily

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
        quota_families: the provider's own quota header families
            (:class:`QuotaFamily`: Anthropic's ``anthropic-ratelimit-requests-*``…), beyond
            the shared ``x-ratelimit-*`` and IETF ``RateLimit`` ones. The header reader reads
            every built-in profile's on any response, before a profile is picked; a profile
            of your own's are not read.
        evidence_prefixes: prefixes of the provider's own rate-limit headers
            (``anthropic-ratelimit-``), kept as evidence with the shared ones (a built-in
            profile's; see ``EVIDENCE_PREFIXES``).
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
    quota_families: tuple[QuotaFamily, ...] = ()
    evidence_prefixes: tuple[str, ...] = ()
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
        if not all(isinstance(f, QuotaFamily) for f in self.quota_families):
            raise ValueError("quota_families must be QuotaFamily values")
        object.__setattr__(self, "quota_families", tuple(self.quota_families))
        for f in ("retry_hint_headers", "bucket_headers", "scope_headers", "hosts",
                  "route_majors", "evidence_prefixes"):
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
        """The response headers this profile reads besides the shared rate-limit families
        (its delay, reset, hint, bucket and scope headers and its own quota families')."""
        profiles = [p for _, p in self.routes] if self.routes else [self]
        return frozenset(
            name for p in profiles
            for name in (*(h for h, _ in p.delay_headers), *(h for h, _ in p.reset_units),
                         *p.retry_hint_headers, *p.bucket_headers, *p.scope_headers,
                         *(n for family in p.quota_families for n in family.names))
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
