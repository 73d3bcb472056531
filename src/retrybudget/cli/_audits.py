"""A job's audit files as the ``report`` and ``review`` commands read them: each file (an
unreadable or malformed one is a :class:`CliError` naming it), and the reviewers' decisions
and the job's owner kept beside it (``AUDIT.reviews.jsonl``, ``AUDIT.job.json``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._cmdline import CliError
from .._files import unreadable
from ..observe import AuditFileError, AuditLog, load_audit
from ._jobfile import sidecar

__all__ = ["decisions_of", "load", "review_inputs"]


def load(audit: str) -> AuditLog:
    """Read an audit file; a malformed or unreadable one is a :class:`CliError` naming it."""
    try:
        return load_audit(audit)
    except AuditFileError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(unreadable(str(audit), exc)) from None


def decisions_of(audits: Sequence[str]) -> tuple[list[dict[str, Any]], str | None]:
    """The decisions kept beside each audit file, oldest first, and the first owner named."""
    decisions: list[dict[str, Any]] = []
    owner = None
    for audit in audits:
        found, named = review_inputs(audit)
        decisions.extend(found)
        owner = owner or named
    decisions.sort(key=_decided_at)  # the latest decision per operation wins
    return decisions, owner


def _decided_at(decision: dict[str, Any]) -> float:
    at = decision.get("decided_at")
    return float(at) if isinstance(at, (int, float)) else 0.0


def review_inputs(audit: str | Path) -> tuple[list[dict[str, Any]], str | None]:
    """The decisions and the owner kept beside an audit file (none when absent).

    Raises:
        CliError: a sidecar file exists but cannot be read.
    """
    decisions: list[dict[str, Any]] = []
    owner = None
    reviews, job = sidecar(audit, "reviews.jsonl"), sidecar(audit, "job.json")
    try:
        if reviews.exists():
            for number, line in enumerate(reviews.read_text("utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except json.JSONDecodeError:
                    raise CliError(f"{reviews}: line {number}: invalid JSON") from None
                if isinstance(item, dict):
                    decisions.append(item)
        if job.exists():
            data = json.loads(job.read_text("utf-8"))
            owner = data.get("owner") if isinstance(data, dict) else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CliError(f"{audit}: cannot read its review files ({exc})") from None
    return decisions, owner if isinstance(owner, str) else None
