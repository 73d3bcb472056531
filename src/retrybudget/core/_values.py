"""Fast construction for the frozen value classes on the hot path.

A frozen dataclass's generated ``__init__`` sets each field through
``object.__setattr__`` looked up per field; :func:`fast_init` replaces it with an
equivalent ``__init__`` that fills the slots while the instance is briefly of a plain
class with the same slots (an ordinary attribute store each; about three times as fast as
the generated one), or, for a subclass, calls each slot's descriptor. Instances stay
frozen: assignment after construction still raises
:class:`dataclasses.FrozenInstanceError`. Only for slotted dataclasses without
``__post_init__`` and without default factories.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["fast_init"]

C = TypeVar("C", bound=type[Any])


_SET_CLASS = object.__dict__["__class__"].__set__


def _draft_of(cls: type[Any]) -> type[Any] | None:
    """A plain class with ``cls``'s slots (so an instance can be switched between the two),
    or None when ``cls``'s layout is not exactly its own slots."""
    slots = cls.__dict__.get("__slots__")
    if not isinstance(slots, tuple) or cls.__bases__ != (object,):
        return None
    draft = type(f"_{cls.__name__}Draft", (), {"__slots__": slots, "__module__": cls.__module__})
    try:
        probe = object.__new__(cls)
        _SET_CLASS(probe, draft)
        _SET_CLASS(probe, cls)
    except TypeError:  # the layouts differ: keep setting each slot through its descriptor
        return None
    return draft


def fast_init(cls: C) -> C:
    """Give a frozen, slotted dataclass a faster ``__init__`` with the same signature."""
    fields = dataclasses.fields(cls)
    if hasattr(cls, "__post_init__") or any(
        f.default_factory is not dataclasses.MISSING for f in fields
    ):
        raise TypeError(f"{cls.__name__}: fast_init needs plain fields and no __post_init__")
    namespace: dict[str, Any] = {"_cls": cls, "_draft": _draft_of(cls), "_set_class": _SET_CLASS}
    params = []
    body = []
    drafted = []
    for f in fields:
        namespace[f"_set_{f.name}"] = getattr(cls, f.name).__set__
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        body.append(f"    _set_{f.name}(self, {f.name})")
        drafted.append(f"        self.{f.name} = {f.name}")
    if namespace["_draft"] is not None and fields:
        body = ["    if type(self) is _cls:", "        _set_class(self, _draft)", *drafted,
                "        _set_class(self, _cls)", "        return", *body]
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body or ["    pass"])
    exec(source, namespace)  # noqa: S102 - the source is built from field names only
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init
    return cls
