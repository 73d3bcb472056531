"""Construction of the core's frozen value classes, by field name.

A frozen dataclass's generated ``__init__`` sets each field through
``object.__setattr__`` looked up per field; :func:`fast_init` replaces it with an
equivalent ``__init__`` that fills the slots while the instance is briefly of a plain
class with the same slots (an ordinary attribute store each; about three times as fast as
the generated one), or, for a subclass, calls each slot's descriptor. Instances stay
frozen: assignment after construction still raises
:class:`dataclasses.FrozenInstanceError`. Only for slotted dataclasses without
``__post_init__`` and without default factories.

:func:`evolve` is the one way the core derives a value from another: the changed fields
by name, every other field copied, so a value's field list is written once (in its class)
and two fields of one type cannot be swapped by position. A new value is built with its
class's keywords (``Outcome(reason=..., attempts=...)``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, cast

__all__ = ["evolve", "evolver", "fast_init"]

C = TypeVar("C", bound=type[Any])
V = TypeVar("V")

_EVOLVERS: dict[type[Any], Any] = {}
"""Each :func:`fast_init` class's field-by-field copier (see :func:`evolve`)."""


_DRAFTS: dict[type[Any], type[Any] | None] = {}
"""Each :func:`fast_init` class's plain twin with the same slots (None: it has none)."""

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
    _DRAFTS[cls] = namespace["_draft"]
    _EVOLVERS[cls] = _evolver(cls, fields, namespace["_draft"])
    return cls


def _evolver(cls: type[Any], fields: tuple[dataclasses.Field[Any], ...],
             draft: type[Any] | None) -> Any:
    """A function ``(value, /, *, field=...) -> copy`` for ``cls``: the named fields changed
    (filled while the copy is of ``draft``, the plain class with the same slots, when there
    is one, as :func:`fast_init`'s ``__init__`` does)."""
    params = [f"{f.name}=_KEEP" for f in fields]
    values = {f.name: f"_from.{f.name} if {f.name} is _KEEP else {f.name}" for f in fields}
    return _copier_of(cls, draft, "evolve", f"_from, /, *, {', '.join(params)}", values)


def _copier_of(cls: type[Any], draft: type[Any] | None, name: str, params: str,
               values: dict[str, str]) -> Any:
    """A copier of ``cls`` named ``name``, taking ``params``: a new instance whose each
    field is filled with the expression ``values`` names for it (while the instance is of
    ``draft`` when there is one)."""
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls, "_KEEP": _KEEP,
                                 "_draft": draft, "_set_class": _SET_CLASS}
    body = [f"    new = _new({'_draft' if draft is not None and values else '_cls'})"]
    for field, value in values.items():
        namespace[f"_set_{field}"] = getattr(cls, field).__set__
        body.append(f"    new.{field} = {value}" if draft is not None
                    else f"    _set_{field}(new, {value})")
    if draft is not None and values:
        body.append("    _set_class(new, _cls)")
    source = f"def {name}({params}):\n" + "\n".join([*body, "    return new"])
    exec(source, namespace)  # noqa: S102 - the source is built from field names only
    return namespace[name]


_COPIERS: dict[tuple[type[Any], tuple[str, ...]], Any] = {}
"""Copiers for one class and one list of changed fields, in the order named: each changed
field a positional parameter, every other copied without a test (see :func:`evolve`)."""
_COPIERS_MAX = 1024


def _copier(kind: type[Any], names: tuple[str, ...]) -> Any:
    """The copier :func:`evolve` calls for a value of class ``kind`` with ``names`` changed
    (made once; an unknown name raises :class:`TypeError`)."""
    cls = next((base for base in kind.__mro__ if base in _EVOLVERS), None)
    if cls is None:
        raise TypeError(f"{kind.__name__} is not a fast_init value class")
    fields = [f.name for f in dataclasses.fields(cls)]
    unknown = [name for name in names if name not in fields]
    if unknown:
        raise TypeError(f"evolve() got an unexpected keyword argument {unknown[0]!r} for "
                        f"{cls.__name__}")
    values = {field: field if field in names else f"_from.{field}" for field in fields}
    copier = _copier_of(cls, _DRAFTS.get(cls), "copy", ", ".join(("_from", *names)), values)
    if len(_COPIERS) >= _COPIERS_MAX:
        _COPIERS.clear()
    _COPIERS[kind, names] = copier
    return copier


_KEEP: Any = object()
"""An :func:`evolve` argument left out: the field is copied."""


def evolver(cls: type[V]) -> Callable[..., V]:
    """A copier of ``cls`` (a :func:`fast_init` class) taking any fields by keyword.

    ``evolver(OperationState)(state, attempts=2)`` is ``evolve(state, attempts=2)`` without
    looking the class up (for a hot path whose call site changes several lists of fields);
    an unknown field name raises :class:`TypeError`.
    """
    copier = next((_EVOLVERS[base] for base in cls.__mro__ if base in _EVOLVERS), None)
    if copier is None:
        raise TypeError(f"{cls.__name__} is not a fast_init value class")
    return cast("Callable[..., V]", copier)


def evolve(value: V, /, **changes: Any) -> V:
    """A copy of ``value`` (of a :func:`fast_init` class) with ``changes`` applied by field name.

    What ``dataclasses.replace`` does, faster, and always of the class that declared the
    fields (a subclass that fills fields with class attributes yields its base). An unknown
    field name raises :class:`TypeError`. Each class and list of changed names has a copier of
    its own, made at its first use, which copies the other fields without testing each.
    """
    names = tuple(changes)
    copier = _COPIERS.get((type(value), names))
    if copier is None:
        copier = _copier(type(value), names)
    result: V = copier(value, *changes.values())
    return result
