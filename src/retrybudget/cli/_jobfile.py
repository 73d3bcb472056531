"""The supervised job file (TOML): who owns a fetch job, what it may touch, where it writes.

::

    owner = "Dana Example <dana@example.com>"   # the person a failure is handed over to
    policy = "background"                       # a preset or a policy file
    profile = "generic"

    [inputs]
    hosts = ["127.0.0.1:8080"]                  # host or host:port, exactly
    methods = ["GET"]

    [outputs]
    results = "out/rentals.results.jsonl"
    audit = "out/rentals.audit.jsonl"
    state = "out/rentals.sqlite"

A request outside ``inputs`` is refused before any attempt (application code enforces it,
not a model) and reported as a ``rejected`` operation with zero attempts.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._cmdline import CliError
from .._files import read_user_text
from ._inputs import Op
from ._policy import _toml

__all__ = ["JobFile", "load_job_file", "sidecar", "write_job_sidecar"]

_KEYS = {"owner", "policy", "profile", "inputs", "outputs"}
_INPUT_KEYS = {"hosts", "methods"}
_OUTPUT_KEYS = {"results", "audit", "state"}


@dataclass(frozen=True, slots=True)
class JobFile:
    """A supervised job.

    Attributes:
        path: where it was read from.
        owner: the person who owns the job and its failures.
        hosts: the hosts (``host`` or ``host:port``) requests may go to.
        methods: the methods requests may use.
        outputs: ``results``, ``audit`` and ``state`` paths, where given.
        policy: the policy preset or file, if given.
        profile: the provider profile, if given.
    """

    path: str
    owner: str
    hosts: tuple[str, ...]
    methods: tuple[str, ...]
    outputs: Mapping[str, str] = field(default_factory=dict)
    policy: str | None = None
    profile: str | None = None

    def refusal(self, op: Op, method: str = "GET") -> str | None:
        """Why ``op`` is outside the allowed inputs, or None when it is allowed."""
        if method.upper() not in self.methods:
            return f"method {method.upper()} is not among the job file's allowed methods"
        parts = urllib.parse.urlsplit(op.url)
        host = (parts.hostname or "").lower()
        try:
            port = parts.port
        except ValueError:
            port = None
        if host in self.hosts or (port is not None and f"{host}:{port}" in self.hosts):
            return None
        where = host if port is None else f"{host}:{port}"
        return f"host {where} is not among the job file's allowed hosts"

    def as_dict(self) -> dict[str, Any]:
        """What the report's handover needs (no secrets: names and paths only)."""
        return {"job_file": self.path, "owner": self.owner, "inputs": {
            "hosts": list(self.hosts), "methods": list(self.methods)},
            "outputs": dict(self.outputs), "policy": self.policy, "profile": self.profile}


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(
            isinstance(v, str) and v.strip() for v in value):
        raise CliError(f"{where}: expected a non-empty list of strings")
    return tuple(v.strip() for v in value)


def load_job_file(spec: str) -> JobFile:
    """Read and check a job file.

    Raises:
        CliError: unreadable, not TOML, an unknown key, or a missing owner or inputs.
    """
    try:
        text = read_user_text(spec, f"--job-file {spec}")
    except ValueError as exc:
        raise CliError(str(exc)) from None
    data = _toml(text, f"--job-file {spec}")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise CliError(f"{spec}: unknown key {unknown[0]!r} (expected: {', '.join(sorted(_KEYS))})")
    owner = data.get("owner")
    if not isinstance(owner, str) or not owner.strip():
        raise CliError(f"{spec}: owner: a job names the person who owns it")
    inputs = data.get("inputs")
    if not isinstance(inputs, dict) or set(inputs) - _INPUT_KEYS or "hosts" not in inputs:
        raise CliError(f"{spec}: [inputs] needs hosts = [...] (and may give methods = [...])")
    outputs = data.get("outputs", {})
    if not isinstance(outputs, dict) or set(outputs) - _OUTPUT_KEYS or not all(
            isinstance(v, str) and v for v in outputs.values()):
        raise CliError(f"{spec}: [outputs] may give results, audit and state paths (strings)")
    for key in ("policy", "profile"):
        if key in data and not isinstance(data[key], str):
            raise CliError(f"{spec}: {key}: expected a string")
    hosts = tuple(h.lower() for h in _strings(inputs["hosts"], f"{spec}: inputs.hosts"))
    methods = tuple(m.upper() for m in _strings(inputs.get("methods", ["GET"]),
                                                  f"{spec}: inputs.methods"))
    return JobFile(spec, owner.strip(), hosts, methods, dict(outputs), data.get("policy"),
                   data.get("profile"))


def sidecar(audit: Path | str, kind: str) -> Path:
    """The file beside an audit file that holds its job (``job.json``) or its reviewer
    decisions (``reviews.jsonl``)."""
    audit = Path(audit)
    return audit.with_name(f"{audit.name}.{kind}")


def write_job_sidecar(audit: Path, job: JobFile, refused: Sequence[tuple[Op, str]]) -> None:
    """Record the job (owner, inputs, outputs) and what it refused beside the audit file."""
    data = job.as_dict()
    data["refused"] = [{"id": op.id, "url": op.safe_url, "why": why} for op, why in refused]
    target = sidecar(audit, "job.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data, indent=2) + "\n", "utf-8")


