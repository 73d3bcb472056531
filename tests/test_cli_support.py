"""Support for the CLI tests: run ``python -m retrybudget`` as a subprocess, read its files.

Not a test module of its own (it holds no tests); the ``test_cli*`` modules import it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retrybudget import SYSTEM_CLOCK

STEP = 0.05
"""Seconds between checks while polling a file or a process."""


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run ``python -m retrybudget ARGS`` to completion (bounded by ``timeout``)."""
    return subprocess.run(
        [sys.executable, "-m", "retrybudget", *args], cwd=cwd, capture_output=True, text=True,
        timeout=timeout, env={**os.environ, **(env or {})}, check=False,
    )


def start_cli(*args: str, cwd: Path | None = None,
              env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``python -m retrybudget ARGS`` without waiting for it."""
    return subprocess.Popen(
        [sys.executable, "-m", "retrybudget", *args], cwd=cwd, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})},
    )


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a results file."""
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def count_lines(path: Path) -> int:
    """Complete lines in a file (0 when it does not exist yet)."""
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    """Poll ``predicate`` every :data:`STEP` seconds until true; fail after ``timeout``."""
    for _ in range(int(timeout / STEP)):
        if predicate():
            return
        SYSTEM_CLOCK.sleep(STEP)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def digest(*paths: Path) -> str:
    """A digest of the files' bytes (absent files count as empty), to prove they did not change."""
    h = hashlib.sha256()
    for path in paths:
        h.update(path.read_bytes() if path.exists() else b"<absent>")
    return h.hexdigest()


def write_urls(path: Path, urls: Sequence[str]) -> Path:
    """Write one URL per line."""
    path.write_text("".join(u + "\n" for u in urls), "utf-8")
    return path


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """Assert the run failed with exit status 2 and one line on stderr; return that line."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]
