"""The import layering of the package, checked from the source (no import is executed).

The layers, bottom up (docs/architecture.md tells the story):

- ``_clock``: the one injected clock; the standard library only (it is the one module
  that reads the time and sleeps).
- ``core/``: the pure rules. It imports the standard library, other core modules and the
  clock protocol (``retrybudget._clock``) only; no module of the standard library that does
  I/O, reads the clock or draws random numbers.
- everything else sits above the core, in the order of ``LAYERS``: a module imports its own
  layer and the layers below it, and every module belongs to a layer. An integration or
  the gateway talks to a coordinator through ``retrybudget.coordination``'s public face,
  never through a backend's internals.
- no module imports a private name (one leading underscore) from another package, nor a
  private module of a package it is not inside (``observe._redact`` is reached through
  ``retrybudget.observe``; the root package's own private modules, ``_clock`` or
  ``_cmdline``, are shared by every package under it), and no two modules import each
  other, directly or around a longer ring.

Every import counts, also one inside a function or under ``TYPE_CHECKING``. A known debt is
listed in ``DEBTS`` with what must move to retire it; a new violation fails, and so does a
debt that no longer exists (delete its line).

Sizes: no source file over ``MAX_FILE_LINES`` lines and no function over
``MAX_FUNCTION_LINES`` (from its ``def`` to its last line), but those named in ``OVERSIZED``
with the issue each waits on. The list only shrinks: a new one over fails, and so does an
entry that is no longer over (delete its line).
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = "retrybudget"
SOURCE = Path(__file__).resolve().parents[2] / "src" / PACKAGE

CORE = f"{PACKAGE}.core"
CLOCK = f"{PACKAGE}._clock"

IMPURE_STDLIB = frozenset({
    "asyncio", "concurrent", "http", "io", "logging", "multiprocessing", "os", "pathlib",
    "random", "secrets", "select", "selectors", "shutil", "signal", "socket", "ssl",
    "subprocess", "tempfile", "threading", "time", "urllib",
})
"""Standard-library modules that do I/O, read the clock or draw random numbers."""

LAYERS = (
    f"{PACKAGE}.cli",
    f"{PACKAGE}.queue",  # job queues and their adapters, under the command that runs them
    f"{PACKAGE}.gateway",
    f"{PACKAGE}.acceptance",  # the cases, the judge, the runners and the checklist
    f"{PACKAGE}.sandbox",
    f"{PACKAGE}.testing",  # the face tests import the provider and the fixture format from
    f"{PACKAGE}._fixtures",  # the fixture format and the in-process scripted provider
    f"{PACKAGE}.integrations",
    f"{PACKAGE}._drivers",
    f"{PACKAGE}._native",  # the HTTP libraries' exceptions and headers, read for the drivers
    f"{PACKAGE}._profile_file",  # reads a user profile from a TOML file (the core reads no file)
    f"{PACKAGE}.coordination",
    f"{PACKAGE}.observe",
    f"{PACKAGE}._gateway_mapping",  # the gateway's answer per reason, read by the judge too
    f"{PACKAGE}.errors",
    f"{PACKAGE}._asgi",  # the middleware the sandbox's and the gateway's apps build on
    f"{PACKAGE}._cmdline",  # what every command shares: CliError, argparse types, file checks
    f"{PACKAGE}._files",  # operating-system errors in plain words, for every command
    CORE,
    CLOCK,
)
"""Top to bottom: a module imports its own layer and the layers below it, never one above.
A module's layer is the longest entry it falls under.
The package's face (``retrybudget/__init__.py``) and ``__main__`` stand above them all; another
package's ``__main__`` (``python -m retrybudget.sandbox``) belongs to its package's layer, like
any of its modules (what the commands share sits in ``_cmdline``, below them all)."""

BACKEND_INTERNALS = (
    f"{PACKAGE}.coordination._memory",
    f"{PACKAGE}.coordination._memory_key",
    f"{PACKAGE}.coordination._redis",
    f"{PACKAGE}.coordination._redis_calls",
    f"{PACKAGE}.coordination._redis_outage",
    f"{PACKAGE}.coordination._redis_pipeline",
    f"{PACKAGE}.coordination._redis_scripts",
    f"{PACKAGE}.coordination._ledgers",
    f"{PACKAGE}.coordination._tokens_redis",
    f"{PACKAGE}.coordination.lua",
)
"""A coordinator backend's internals: reached only through ``retrybudget.coordination``."""

BACKEND_CLIENTS = (f"{PACKAGE}.integrations", f"{PACKAGE}.gateway")
"""Packages that use a coordinator but must not know which backend it is."""

DEBTS: dict[tuple[str, str, str], str] = {
    # (rule, importing module, imported module or name): what must move to retire it.
    # Add a line only with the plan that pays it.
}


@dataclass(frozen=True)
class Import:
    """One import statement's edge: ``importer`` names ``target`` (a module, or a name in it)."""

    importer: str
    target: str
    name: str | None
    line: int


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(SOURCE.rglob("*.py"))}


MODULES = _modules()


def _imports_of(module: str, package: str, tree: ast.AST) -> list[Import]:
    """The imports in ``tree``, the source of ``module`` (in ``package``), resolved to names."""
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(Import(module, alias.name, None, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                if submodule in MODULES:
                    found.append(Import(module, submodule, None, node.lineno))
                else:
                    found.append(Import(module, target, alias.name, node.lineno))
    return found


def _imports() -> list[Import]:
    found: list[Import] = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        found.extend(_imports_of(module, _package_of(module, path), tree))
    return found


IMPORTS = _imports()


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _home_package(module: str) -> str:
    path = MODULES.get(module)
    if path is None:
        return module.rpartition(".")[0]
    return _package_of(module, path)


def _layer(module: str) -> int | None:
    """The index of ``module``'s layer in :data:`LAYERS` (None: the face, above them all)."""
    homes = [i for i, layer in enumerate(LAYERS) if _inside(module, layer)]
    return max(homes, key=lambda i: len(LAYERS[i])) if homes else None


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_module_owners(module: str) -> list[str]:
    """The packages whose private modules ``module`` passes through (``retrybudget.observe`` for
    ``retrybudget.observe._redact``); only a module inside each of them may import it."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts)) if _is_private(parts[i])]


def _violations() -> dict[tuple[str, str, str], str]:
    """Every layering violation in the source: (rule, importer, target) -> where."""
    found: dict[tuple[str, str, str], str] = {}

    def add(rule: str, imp: Import, target: str) -> None:
        found.setdefault((rule, imp.importer, target), f"{imp.importer}:{imp.line}")

    for imp in IMPORTS:
        top = imp.target.partition(".")[0]
        ours = top == PACKAGE
        if _inside(imp.importer, CORE) or imp.importer == CLOCK:
            allowed_ours = _inside(imp.target, CORE) or (
                imp.importer != CLOCK and imp.target == CLOCK)
            if ours and not allowed_ours:
                add("core-imports-outside-core", imp, imp.target)
            elif not ours and top != "__future__" and top not in sys.stdlib_module_names:
                add("core-imports-a-third-party", imp, imp.target)
            elif top in IMPURE_STDLIB and imp.importer != CLOCK:
                add("core-imports-io", imp, imp.target)
        importer_layer, target_layer = _layer(imp.importer), _layer(imp.target)
        if ours and importer_layer is not None and (
                target_layer is None or target_layer < importer_layer):
            add("imports-a-layer-above", imp, imp.target)
        if any(_inside(imp.importer, client) for client in BACKEND_CLIENTS) and any(
                _inside(imp.target, backend) for backend in BACKEND_INTERNALS):
            add("reaches-into-a-backend", imp, imp.target)
        if (ours and imp.name is not None and _is_private(imp.name)
                and _home_package(imp.importer) != _home_package(imp.target)):
            add("imports-a-private-name", imp, f"{imp.target}.{imp.name}")
        if ours and any(not _inside(imp.importer, owner)
                        for owner in _private_module_owners(imp.target)):
            add("imports-a-private-module", imp, imp.target)
    for cycle in _cycles():  # none at all: a module's imports read one way
        found[("import-cycle", cycle[0], " -> ".join(cycle))] = cycle[0]
    return found


def _cycles() -> list[tuple[str, ...]]:
    """Strongly connected groups of more than one module (every import counts as an edge)."""
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for imp in IMPORTS:
        target = imp.target
        while target and target not in MODULES:
            target = target.rpartition(".")[0]
        # A package's face importing its own submodules is not a cycle of rules.
        if target and target != imp.importer and not _inside(imp.importer, target):
            graph[imp.importer].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[tuple[str, ...]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(tuple(sorted(group)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_the_source_is_found() -> None:
    assert f"{CORE}.flow" in MODULES
    assert f"{PACKAGE}.cli._check" in MODULES
    assert any(imp.importer == f"{CORE}.flow" and imp.target == CLOCK for imp in IMPORTS)


def test_every_module_has_a_layer() -> None:
    face = {PACKAGE, f"{PACKAGE}.__main__"}
    homeless = sorted(module for module in MODULES if module not in face and _layer(module) is None)
    assert not homeless, f"add these modules' packages to LAYERS, in their place: {homeless}"


def test_no_new_layering_violation() -> None:
    new = {key: where for key, where in _violations().items() if key not in DEBTS}
    assert not new, "new layering violations (rule, importer, target) at:\n" + "\n".join(
        f"  {key} at {where}" for key, where in sorted(new.items()))


def test_every_listed_debt_still_exists() -> None:
    paid = sorted(set(DEBTS) - set(_violations()))
    assert not paid, f"paid debts: delete them from DEBTS: {paid}"


@pytest.mark.parametrize(
    ("importer", "source", "rule"),
    [
        (f"{CORE}.decide", "from .._drivers import Retrier", "core-imports-outside-core"),
        (f"{CORE}.decide", "from ..coordination._memory import MemoryCoordinator",
         "core-imports-outside-core"),
        (f"{CORE}.flow", "from ..observe import Hook", "core-imports-outside-core"),
        (f"{CORE}.flow", "import httpx", "core-imports-a-third-party"),
        (f"{CORE}.policy", "import time", "core-imports-io"),
        (f"{CORE}.outcome", "def unwrap():\n    from ..errors import error_for",
         "core-imports-outside-core"),
        (f"{PACKAGE}.integrations.httpx", "from ..coordination._redis import RedisCoordinator",
         "reaches-into-a-backend"),
        (f"{PACKAGE}.gateway._app", "from ..coordination import _memory",
         "reaches-into-a-backend"),
        (f"{PACKAGE}.cli._check", "from ..acceptance import _CaseCoordinator",
         "imports-a-private-name"),
        (f"{PACKAGE}.observe._audit", "from ..coordination import Coordinator",
         "imports-a-layer-above"),
        (f"{PACKAGE}.testing", "from .sandbox import SandboxConfig", "imports-a-layer-above"),
        (f"{PACKAGE}._fixtures._format", "from ..acceptance import judge",
         "imports-a-layer-above"),
        (f"{PACKAGE}.sandbox._app", "from ..acceptance import load_cases",
         "imports-a-layer-above"),
        (f"{PACKAGE}.cli._check", "from ..acceptance.checklist import _user_checks",
         "imports-a-private-name"),
        (f"{PACKAGE}.coordination._memory", "import retrybudget", "imports-a-layer-above"),
        (f"{PACKAGE}.gateway._answers", "from ..observe._redact import redact_text",
         "imports-a-private-module"),
        (f"{PACKAGE}._drivers._loop", "from ..observe import _hooks", "imports-a-private-module"),
        (f"{PACKAGE}.coordination._logic", "import retrybudget.core._values",
         "imports-a-private-module"),
        (f"{PACKAGE}.cli._check", "from .._cmdline._errors import CliError",
         "imports-a-private-module"),
        (f"{PACKAGE}.cli._fetch", "def check():\n    from ..queue._redis import check_reachable",
         "imports-a-private-module"),
        (f"{PACKAGE}.sandbox.__main__", "from ..cli import main", "imports-a-layer-above"),
        (f"{PACKAGE}.acceptance._judge", "from ..gateway import GATEWAY_MAPPING",
         "imports-a-layer-above"),
        (f"{PACKAGE}.gateway.__main__", "from ..cli._main import build_parser",
         "imports-a-layer-above"),
        (f"{PACKAGE}._cmdline._paths", "from ..gateway import GatewayConfig",
         "imports-a-layer-above"),
    ],
)
def test_the_checker_catches_each_kind_of_violation(importer: str, source: str, rule: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    extra = _imports_of(importer, _package_of(importer, MODULES[importer]), ast.parse(source))
    monkeypatch.setattr(sys.modules[__name__], "IMPORTS", [*IMPORTS, *extra])
    assert any(key[0] == rule and key[1] == importer for key in _violations())


def test_the_checker_catches_an_import_cycle_inside_a_package(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Even one under TYPE_CHECKING, inside one package, far from the core: the queue's lease
    # keeper once named the lease's class by importing the module that imports the keeper.
    importer = f"{PACKAGE}.queue._keeper"
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._base import Operation"
    extra = _imports_of(importer, _package_of(importer, MODULES[importer]), ast.parse(source))
    monkeypatch.setattr(sys.modules[__name__], "IMPORTS", [*IMPORTS, *extra])
    rings = [key[2] for key in _violations() if key[0] == "import-cycle"]
    assert any(f"{PACKAGE}.queue._base" in ring and importer in ring for ring in rings), rings


@pytest.mark.parametrize(
    ("importer", "source"),
    [
        (f"{PACKAGE}.coordination._redis", "from ._logic import admission_of"),
        (f"{PACKAGE}.gateway._app", "from .._clock import SYSTEM_CLOCK"),
        (f"{PACKAGE}.cli._check", "from .._cmdline import CliError"),
        (f"{PACKAGE}._cmdline._paths", "from ._errors import CliError"),
    ],
)
def test_a_private_module_is_open_to_its_own_package(importer: str, source: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    extra = _imports_of(importer, _package_of(importer, MODULES[importer]), ast.parse(source))
    monkeypatch.setattr(sys.modules[__name__], "IMPORTS", extra)
    assert not _violations()


def test_a_private_name_inside_its_own_package_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = [Import(f"{PACKAGE}.coordination._redis", f"{PACKAGE}.coordination._config",
                    "_private_helper", 1)]
    monkeypatch.setattr(sys.modules[__name__], "IMPORTS", [*IMPORTS, *extra])
    assert not any(key[0] == "imports-a-private-name" and key[1].endswith("_redis")
                   for key in _violations())


# Sizes --------------------------------------------------------------------------------------

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 60

OVERSIZED: dict[str, str] = {
    # A source file (its path in the package) or a function (``module:Class.name``) still over
    # its bound: the issue it waits on. Delete a line once it is under; never add one.
}
"""What is still over a size bound, and the issue it waits on."""


def _long_functions(module: str, tree: ast.AST) -> dict[str, int]:
    """The functions (and methods, and functions inside them) of ``tree`` over
    :data:`MAX_FUNCTION_LINES`: ``module:qualified.name`` -> lines."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lines = (child.end_lineno or child.lineno) - child.lineno + 1
                    if lines > MAX_FUNCTION_LINES:
                        found[f"{module}:{name}"] = lines
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def _oversized() -> dict[str, int]:
    """Every source file and function over its bound: its name in :data:`OVERSIZED` -> lines."""
    found: dict[str, int] = {}
    for module, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_FILE_LINES:
            found[path.relative_to(SOURCE).as_posix()] = lines
        found.update(_long_functions(module, ast.parse(text, str(path))))
    return found


def test_no_new_file_or_function_over_its_bound() -> None:
    new = {name: lines for name, lines in _oversized().items() if name not in OVERSIZED}
    assert not new, (
        f"over {MAX_FILE_LINES} lines a file, {MAX_FUNCTION_LINES} a function "
        f"(split it by responsibility, or into named steps): {new}")


def test_every_oversized_entry_is_still_over() -> None:
    under = sorted(set(OVERSIZED) - set(_oversized()))
    assert not under, f"under their bound now: delete them from OVERSIZED: {under}"


def test_every_oversized_entry_names_its_issue() -> None:
    assert all(reason.startswith("issue ") for reason in OVERSIZED.values())


def test_the_size_check_measures_functions_methods_and_nested_ones() -> None:
    def body(lines: int, indent: int) -> str:
        return "".join(" " * indent + "x = 1\n" for _ in range(lines))

    bound = MAX_FUNCTION_LINES
    source = "".join([
        "def long():\n", body(bound, 4),  # the def and 60 lines: one over
        "def short():\n", body(bound - 1, 4),  # exactly at the bound
        "class C:\n    async def method(self):\n", body(bound, 8),
        "def outer():\n    def inner():\n", body(bound, 8),
    ])
    assert _long_functions("m", ast.parse(source)) == {
        "m:long": bound + 1, "m:C.method": bound + 1,
        "m:outer": bound + 2, "m:outer.inner": bound + 1,
    }
