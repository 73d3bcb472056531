"""A library's exception reader is found by the library's name: adding a library is adding its
module to ``retrybudget._native``, with no list to edit.

The library below is written to disk as a real package, its reader as a real module of
``retrybudget._native`` (the package's search path extended to a temporary directory): the
same import a library shipped with retrybudget takes.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import requests

import retrybudget._native as native
from retrybudget._native import _observe as observe_module
from retrybudget._native import observe_error
from retrybudget.core.classify import FailureKind, FailureSeen, ResponseSeen

LIBRARY = "acmehttp_for_readers"


def _library_modules() -> list[str]:
    return [info.name for info in pkgutil.iter_modules(native.__path__)
            if not info.name.startswith("_")]


def test_each_library_module_has_a_reader() -> None:
    names = _library_modules()
    assert {"httpx", "httpx2", "requests", "aiohttp", "urllib3", "urllib"} <= set(names)
    for name in names:
        module = importlib.import_module(f"retrybudget._native.{name}")
        assert callable(module.read), name


def test_the_libraries_shipped_are_read_through_their_module() -> None:
    connect = observe_error(httpx.ConnectError("refused"))
    assert isinstance(connect, FailureSeen)
    assert connect.kind is FailureKind.CONNECT
    timeout = observe_error(requests.exceptions.ReadTimeout("slow"))
    assert isinstance(timeout, FailureSeen)
    assert timeout.kind is FailureKind.TIMEOUT


@pytest.fixture
def new_library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A library ``acmehttp_for_readers`` on the path, and its reader as a module of
    ``retrybudget._native`` (in a directory added to the package's search path)."""
    (tmp_path / "lib" / LIBRARY).mkdir(parents=True)
    (tmp_path / "lib" / LIBRARY / "__init__.py").write_text(textwrap.dedent("""\
        class AcmeError(Exception):
            status = None

        class AcmeStatusError(AcmeError):
            def __init__(self, status):
                super().__init__(status)
                self.status = status

        class AcmeConnectError(AcmeError):
            pass
        """))
    (tmp_path / "readers").mkdir()
    (tmp_path / "readers" / f"{LIBRARY}.py").write_text(textwrap.dedent(f"""\
        from retrybudget.core.classify import FailureKind, FailureSeen, ResponseSeen

        def read(error):
            import {LIBRARY} as acme

            if isinstance(error, acme.AcmeStatusError):
                return ResponseSeen(error.status, (), "", "", None)
            if isinstance(error, acme.AcmeConnectError):
                return FailureSeen(FailureKind.CONNECT, type(error).__name__)
            return None
        """))
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    monkeypatch.setattr(native, "__path__", [*native.__path__, str(tmp_path / "readers")])
    monkeypatch.setitem(observe_module._READERS, LIBRARY, None)  # restored (removed) after
    del observe_module._READERS[LIBRARY]
    yield LIBRARY
    for name in (LIBRARY, f"retrybudget._native.{LIBRARY}"):
        sys.modules.pop(name, None)


def test_a_new_library_is_read_by_its_module_alone(new_library: str) -> None:
    acme = importlib.import_module(new_library)
    reader = f"retrybudget._native.{new_library}"
    assert reader not in sys.modules  # nothing imports a library's reader up front

    seen = observe_error(acme.AcmeStatusError(429))
    assert isinstance(seen, ResponseSeen)
    assert seen.status == 429
    assert reader in sys.modules  # imported once one of the library's errors was seen

    class Mine(acme.AcmeConnectError):  # a user's subclass reads as the library's own
        pass

    failed = observe_error(Mine())
    assert isinstance(failed, FailureSeen)
    assert failed.kind is FailureKind.CONNECT


def test_an_error_of_a_library_with_no_reader_is_none_of_theirs() -> None:
    class Plain(Exception):
        pass

    Plain.__module__ = "no_such_library_for_readers.errors"
    assert observe_error(Plain()) is None
    assert observe_error(ValueError("a bug")) is None
