"""Policies for the command line: a preset name, or a TOML/JSON file whose keys mirror Policy.

A policy file (``docs/cli.md`` shows one)::

    base = "background"          # interactive | background | default (Policy())
    name = "nightly-sync"
    max_attempts = 4
    deadline = 120               # seconds; "none" (or JSON null) for no deadline: unsafe
    rate_limit = "wait"          # or "fail_fast"
    max_server_wait = 60
    idempotent_methods = ["GET", "HEAD"]

    [backoff]                    # base, cap, multiplier, jitter (none | full | equal)
    base = 0.5
    cap = 10

    [profile]                    # or profile = "github"
    base = "generic"             # the built-in profile to derive from
    transient = [502, 503, 504]  # any profile-file key (docs/providers.md): statuses, delay…

Only the keys given change the base; anything invalid is refused with the file's name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .._cmdline import CliError
from .._files import read_user_text, toml_table
from ..core.policy import PRESETS, Backoff, Policy, PolicyError
from ..core.profiles import PROFILES, Profile, get_profile, profile_changes

__all__ = ["UserPolicy", "load_policy", "with_overrides"]

_POLICY_KEYS = frozenset({
    "base", "name", "max_attempts", "deadline", "rate_limit", "max_server_wait",
    "min_attempt_time", "attempt_timeout", "idempotent_methods", "retry_writes_with_key",
    "profile", "backoff",
})
_BACKOFF_KEYS = frozenset({"base", "cap", "multiplier", "jitter"})
@dataclass(frozen=True, slots=True)
class UserPolicy:
    """A policy from the command line, and the profile changes it declared.

    Attributes:
        policy: the policy.
        source: where it came from (a preset name or a file path).
        profile_changes: the Profile fields the file changed (``check`` applies them on top of
            each case's provider profile, so a user's classification is what gets checked).
    """

    policy: Policy
    source: str
    profile_changes: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def for_profile(self, profile: Profile) -> Profile:
        """``profile`` with this policy's profile changes applied (itself when there are none)."""
        if not self.profile_changes:
            return profile
        if profile.routes:  # "auto": the changes apply to whichever profile a host picks
            routes = tuple((host, self.for_profile(p)) for host, p in profile.routes)
            return profile.derive(profile.name, routes=routes)
        return profile.derive(f"{profile.name}+{self.policy.name}", **self.profile_changes)


def _unknown(keys: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    extra = sorted(set(keys) - known)
    if extra:
        raise CliError(f"{where}: unknown key(s) {', '.join(extra)} (known: {', '.join(sorted(known))})")


def _profile(value: object, where: str) -> tuple[Profile, dict[str, Any]]:
    if isinstance(value, str):
        return get_profile(value), {}
    if not isinstance(value, dict):
        raise CliError(f"{where}: 'profile' must be a profile name or a table")
    try:
        changes = profile_changes(value)  # the keys of a profile file (core.profiles)
    except ValueError as exc:
        raise CliError(f"{where}: [profile]: {exc}") from None
    base = get_profile(str(value.get("base", "generic")))
    name = str(value.get("name", f"{base.name}-custom"))
    return base.derive(name, **changes), changes


def _duration(value: object) -> object:
    return None if value is None or (isinstance(value, str) and value.lower() == "none") else value


def _build(data: Mapping[str, Any], where: str) -> UserPolicy:
    _unknown(data, _POLICY_KEYS, where)
    base_name = str(data.get("base", "default"))
    if base_name not in PRESETS:
        raise CliError(f"{where}: unknown base {base_name!r} (known: {', '.join(sorted(PRESETS))})")
    policy = PRESETS[base_name]()
    changes: dict[str, Any] = {k: v for k, v in data.items() if k not in ("base", "profile", "backoff")}
    changes.setdefault("name", Path(where).stem or "custom")
    for key in ("deadline", "max_server_wait", "attempt_timeout"):
        if key in changes:
            changes[key] = _duration(changes[key])
    if "idempotent_methods" in changes and isinstance(changes["idempotent_methods"], list):
        changes["idempotent_methods"] = frozenset(changes["idempotent_methods"])
    profile_changes: dict[str, Any] = {}
    if "profile" in data:
        changes["profile"], profile_changes = _profile(data["profile"], where)
    if "backoff" in data:
        backoff = data["backoff"]
        if not isinstance(backoff, dict):
            raise CliError(f"{where}: 'backoff' must be a table")
        _unknown(backoff, _BACKOFF_KEYS, f"{where}: [backoff]")
        current = policy.backoff
        merged = {k: backoff.get(k, getattr(current, k)) for k in _BACKOFF_KEYS}
        changes["backoff"] = Backoff(**merged)
    return UserPolicy(policy.replace(**changes), where, MappingProxyType(profile_changes))


def _toml(text: str, where: str) -> dict[str, Any]:
    """The table a TOML file's ``text`` holds; :class:`CliError` naming ``where`` if it is not TOML."""
    try:
        return toml_table(text)
    except ValueError as exc:
        raise CliError(f"{where}: {exc}") from None


def _read(path: Path) -> Mapping[str, Any]:
    name = str(path)
    try:
        text = read_user_text(path, f"--policy {name}", missing="no such file, and not a preset "
                              f"({', '.join(sorted(PRESETS))})")
    except ValueError as exc:
        raise CliError(str(exc)) from None
    data: object
    if path.suffix.lower() == ".toml":
        data = _toml(text, f"--policy {name}")
    elif path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CliError(f"--policy {name}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
    else:
        raise CliError(f"--policy {name}: a policy file ends in .toml or .json "
                       f"(or name a preset: {', '.join(sorted(PRESETS))})")
    if not isinstance(data, dict):
        raise CliError(f"--policy {name}: a policy file holds one object of Policy fields")
    return data


def load_policy(spec: str) -> UserPolicy:
    """A preset (``interactive``, ``background``, ``default``) or a ``.toml``/``.json`` file.

    Raises:
        CliError: an unknown preset, an unreadable or malformed file, or invalid values.
    """
    if spec in PRESETS:
        return UserPolicy(PRESETS[spec](), spec)
    try:
        return _build(_read(Path(spec)), spec)
    except (PolicyError, ValueError, TypeError) as exc:
        if isinstance(exc, CliError):
            raise
        raise CliError(f"--policy {spec}: invalid policy: {exc}") from None


def with_overrides(
    user: UserPolicy,
    *,
    profile: str | None = None,
    deadline: float | None = None,
    attempts: int | None = None,
) -> UserPolicy:
    """Apply ``--profile``, ``--deadline`` and ``--attempts``; raises :class:`CliError`."""
    changes: dict[str, Any] = {}
    if profile is not None:
        try:
            chosen = get_profile(profile)  # a built-in name or "auto"
        except ValueError:
            raise CliError(f"--profile {profile}: unknown provider profile "
                           f"(known: {', '.join(sorted(PROFILES))}, auto)") from None
        changes["profile"] = user.for_profile(chosen)
    if deadline is not None:
        changes["deadline"] = deadline
    if attempts is not None:
        changes["max_attempts"] = attempts
    if not changes:
        return user
    try:
        return UserPolicy(user.policy.replace(**changes), user.source, user.profile_changes)
    except PolicyError as exc:
        raise CliError(f"invalid option: {exc}") from None
