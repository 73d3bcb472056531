"""The built-in provider profiles, as data: each provider's documented signals, one entry each
(a module-level :class:`Profile`; :data:`PROFILES` gathers them in the order they stand)."""

from __future__ import annotations

from .._dialect import QuotaFamily
from ._model import GENERIC, BodySignal, Profile

_RETRY_AFTER = (("retry-after", "seconds"),)
_STAINLESS = (("retry-after-ms", "ms"), ("retry-after", "seconds"))


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
    quota_families=tuple(
        QuotaFamily(f"x-ratelimit-limit-{kind}", f"x-ratelimit-remaining-{kind}",
                    (f"x-ratelimit-reset-{kind}",))
        for kind in ("requests", "tokens")
    ),
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

_ANTHROPIC_QUOTAS = ("requests", "tokens", "input-tokens", "output-tokens")

ANTHROPIC = Profile(
    "anthropic",
    # anthropic-sdk-python src/anthropic/_base_client.py: 408, 409, 429, >= 500 (529 too).
    transient=frozenset({408, 409, *range(500, 600)}),
    quota_patterns=(r"enforced_spend_limit_reached",),  # monthly spend cap: not fixed by waiting
    retry_hint_headers=("x-should-retry",),  # _base_client.py
    delay_headers=_STAINLESS,  # _base_client.py: retry-after-ms, then retry-after
    # anthropic-ratelimit-*-reset are RFC 3339 times: https://docs.anthropic.com/en/api/rate-limits
    reset_units=tuple((f"anthropic-ratelimit-{k}-reset", "rfc3339") for k in _ANTHROPIC_QUOTAS),
    quota_families=tuple(
        QuotaFamily(f"anthropic-ratelimit-{k}-limit", f"anthropic-ratelimit-{k}-remaining",
                    (f"anthropic-ratelimit-{k}-reset",))
        for k in _ANTHROPIC_QUOTAS
    ),
    evidence_prefixes=("anthropic-ratelimit-",),
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
    quota_families=(QuotaFamily("x-rate-limit-limit", "x-rate-limit-remaining",
                                ("x-rate-limit-reset",)),),
    evidence_prefixes=("x-rate-limit-",),
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
    p.name: p for p in list(globals().values()) if isinstance(p, Profile)
}
"""The built-in profiles by name: every profile this module holds (``generic`` first, then each
provider's entry above, in its order). A provider's entry is all it takes to be built in."""

PROVIDERS: tuple[Profile, ...] = tuple(PROFILES.values())
"""The built-in provider profiles, in documentation order."""

_PROVIDER_NAMES: tuple[str, ...] = tuple(
    name for name, value in list(globals().items())
    if isinstance(value, Profile) and value is not GENERIC and not name.startswith("_")
)
"""The module-level names of the providers' profiles (``GITHUB``, ``STRIPE``…), each public on
:mod:`retrybudget.core.profiles`."""
