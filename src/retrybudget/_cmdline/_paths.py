"""Files the commands will write, checked before anything is written (the checks themselves
live in :mod:`retrybudget._files`, shared with the gateway), and OS errors in plain words."""

from __future__ import annotations

import os
from collections.abc import Collection

from .._files import check_own_database, check_writable, os_reason
from ._errors import CliError

__all__ = ["cannot_listen", "check_new_file", "check_sqlite_file", "os_reason"]


def cannot_listen(host: str, port: int, exc: OSError) -> str:
    """The one-line message for an address a server command cannot bind."""
    return f"--port {port}: cannot listen on {host}:{port}: {os_reason(exc)}"


def check_new_file(path: str | os.PathLike[str], option: str, *, create_dirs: bool) -> None:
    """Raise :class:`CliError` unless ``path`` can be written (created or appended to).

    Args:
        path: the file the command will write.
        option: the option (``--out``) that named it, for the message.
        create_dirs: whether the command creates missing parent directories itself.
    """
    try:
        check_writable(path, f"{option} {path}", create_dirs=create_dirs)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def check_sqlite_file(path: str | os.PathLike[str], option: str, what: str,
                      tables: Collection[str]) -> None:
    """Raise :class:`CliError` unless ``path`` is missing, empty or the command's own database
    (its ``tables`` only); a refused file is not written to."""
    try:
        check_own_database(path, f"{option} {path}", what, tables)
    except ValueError as exc:
        raise CliError(str(exc)) from None
