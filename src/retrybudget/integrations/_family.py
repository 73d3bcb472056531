"""One integration's code built over another package of the same shape.

httpx2, the next-generation httpx, is its own package (``httpx2``, over ``httpcore2``) with
httpx's transport interface: ``BaseTransport.handle_request``, ``AsyncBaseTransport``, the
same requests, responses, streams and exceptions, each its own class. A transport handed to
an ``httpx2.Client`` must build on httpx2's classes (the client checks the response stream it
gets back against its own), so :mod:`retrybudget.integrations.httpx2` is
:mod:`retrybudget.integrations.httpx`'s code run a second time, in a module of its own, with
``import httpx`` answered by ``httpx2`` and ``import httpcore`` by ``httpcore2``. One source
serves both packages: every class and function of the two modules shares its code, and each
module has its own classes (its errors derive from its package's exceptions).
"""

from __future__ import annotations

import builtins
import importlib.util
from collections.abc import Mapping
from typing import Any

__all__ = ["build_over"]


def build_over(namespace: dict[str, Any], source: str, packages: Mapping[str, str]) -> None:
    """Run module ``source``'s code in ``namespace`` (the globals of the module being built),
    each import of a name in ``packages`` (a top-level package, or a module's full name, also
    when imported relatively) answered by the one it maps to. The building module keeps its own docstring."""
    spec = importlib.util.find_spec(source)
    origin = None if spec is None else spec.origin
    if origin is None or not origin.endswith(".py"):
        raise ImportError(f"no source to build {namespace.get('__name__')} from: {source}",
                          name=source)
    with open(origin, "rb") as file:
        code = compile(file.read(), origin, "exec", dont_inherit=True)
    real_import = builtins.__import__

    def mapped_import(name: str, globals: Any = None, locals: Any = None,
                      fromlist: Any = (), level: int = 0) -> Any:
        if level > 0 and globals is not None:  # one of the package's own modules, by its name
            absolute = importlib.util.resolve_name("." * level + name, globals["__package__"])
            if absolute in packages:
                return real_import(packages[absolute], globals, locals, fromlist, 0)
        if level == 0:
            top, dot, rest = name.partition(".")
            if name in packages:
                name = packages[name]
            elif top in packages:
                name = packages[top] + dot + rest
        return real_import(name, globals, locals, fromlist, level)

    doc = namespace.get("__doc__")
    namespace["__builtins__"] = {**vars(builtins), "__import__": mapped_import}
    exec(code, namespace)  # noqa: S102 - the package's own module's code, not outside input
    namespace["__doc__"] = doc
