"""Files the commands will write, checked before anything is written, and OS errors in plain words."""

from __future__ import annotations

import os
from pathlib import Path

from .._files import os_reason
from ._errors import CliError

__all__ = ["SQLITE_MAGIC", "cannot_listen", "check_new_file", "check_sqlite_file", "os_reason"]

SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""

def cannot_listen(host: str, port: int, exc: OSError) -> str:
    """The one-line message for an address a server command cannot bind."""
    return f"--port {port}: cannot listen on {host}:{port}: {os_reason(exc)}"


def _first_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(".")


def check_new_file(path: str | os.PathLike[str], option: str, *, create_dirs: bool) -> None:
    """Raise :class:`CliError` unless ``path`` can be written (created or appended to).

    Args:
        path: the file the command will write.
        option: the option (``--out``) that named it, for the message.
        create_dirs: whether the command creates missing parent directories itself.
    """
    target = Path(path)
    where = f"{option} {path}"
    if target.is_dir():
        raise CliError(f"{where}: is a directory, not a file")
    parent = target.parent
    existing = _first_existing(parent)
    if not existing.is_dir():
        raise CliError(f"{where}: {existing} is not a directory")
    if existing != parent and not create_dirs:
        raise CliError(f"{where}: the directory {parent} does not exist")
    if target.exists() and not os.access(target, os.W_OK):
        raise CliError(f"{where}: permission denied")
    if not target.exists() and not os.access(existing, os.W_OK | os.X_OK):
        raise CliError(f"{where}: cannot create files in {existing} (permission denied)")


def check_sqlite_file(path: str | os.PathLike[str], option: str, what: str) -> None:
    """Raise :class:`CliError` when ``path`` exists, is not empty and is not an SQLite database."""
    target = Path(path)
    if not target.is_file() or target.stat().st_size == 0:
        return
    try:
        with target.open("rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise CliError(f"{option} {path}: cannot read: {os_reason(exc)}") from None
    if head != SQLITE_MAGIC:
        raise CliError(f"{option} {path}: not {what} (not an SQLite database)")
