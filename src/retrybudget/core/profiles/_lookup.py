"""Finding a profile: by name (:func:`get_profile`) or per request host (:func:`auto`)."""

from __future__ import annotations

from collections.abc import Mapping

from ._builtins import PROFILES
from ._model import Profile


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
