"""Construction of the core's frozen value classes, by field name.

A frozen dataclass's generated ``__init__`` sets each field through
``object.__setattr__`` looked up per field; :func:`fast_init` replaces it with an
equivalent ``__init__`` that calls each slot's descriptor directly (about twice
as fast). Instances stay frozen: assignment after construction still raises
:class:`dataclasses.FrozenInstanceError`. Only for slotted dataclasses without
``__post_init__`` and without default factories.

:func:`evolve` is the one way the core derives a value from another: the changed fields
by name, every other field copied, so a value's field list is written once (in its class)
and two fields of one type cannot be swapped by position. A new value is built with its
class's keywords (``Outcome(reason=..., attempts=...)``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["evolve", "fast_init"]

C = TypeVar("C", bound=type[Any])
V = TypeVar("V")

_EVOLVERS: dict[type[Any], Any] = {}
"""Each :func:`fast_init` class's field-by-field copier (see :func:`evolve`)."""


def fast_init(cls: C) -> C:
    """Give a frozen, slotted dataclass a faster ``__init__`` with the same signature."""
    fields = dataclasses.fields(cls)
    if hasattr(cls, "__post_init__") or any(
        f.default_factory is not dataclasses.MISSING for f in fields
    ):
        raise TypeError(f"{cls.__name__}: fast_init needs plain fields and no __post_init__")
    namespace: dict[str, Any] = {}
    params = []
    body = []
    for f in fields:
        namespace[f"_set_{f.name}"] = getattr(cls, f.name).__set__
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        body.append(f"    _set_{f.name}(self, {f.name})")
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body or ["    pass"])
    exec(source, namespace)  # noqa: S102 - the source is built from field names only
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init
    _EVOLVERS[cls] = _evolver(cls, fields)
    return cls


def _evolver(cls: type[Any], fields: tuple[dataclasses.Field[Any], ...]) -> Any:
    """A function ``(value, changes) -> copy`` for ``cls``: the changes by name, the rest copied."""
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    body = ["    new = _new(_cls)", "    take = changes.pop"]
    for f in fields:
        namespace[f"_set_{f.name}"] = getattr(cls, f.name).__set__
        body.append(f"    _set_{f.name}(new, take({f.name!r}, value.{f.name}))")
    body += ["    if changes:", "        raise TypeError(f'{_cls.__name__} has no field {sorted(changes)}')",
             "    return new"]
    exec("def evolve(value, changes):\n" + "\n".join(body), namespace)  # noqa: S102 - field names only
    return namespace["evolve"]


def evolve(value: V, /, **changes: Any) -> V:
    """A copy of ``value`` (of a :func:`fast_init` class) with ``changes`` applied by field name.

    What ``dataclasses.replace`` does, faster, and always of the class that declared the
    fields (a subclass that fills fields with class attributes yields its base). An unknown
    field name raises :class:`TypeError`.
    """
    kind = type(value)
    copier = _EVOLVERS.get(kind)
    if copier is None:
        copier = next((_EVOLVERS[base] for base in kind.__mro__ if base in _EVOLVERS), None)
        if copier is None:
            raise TypeError(f"{kind.__name__} is not a fast_init value class")
    result: V = copier(value, changes)
    return result
