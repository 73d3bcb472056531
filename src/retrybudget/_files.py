"""Reading a user's text file, with what went wrong in the user's words (never ``[Errno N]``)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["os_reason", "read_user_text", "unreadable"]

_REASONS = {
    errno.ENOENT: "no such file or directory",
    errno.EEXIST: "a file of that name is in the way",
    errno.ENOTDIR: "not a directory",
    errno.EISDIR: "is a directory",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "the file system is read-only",
    errno.ENOSPC: "the disk is full",
}


def os_reason(exc: OSError) -> str:
    """What went wrong, in a user's words (never Python's ``[Errno N]`` form)."""
    if exc.errno in _REASONS:
        return _REASONS[exc.errno]
    return (exc.strerror or type(exc).__name__).lower()


def read_user_text(path: str | os.PathLike[str], name: str) -> str:
    """The UTF-8 text of ``path``.

    Raises:
        ValueError: ``NAME: no such file`` (is a directory, not UTF-8 text, cannot read: …).
    """
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ValueError(unreadable(name, exc)) from None


def unreadable(name: str, exc: OSError) -> str:
    """``NAME: no such file`` / ``is a directory, not a file`` / ``cannot read: REASON``."""
    if isinstance(exc, FileNotFoundError):
        return f"{name}: no such file"
    if isinstance(exc, IsADirectoryError):
        return f"{name}: is a directory, not a file"
    return f"{name}: cannot read: {os_reason(exc)}"
