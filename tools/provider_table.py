"""The provider table of ``docs/providers.md``, generated from the profile data.

``python tools/provider_table.py > docs/providers.md`` regenerates it (from the repository's
root, with the package installed); a test fails when the committed file and the profiles drift
apart. It is a tool of the repository, not part of the installed package.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

from retrybudget.core.profiles import PROVIDERS, Profile

__all__ = ["provider_table"]

_INTRO = """\
# Provider profiles

<!-- Generated from the profile data by `python tools/provider_table.py`;
     do not edit by hand (a test fails when this file and the profiles drift apart). -->

Every response is classified by the profile of its provider. `rb.PROVIDERS` lists the
built-in profiles below; `profile="auto"` (the default of `rb.background()`) picks one by
request host and uses `generic` for any other host. Derive your own in code with
`Profile.derive`, or declare one in a TOML file and load it with `rb.load_profile`
(`retrybudget check --profile FILE` checks it).

A reset is a reason to wait only when the quota is spent (`remaining: 0`) or the response is a
rate limit; a provider time that is now or past (`Retry-After: 0`) falls back to the policy's
backoff with jitter. Absolute times are measured against the response's `Date` header;
a difference under its one-second resolution is no clock skew (an exact clock sends its whole
second).

## Your own provider

A profile file declares only what differs from its base (`generic` unless `base` says):

```toml
name = "acme"
base = "generic"
transient = [500, 502, 503, 504]
retry_hint = "x-acme-retry"          # "true" retries a rejection, "false" stops a 5xx
bucket_header = "x-acme-bucket"      # the rate-limit bucket, for coordination
bucket_path = "/rpc/([a-z.]+)"       # or the bucket named by the request path (one gate each)
                                     # (or route_majors = ["projects"]: the route is the bucket)
scope_headers = ["x-acme-scope"]     # global | shared | user; a shared 429 holds no one else
write_pacing = 1.0                   # seconds between the starts of writes (POST/PATCH/PUT/DELETE)
hosts = ["api.acme.example"]
sdk_headers = ["x-acme-sdk"]         # on any other host, a request carrying it is acme's

[[delay]]                            # the first valid one wins
header = "x-acme-wait-ms"
unit = "ms"                          # seconds | ms | epoch | duration | rfc3339 | auto

[[reset]]
header = "x-ratelimit-reset"
unit = "epoch"

[[body]]                             # read from the bounded, already-read body
pattern = '"code"\\s*:\\s*"SLOW_DOWN"'
kind = "rate_limited"                # rate_limited | rejected | transient | delay | global
statuses = [400, 429]
delay = '"wait_s"\\s*:\\s*([0-9.]+)'
```

`rb.load_profile("acme.toml")` returns the `Profile` (reading TOML needs Python 3.11, or
`retrybudget[toml]` on 3.10); `rb.auto({"api.acme.example": acme})` routes its host to it;
a policy file's `[profile]` table takes the same keys.

## The IETF `RateLimit` fields

`RateLimit` and `RateLimit-Policy` (draft-ietf-httpapi-ratelimit-headers) are RFC 9651
structured fields. They are read by the library's own parser, not by the `http-sf` package:
the pure core takes no dependency, and the built-in parser is both faster and held to
`http-sf`'s reading by property tests (`tests/core/test_structured_fields.py`: any list or
dictionary `http-sf` serialises reads the same; where both accept any text, they agree).
CPU microseconds per parse, best of 15 runs of 20,000 (`python benchmarks/sf_parsers.py`, http-sf
1.5.0, on a loaded 2-core machine):

| value | built-in | http-sf |
| --- | --- | --- |
| `"default";r=50;t=30` | 4.45 | 6.26 |
| `"burst";q=100;w=60,"daily";q=1000;w=86400` | 8.75 | 12.96 |
| `limit=100, remaining=50, reset=5` | 3.84 | 8.60 |
| `100;w=10` | 3.33 | 5.91 |

## The profiles
"""


def _statuses(values: Iterable[int]) -> str:
    """``500-599`` style ranges, so a long set reads at a glance."""
    ordered = sorted(values)
    if not ordered:
        return "—"
    runs: list[tuple[int, int]] = []
    for value in ordered:
        if runs and value == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], value)
        else:
            runs.append((value, value))
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _code(values: Iterable[str]) -> str:
    shown = [f"`{v}`" for v in values]
    return ", ".join(shown) if shown else "—"


def _hosts(profile: Profile) -> str:
    """The hosts ``profile="auto"`` picks the profile for, and the SDK headers it picks it by
    on any other host."""
    hosts = _code(profile.hosts)
    if not profile.sdk_headers:
        return hosts
    names = ", ".join(f"`{h}*`" if h.endswith("-") else f"`{h}`" for h in profile.sdk_headers)
    where = " on the API's paths" if profile.sdk_paths else ""
    return f"{hosts}; elsewhere, the SDK's {names}{where}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _hints(profile: Profile) -> str:
    parts = [f"`{h}` true/false" for h in profile.retry_hint_headers]
    for signal in profile.body_signals:
        where = _statuses(signal.statuses)
        if signal.methods:
            where += " " + "/".join(sorted(signal.methods))
        parts.append(f"body `{signal.pattern}` → {signal.kind} ({where})")
    if profile.quota_patterns:
        parts.append("body " + _code(profile.quota_patterns) + " → rejected (quota)")
    if profile.secondary_patterns:
        parts.append("body " + _code(profile.secondary_patterns) + " → secondary limit")
    return "; ".join(parts) or "—"


def _rules(profile: Profile) -> str:
    parts = []
    if profile.rate_limit_floor != 1.0:
        parts.append(f"no-hint wait ≥ {profile.rate_limit_floor:g} s, x{profile.rate_limit_multiplier:g}")
    if profile.zero_hint_wait:
        parts.append(f"Retry-After 0 waits {profile.zero_hint_wait:g} s")
    if profile.reset_slack:
        parts.append(f"reset + {profile.reset_slack:g} s")
    if profile.longest_wait is not None:
        parts.append(f"waits ≤ {profile.longest_wait:g} s")
    if profile.write_pacing:
        parts.append(f"≥ {profile.write_pacing:g} s between writes")
    if profile.idempotency_header:
        parts.append(f"`{profile.idempotency_header}` on every POST")
    if profile.bucket_headers:
        parts.append("bucket " + _code(profile.bucket_headers))
    if profile.bucket_path:
        parts.append(f"bucket per path `{profile.bucket_path}`")
    if profile.route_majors:
        parts.append("bucket per route (method + path, ids after " + _code(profile.route_majors)
                     + " kept; a global limit holds every route)")
    if profile.scope_headers:
        parts.append("scope " + _code(profile.scope_headers) + " (shared: key gate stays open)")
    if profile.graphql_cost:
        parts.append("GraphQL `extensions.cost`: points left pace, a throttled query waits "
                     "until its cost is restored")
    return "; ".join(parts) or "—"


def _source_link(source: str) -> str:
    """A source as a link: a URL as it is, ``owner/repo path`` as the file on GitHub."""
    if source.startswith("http"):
        return f"<{source}>"
    repo, _, path = source.partition(" ")
    if "/" in repo and path and " " not in path:
        return f"[{source}](https://github.com/{repo}/blob/HEAD/{path})"
    return f"`{source}`"


def _sources(profile: Profile) -> str:
    return "<br>".join(_source_link(s) for s in profile.sources)


def provider_table() -> str:
    """The Markdown of ``docs/providers.md``, from :data:`~retrybudget.PROVIDERS`."""
    lines = [_INTRO, "| profile | rate limit | transient | rejected | delay headers | resets |"
             " hints | rules | hosts | sources |", "|" + " --- |" * 10]
    for p in PROVIDERS:
        rate = _statuses(p.rate_limited)
        if p.conditional_rate_limited:
            rate += f"; {_statuses(p.conditional_rate_limited)} with evidence"
        delays = ", ".join(f"`{h}` ({u})" for h, u in p.delay_headers) or "—"
        resets = ", ".join(f"`{h}` ({u})" for h, u in p.reset_units) or "by magnitude"
        row = [f"`{p.name}`", rate, _statuses(p.transient), _statuses(p.rejected), delays,
               resets, _hints(p), _rules(p), _hosts(p), _sources(p)]
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover - the regeneration command
    sys.stdout.write(provider_table())
