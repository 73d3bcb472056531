"""How to name the ``retrybudget`` command in a hint so that the hint runs as printed."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

__all__ = ["program"]


def program() -> str:
    """``retrybudget`` when that name on PATH is the running command, else the way to run it.

    After ``make demo`` the command lives in ``.venv/bin`` and is not on PATH; a hint that says
    ``retrybudget report ...`` would answer "command not found", so it names the path the
    command was started by (relative to the working directory when that is shorter).
    """
    argv0 = Path(sys.argv[0])
    found = shutil.which("retrybudget")
    if found is not None and argv0.name == "retrybudget" and Path(found).resolve() == argv0.resolve():
        return "retrybudget"
    if argv0.name == "retrybudget" and argv0.exists():
        relative = os.path.relpath(argv0)
        shown = relative if len(relative) < len(str(argv0)) else str(argv0)
        return shlex.quote(shown if os.sep in shown else f".{os.sep}{shown}")
    return f"{shlex.quote(sys.executable)} -m retrybudget"
