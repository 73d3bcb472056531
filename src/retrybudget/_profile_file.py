"""Reading a user profile from a TOML file (the pure parsing lives in ``core.profiles``)."""

from __future__ import annotations

import os
from pathlib import Path

from ._files import read_user_text, toml_table
from .core.profiles import Profile, profile_changes, profile_from_mapping

__all__ = ["load_profile", "profile_from_toml", "read_profile"]


def load_profile(path: str | os.PathLike[str]) -> Profile:
    """The profile a TOML file declares, derived from its ``base`` (``generic`` by default)::

        name = "acme"
        base = "generic"
        transient = [500, 502, 503, 504]
        retry_hint = "x-acme-retry"          # true / false, both ways
        bucket_header = "x-acme-bucket"

        [[delay]]                            # first valid one wins
        header = "x-acme-wait-ms"
        unit = "ms"                          # seconds | ms | epoch | duration | rfc3339 | auto

        [[reset]]
        header = "x-ratelimit-reset"
        unit = "epoch"

        [[body]]
        pattern = '"code":\\s*"SLOW_DOWN"'
        kind = "rate_limited"                # rate_limited | rejected | transient | delay
        statuses = [400, 429]

    Raises:
        ValueError: an unreadable file, invalid TOML or a value the profile refuses, with the
            file's name.
    """
    return read_profile(path)[0]


def read_profile(path: str | os.PathLike[str]) -> tuple[Profile, dict[str, object]]:
    """The profile a TOML file declares and the fields it changes on its base.

    Raises:
        ValueError: as :func:`load_profile`.
    """
    name = os.fspath(path)
    text = read_user_text(name, name, missing="no such profile file")
    try:
        data = toml_table(text)
        return (profile_from_mapping(data, default_name=Path(name).stem or "custom"),
                profile_changes(data))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{name}: {exc}") from None


def profile_from_toml(text: str, *, default_name: str = "custom") -> Profile:
    """A profile from the text of a TOML profile file (see :func:`profile_from_mapping`).

    Raises:
        ValueError: invalid TOML, or anything :func:`profile_from_mapping` refuses.
    """
    return profile_from_mapping(toml_table(text), default_name=default_name)
