"""The public face: ``__all__`` lists exactly the public names, and each is documented."""

from __future__ import annotations

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
