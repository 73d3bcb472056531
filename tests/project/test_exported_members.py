"""The public face: ``__all__`` lists exactly the public names, and each is documented."""

from __future__ import annotations

import dataclasses
import typing

import pytest

import retrybudget


def test_all_matches_the_public_names() -> None:
    public = {name for name in dir(retrybudget) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(retrybudget, name)).__name__ == "module"}
    assert set(retrybudget.__all__) == public - modules


def test_all_is_sorted() -> None:
    consts = [n for n in retrybudget.__all__ if n.isupper()]
    rest = [n for n in retrybudget.__all__ if not n.isupper()]
    assert consts == sorted(consts)
    assert rest == sorted(rest, key=lambda n: (n[0].islower(), n))


def test_every_public_name_has_a_docstring() -> None:
    for name in retrybudget.__all__:
        obj = getattr(retrybudget, name)
        if callable(obj) and not isinstance(obj, type(retrybudget.SYSTEM_CLOCK)):
            assert (obj.__doc__ or "").strip(), name


def _named_types(hint: object) -> set[type]:
    """The classes a type hint names, however deeply nested (``Callable[[A], B]``, ``A | B``)."""
    if isinstance(hint, list):
        return set().union(*(_named_types(h) for h in hint))
    origin = typing.get_origin(hint) or hint
    found = {origin} if isinstance(origin, type) else set()
    return found.union(*(_named_types(arg) for arg in typing.get_args(hint)))


@pytest.mark.parametrize("method", ["run", "arun", "call", "acall", "on"])
def test_what_a_retrier_takes_and_gives_is_exported(method: str) -> None:
    seen: set[type] = set()
    todo = _named_types(list(typing.get_type_hints(getattr(retrybudget.Retrier, method)).values()))
    while todo:  # the classes named, and the classes their fields name
        cls = todo.pop()
        seen.add(cls)
        if dataclasses.is_dataclass(cls) and cls.__module__.startswith("retrybudget."):
            todo |= _named_types(list(typing.get_type_hints(cls).values())) - seen
    ours = {cls for cls in seen if cls.__module__.startswith("retrybudget.")}
    assert (retrybudget.BoundRetrier if method == "on" else retrybudget.Outcome) in ours
    if method in {"run", "arun"}:
        assert {retrybudget.Attempt, retrybudget.AttemptResult, retrybudget.RequestInfo} <= ours
    missing = sorted(cls.__qualname__ for cls in ours
                     if getattr(retrybudget, cls.__name__, None) is not cls)
    assert not missing, f"Retrier.{method} names types the package face does not export: {missing}"
