"""The package layering as a test: every import of every module under src/kaflite (top-level, inside
functions, under `if TYPE_CHECKING:`) goes downward in the layer order, `spark` never imports `server`,
and no two modules import each other through any chain (no import circle, deferred imports included).
Inside `server`, the coordinator services (`kaflite.server.coordinators`: the group, transaction and
share-state coordinators and their internal-topic writers) never import the request handlers
(`kaflite.server.handlers`), and no handler module defines a service (a class named `...Service`, or one
with a `runtime` attribute): handlers parse and answer requests, services hold the coordinators' state.

Layers, lowest first (a package may import itself and the layers below it, never a sibling or above):

    version                           the version string, importable from anywhere
    assign                            partitioners and assignors, stdlib only
    protocol                          sans-IO wire formats
    storage / coordinator / cluster   the pure cores and the log engine
    server                            the broker process
    spark / clients / console /       clients of a broker (spark, the web console and the schema
    schema_registry                   registry talk to any Kafka: never import server)
    cli                               the command line (runs the broker, the spark demo, the clients)
    kaflite, kaflite.__main__         the package facade and `python -m kaflite`
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

LAYERS: list[frozenset[str]] = [
    frozenset({"version", "hypothesis_gate"}),  # leaves: the root package and entry points use them
    frozenset({"assign"}),
    frozenset({"protocol"}),
    frozenset({"storage", "coordinator", "cluster"}),
    frozenset({"server"}),
    frozenset({"spark", "clients", "console", "schema_registry"}),
    frozenset({"cli"}),
    frozenset({"", "__main__"}),  # "" is the root package `kaflite`
]
# Pairs (importer, imported) refused even though the layers would allow them.
FORBIDDEN: frozenset[tuple[str, str]] = frozenset({("spark", "server"), ("console", "server"),
                                                  ("schema_registry", "server")})

Graph = Mapping[str, frozenset[str]]

HANDLERS = "kaflite.server.handlers"
SERVICES = "kaflite.server.coordinators"


# --- building the module graph ----------------------------------------------------------------------
def module_files(root: Path, package: str = "kaflite") -> dict[str, Path]:
    """Module name -> file for every .py file of `package` under `root`, and for every compiled module
    (its .pyi stub without a .py twin: kaflite.spark._decode), so that importing one is an edge to it, not
    to the package around it."""
    out: dict[str, Path] = {}
    stubs = [p for p in (root / package).rglob("*.pyi") if not p.with_suffix(".py").exists()]
    for path in sorted([*(root / package).rglob("*.py"), *stubs]):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, modules: Iterable[str]) -> str | None:
    """The longest prefix of a dotted name that is one of our modules."""
    known = set(modules)
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in known:
            return candidate
        parts.pop()
    return None


def imports_of(module: str, path: Path, modules: Iterable[str], package: str = "kaflite") -> set[str]:
    """The modules of `package` that `module` imports anywhere in its source (ast, every statement)."""
    known = set(modules)
    is_package = path.name == "__init__.py"
    here = module.split(".") if is_package else module.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == package:
                    target = _resolve(alias.name, known)
                    if target is not None:
                        out.add(target)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name.split(".")[0] != package:
                continue
            for alias in node.names:
                # `from kaflite.cli import console` imports the submodule `kaflite.cli.console`
                target = _resolve(f"{name}.{alias.name}", known) or _resolve(name, known)
                if target is not None:
                    out.add(target)
    out.discard(module)
    return out


def import_graph(root: Path = SRC, package: str = "kaflite") -> dict[str, frozenset[str]]:
    files = module_files(root, package)
    return {m: frozenset(imports_of(m, p, files, package)) for m, p in files.items()}


# --- the rules ------------------------------------------------------------------------------------
def unit(module: str) -> str:
    """The package a module belongs to for layering: `kaflite.server.handlers.fetch` -> `server`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer_of(name: str) -> int | None:
    for i, members in enumerate(LAYERS):
        if name in members:
            return i
    return None


def layer_violations(graph: Graph) -> list[str]:
    out = []
    for module, targets in sorted(graph.items()):
        src = unit(module)
        src_layer = layer_of(src)
        if src_layer is None:
            out.append(f"{module}: package {src!r} has no layer in tests/test_layers.py")
            continue
        for target in sorted(targets):
            dst = unit(target)
            if dst == src:
                continue
            dst_layer = layer_of(dst)
            if (src, dst) in FORBIDDEN:
                out.append(f"{module} imports {target}: {src} must never import {dst}")
            elif dst_layer is None or dst_layer >= src_layer:
                out.append(f"{module} imports {target}: {src} may only import the layers below it")
    return out


def find_cycles(graph: Graph) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan, iterative), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return sorted(cycles)


# --- the tests ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def graph() -> dict[str, frozenset[str]]:
    return import_graph()


def test_the_graph_sees_the_package(graph: Graph) -> None:
    assert "kaflite.server.broker" in graph and "kaflite.storage.log" in graph
    assert "kaflite.storage.log" in graph["kaflite.storage.manager"]
    assert {unit(m) for m in graph} <= set().union(*LAYERS)


def test_packages_import_only_downward(graph: Graph) -> None:
    assert layer_violations(graph) == []


def test_no_import_cycles(graph: Graph) -> None:
    assert find_cycles(graph) == []


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def service_violations(graph: Graph, files: Mapping[str, Path]) -> list[str]:
    """The coordinator services importing a handler module, and handler modules defining a service."""
    out = [f"{module} imports {target}: the coordinator services never import the handlers"
           for module, targets in sorted(graph.items()) if _within(module, SERVICES)
           for target in sorted(targets) if _within(target, HANDLERS)]
    for module, path in sorted(files.items()):
        if not _within(module, HANDLERS):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.ClassDef):
                continue
            holds_runtime = any(isinstance(t, ast.Attribute) and t.attr == "runtime"
                                and isinstance(t.value, ast.Name) and t.value.id == "self"
                                for a in ast.walk(node) if isinstance(a, ast.Assign | ast.AnnAssign)
                                for t in (a.targets if isinstance(a, ast.Assign) else [a.target]))
            if node.name.endswith("Service") or holds_runtime:
                out.append(f"{module} defines {node.name}: a coordinator service belongs in {SERVICES}")
    return out


def test_handlers_do_not_define_services_and_services_do_not_import_handlers(graph: Graph) -> None:
    assert "kaflite.server.coordinators.groups" in graph  # the services' package is where this rule looks
    assert service_violations(graph, module_files(SRC)) == []


# --- the checker itself fails on what it must refuse ------------------------------------------------
def test_checker_finds_a_deliberate_circle() -> None:
    synthetic = {
        "kaflite.storage.log": frozenset({"kaflite.storage.cleaner"}),
        "kaflite.storage.cleaner": frozenset({"kaflite.storage.segment"}),
        "kaflite.storage.segment": frozenset({"kaflite.storage.log"}),
        "kaflite.storage.index": frozenset(),
    }
    assert find_cycles(synthetic) == [["kaflite.storage.cleaner", "kaflite.storage.log", "kaflite.storage.segment"]]
    del synthetic["kaflite.storage.segment"]
    assert find_cycles(synthetic) == []


def test_checker_refuses_upward_sibling_and_forbidden_imports() -> None:
    synthetic = {
        "kaflite.protocol.messages": frozenset({"kaflite.server.broker"}),  # upward
        "kaflite.storage.log": frozenset({"kaflite.cluster.metadata"}),  # sibling
        "kaflite.spark.demo": frozenset({"kaflite.server.embedded"}),  # forbidden
        "kaflite.server.broker": frozenset({"kaflite.storage.log", "kaflite.protocol.messages"}),  # fine
        "kaflite.weird.x": frozenset(),  # no layer
    }
    problems = layer_violations(synthetic)
    assert len(problems) == 4, problems
    assert any("spark must never import server" in p for p in problems)
    assert any(p.startswith("kaflite.weird.x") for p in problems)
    assert not any(p.startswith("kaflite.server.broker") for p in problems)


def test_checker_sees_deferred_and_type_checking_imports(tmp_path: Path) -> None:
    """A circle closed by an import inside a function (or under TYPE_CHECKING) is still a circle."""
    pkg = tmp_path / "kaflite" / "storage"
    pkg.mkdir(parents=True)
    (tmp_path / "kaflite" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "log.py").write_text("def compact():\n    from kaflite.storage.cleaner import run\n    return run\n")
    (pkg / "cleaner.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import log\n\ndef run():\n    pass\n"
    )
    built = import_graph(tmp_path)
    assert built["kaflite.storage.log"] == {"kaflite.storage.cleaner"}
    assert built["kaflite.storage.cleaner"] == {"kaflite.storage.log"}
    assert find_cycles(built) == [["kaflite.storage.cleaner", "kaflite.storage.log"]]


def test_checker_refuses_a_service_in_the_handlers_and_a_handler_import_from_a_service(tmp_path: Path) -> None:
    handlers = tmp_path / "kaflite" / "server" / "handlers"
    services = tmp_path / "kaflite" / "server" / "coordinators"
    handlers.mkdir(parents=True)
    services.mkdir(parents=True)
    for d in (tmp_path / "kaflite", tmp_path / "kaflite" / "server", handlers, services):
        (d / "__init__.py").write_text("")
    (handlers / "groups.py").write_text("class GroupService:\n    pass\n")
    (handlers / "txn.py").write_text("class Shell:\n    def __init__(self):\n        self.runtime = None\n")
    (handlers / "fine.py").write_text("class Answer:\n    def __init__(self):\n        self.code = 0\n")
    (services / "groups.py").write_text("from kaflite.server.handlers import fine\n")
    built = import_graph(tmp_path)
    problems = service_violations(built, module_files(tmp_path))
    assert sorted(problems) == [
        "kaflite.server.coordinators.groups imports kaflite.server.handlers.fine: the coordinator services "
        "never import the handlers",
        "kaflite.server.handlers.groups defines GroupService: a coordinator service belongs in "
        "kaflite.server.coordinators",
        "kaflite.server.handlers.txn defines Shell: a coordinator service belongs in kaflite.server.coordinators",
    ]
