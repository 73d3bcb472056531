"""Scripted fixtures for the HTTP sandbox: fixture files, script steps, header placeholders.

The acceptance-fixture format is defined once, in :mod:`retrybudget.testing` (the step
parser :func:`parse_script` and the placeholder grammar of
:func:`~retrybudget.testing.expand_placeholders`), so the in-process provider and the HTTP
sandbox read every script alike. Placeholders are resolved against the provider's wall clock
when the step is answered (after its delay). This module adds reading fixture files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from retrybudget.testing import FixtureError, Step, expand_placeholders, parse_script

__all__ = [
    "FixtureError",
    "Step",
    "load_fixture_file",
    "parse_script",
    "resolve_placeholders",
]

def resolve_placeholders(value: str, now_wall: float) -> str:
    """Replace ``{epoch+N}`` and ``{httpdate+N}`` in ``value`` using the wall time ``now_wall``.

    The fixture format's one grammar: :func:`retrybudget.testing.expand_placeholders`.
    """
    return expand_placeholders(value, now_wall)


def load_fixture_file(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    """Read a fixture file and return ``{fixture id: script}``, every script validated.

    The file is either in the acceptance-fixture format (an object whose ``"cases"``
    list holds objects with ``"id"`` and ``"script"``) or a plain object mapping
    fixture ids to scripts.

    Raises:
        FixtureError: the file is not JSON or not in either format.
        OSError: the file cannot be read.
    """
    text = Path(path).read_text(encoding="utf-8")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FixtureError(f"{path}: not JSON: {exc}") from None
    scripts: dict[str, list[dict[str, Any]]] = {}
    if isinstance(document, dict) and isinstance(document.get("cases"), list):
        for position, case in enumerate(document["cases"]):
            if not isinstance(case, dict) or not isinstance(case.get("id"), str):
                raise FixtureError(f"{path}: case {position} has no string id")
            scripts[case["id"]] = case.get("script")  # type: ignore[assignment]  # checked below
    elif isinstance(document, dict):
        scripts = dict(document)
    else:
        raise FixtureError(f"{path}: expected an object with 'cases' or a map of scripts")
    for fixture_id, script in scripts.items():
        _check_script(path, fixture_id, script)
    return scripts


def _check_script(path: str | Path, fixture_id: str, script: object) -> None:
    try:
        parse_script(script)
    except FixtureError as exc:
        raise FixtureError(f"{path}: fixture {fixture_id!r}: {exc}") from None
