"""The user's files, for every command: read, checked before anything is written, and what went
wrong in the user's words (never ``[Errno N]``, never a traceback).

One home for the checks every command makes at start on a file it was given:

- :func:`read_user_text`: a text file it reads; :func:`toml_table`: the table a TOML file
  holds (a policy, a profile, a job file).
- :func:`check_writable`: a file it will create or append to (a directory, a symlink loop, a
  missing or unwritable directory, an unwritable file: refused).
- :func:`check_own_database`: an SQLite file it will open and write: refused unless it is
  empty or missing, or holds no table but the command's own (and no other application's
  :data:`APPLICATION_ID`). It is read without being written, so a refused file is unchanged.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import sys
from collections.abc import Collection
from pathlib import Path
from urllib.parse import quote

__all__ = ["APPLICATION_ID", "SQLITE_MAGIC", "check_own_database", "check_writable", "os_reason",
           "read_user_text", "toml_table", "unreadable"]

_REASONS = {
    errno.ENOENT: "no such file or directory",
    errno.EEXIST: "a file of that name is in the way",
    errno.ENOTDIR: "not a directory",
    errno.EISDIR: "is a directory",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "the file system is read-only",
    errno.ENOSPC: "the disk is full",
    errno.ELOOP: "a symlink loop",
}

SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""

APPLICATION_ID = 0x72627564
"""``PRAGMA application_id`` of every SQLite file retrybudget creates (``rbud``)."""


def os_reason(exc: OSError) -> str:
    """What went wrong, in a user's words (never Python's ``[Errno N]`` form)."""
    if exc.errno in _REASONS:
        return _REASONS[exc.errno]
    return (exc.strerror or type(exc).__name__).lower()


def read_user_text(path: str | os.PathLike[str], name: str, *, missing: str = "no such file") -> str:
    """The UTF-8 text of ``path``.

    Raises:
        ValueError: ``NAME: MISSING`` (is a directory, not UTF-8 text, cannot read: …).
    """
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{name}: {missing}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ValueError(unreadable(name, exc)) from None


def toml_table(text: str) -> dict[str, object]:
    """The table a TOML document holds (Python 3.11+: ``tomllib``; 3.10: ``tomli`` if installed).

    Raises:
        ValueError: invalid TOML; on Python 3.10 without ``tomli`` (``retrybudget[toml]``),
            that TOML needs 3.11.
    """
    if sys.version_info >= (3, 11):
        import tomllib as toml  # noqa: PLC0415 - stdlib on 3.11+, looked up when used
    else:  # pragma: no cover - Python 3.10
        try:
            import tomli as toml  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415
        except ModuleNotFoundError:
            raise ValueError("reading TOML needs Python 3.11 or later, or "
                             "retrybudget[toml] on 3.10") from None
    try:
        return dict(toml.loads(text))
    except toml.TOMLDecodeError as exc:
        raise ValueError(f"invalid TOML: {exc}") from None


def unreadable(name: str, exc: OSError) -> str:
    """``NAME: no such file`` / ``is a directory, not a file`` / ``cannot read: REASON``."""
    if isinstance(exc, FileNotFoundError):
        return f"{name}: no such file"
    if isinstance(exc, IsADirectoryError):
        return f"{name}: is a directory, not a file"
    return f"{name}: cannot read: {os_reason(exc)}"


def _stat(path: Path, where: str) -> os.stat_result | None:
    """``path``'s status, following links; None when nothing is there (a dangling link too).

    Raises:
        ValueError: ``WHERE: a symlink loop`` (permission denied, …).
    """
    try:
        return path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ENOTDIR:
            return None
        raise ValueError(f"{where}: {os_reason(exc)}") from None


def _probe(path: Path, name: str) -> None:
    """Open an existing file to append, write nothing and close it: what the OS will allow
    (``os.access`` tells root every file is writable; this asks the file system)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK))
    except OSError as exc:
        raise ValueError(f"{name}: cannot write: {os_reason(exc)}") from None


def check_writable(path: str | os.PathLike[str], name: str, *, create_dirs: bool) -> None:
    """Refuse a file the command could not create or append to, before anything is written.

    Args:
        path: the file the command will write.
        name: how the message names it (``--audit out/a.jsonl``).
        create_dirs: whether the command creates missing parent directories itself.

    Raises:
        ValueError: one line naming the file: a directory, a symlink loop (the file or a
            directory above it), a missing or unwritable directory, an unwritable file.
    """
    target = Path(path)
    found = _stat(target, name)
    if found is not None and stat.S_ISDIR(found.st_mode):
        raise ValueError(f"{name}: is a directory, not a file")
    if found is not None and stat.S_ISREG(found.st_mode):
        _probe(target, name)
    parent = target.parent
    for existing in (parent, *parent.parents):
        status = _stat(existing, f"{name}: {existing}")
        if status is not None:
            break
    else:  # pragma: no cover - the root always exists
        existing, status = Path("."), None
    if status is None or not stat.S_ISDIR(status.st_mode):
        raise ValueError(f"{name}: {existing} is not a directory")
    if existing != parent and not create_dirs:
        raise ValueError(f"{name}: the directory {parent} does not exist")
    if found is None and not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{name}: cannot create files in {existing} (permission denied)")


def _tables(path: Path) -> tuple[int, list[str]]:
    """The application id and table names of an SQLite file, read without writing to it."""
    uri = f"file:{quote(os.fspath(path.resolve()))}"
    # immutable first: nothing is made beside the file (a WAL database opened read-only
    # gets -wal and -shm files); read-only if that fails (the file is changing under us)
    for flags in ("?immutable=1", "?mode=ro"):
        try:
            conn = sqlite3.connect(uri + flags, uri=True)
        except sqlite3.Error:
            continue
        try:
            app = int(conn.execute("PRAGMA application_id").fetchone()[0])
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
            return app, sorted(str(row[0]) for row in rows)
        except sqlite3.Error:
            continue
        finally:
            conn.close()
    raise sqlite3.DatabaseError("cannot be read as a database")


def check_own_database(path: str | os.PathLike[str], name: str, what: str,
                       tables: Collection[str] | None, *, required: str | None = None) -> None:
    """Refuse an SQLite file that is not the command's own, without writing to it.

    A missing or empty file is the command's to create. An existing one is its own when it
    is an SQLite database whose ``application_id`` is 0 or :data:`APPLICATION_ID` and whose
    tables are all among ``tables`` (SQLite's own ``sqlite_*`` tables aside) and, when it
    holds any table, include ``required``.

    Args:
        path: the database file.
        name: how the message names it (``--db gateway.sqlite3``).
        what: what the file should be (``a gateway database``).
        tables: the tables the command's schema holds (None: any).
        required: a table the command's own file always holds.

    Raises:
        ValueError: one line: not an SQLite database, another application's database, or a
            database holding tables that are not the command's.
    """
    target = Path(path)
    found = _stat(target, name)
    if found is None or not stat.S_ISREG(found.st_mode) or found.st_size == 0:
        return
    try:
        with target.open("rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise ValueError(f"{name}: cannot read: {os_reason(exc)}") from None
    if head != SQLITE_MAGIC:
        raise ValueError(f"{name}: not {what} (not an SQLite database); it was left unchanged")
    try:
        app, names = _tables(target)
    except sqlite3.Error:
        raise ValueError(f"{name}: not {what} (an unreadable SQLite database); it was left "
                         "unchanged") from None
    if app not in (0, APPLICATION_ID):
        raise ValueError(f"{name}: not {what} (another application's SQLite database, "
                         f"application_id {app:#x}); it was left unchanged")
    names = [table for table in names if not table.startswith("sqlite_")]
    if required is not None and names and required not in names:
        raise ValueError(f"{name}: not {what} (an SQLite database without a {required} table); "
                         "it was left unchanged")
    foreign = [table for table in names if tables is not None and table not in tables]
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise ValueError(f"{name}: not {what} (an SQLite database with other tables: {shown}); "
                         "it was left unchanged")
