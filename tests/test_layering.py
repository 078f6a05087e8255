"""The import graph follows the layers of docs/architecture.md; a test reads every module's imports.

Rules (a layer may import the layers listed for it, and itself):

- ``graphstore`` (root: contracts, errors, dtypes, ids, rpc, auth, config): nothing of the project;
- ``protos``: root;
- ``partition``: root;
- ``server``: root, protos, partition;
- ``client``: root, protos, partition; the server package only from the one in-process transport
  module (``client/transport/inprocess.py``);
- ``compat``: root, partition, client;
- ``launcher``: everything below it;
- ``examples``, ``bench`` and ``tools``: the package's public names only (no ``tests``, no ``_private``
  names or modules).

Relative imports and imports inside functions count. A violation fails with the file, the line and
the import.

Inside the package no module imports, directly or through others, a module that imports it back: an
import circle fails with the modules in it and the imports that close it (imports inside functions and
``TYPE_CHECKING`` blocks count, so a circle cannot hide behind a deferred import).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Folder at the repository root -> layer name.
FOLDER_LAYERS = {
    "graphstore_pkg": "root",
    "protos": "protos",
    "partition": "partition",
    "server": "server",
    "client": "client",
    "compat": "compat",
    "launcher": "launcher",
    "examples": "user",
    "bench": "user",
    "tools": "user",
}
# Import name under ``graphstore.`` -> layer (the folders whose layer is their own name); any other
# ``graphstore.X`` is a root module.
PACKAGE_LAYERS = {folder: layer for folder, layer in FOLDER_LAYERS.items() if folder == layer}
ALLOWED = {
    "root": {"root"},
    "protos": {"root", "protos"},
    "partition": {"root", "partition"},
    "server": {"root", "protos", "partition", "server"},
    "client": {"root", "protos", "partition", "client"},
    "compat": {"root", "partition", "client", "compat"},
    "launcher": {"root", "protos", "partition", "server", "client", "launcher"},
    "user": {"root", "protos", "partition", "server", "client", "compat", "launcher"},
}
# The one module of a layer allowed to reach another layer beyond its rule, and why.
EXCEPTIONS = {
    ("client/transport/inprocess.py", "server"): "the in-process transport (standalone mode)",
}
GENERATED = ("_pb2.py", "_pb2_grpc.py")


def _modules() -> list[Path]:
    files = []
    for folder in FOLDER_LAYERS:
        files += [p for p in (ROOT / folder).rglob("*.py") if not p.name.endswith(GENERATED)]
    return sorted(files)


def _module_name(path: Path) -> str:
    """The dotted name a file is imported as (``graphstore.client.dist_graph`` for client/dist_graph.py)."""
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] == "graphstore_pkg":
        parts[0] = "graphstore"
    elif parts[0] in PACKAGE_LAYERS:
        parts.insert(0, "graphstore")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str, list[str], str]]:
    """Every import of a file: (line, absolute module, imported names, source text)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((node.lineno, alias.name, [], ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([target] if target else []))
            names = [alias.name for alias in node.names]
            if target == "graphstore":
                # ``from graphstore import client`` imports the package graphstore.client.
                for name in names:
                    found.append((node.lineno, f"graphstore.{name}", [], ast.unparse(node)))
            else:
                found.append((node.lineno, target, names, ast.unparse(node)))
    return found


def _layer_of_import(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "tests":
        return "tests"
    if parts[0] != "graphstore":
        return None
    if len(parts) == 1:
        return "root"
    return PACKAGE_LAYERS.get(parts[1], "root")


def layering_violations() -> list[str]:
    """Every import against the rules, as ``file:line: import (why)``."""
    problems = []
    for path in _modules():
        rel = path.relative_to(ROOT).as_posix()
        layer = FOLDER_LAYERS[rel.split("/", 1)[0]]
        for line, module, names, text in _imports(path):
            target = _layer_of_import(module)
            if target is None:
                continue
            where = f"{rel}:{line}: {text}"
            if target == "tests":
                problems.append(f"{where} (the package and its users never import the tests)")
                continue
            if layer == "user":
                private = [p for p in module.split(".") if p.startswith("_") and p != "__init__"]
                private += [n for n in names if n.startswith("_")]
                if private:
                    problems.append(f"{where} (examples and benchmarks use public names only: {private})")
                continue
            if target not in ALLOWED[layer] and (rel, target) not in EXCEPTIONS:
                problems.append(f"{where} ({layer} may not import {target})")
    return problems


PACKAGE_FOLDERS = [folder for folder, layer in FOLDER_LAYERS.items() if layer != "user"]


def import_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    """The package's modules and the modules each imports (``from P import name`` counts as importing
    the module ``P.name`` where that is a module, else ``P`` itself), with one ``file:line: import`` per
    edge."""
    modules = {}
    for folder in PACKAGE_FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            if not path.name.endswith(GENERATED):
                modules[_module_name(path)] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    where: dict[tuple[str, str], str] = {}
    for name, path in modules.items():
        rel = path.relative_to(ROOT).as_posix()
        for line, module, names, text in _imports(path):
            targets = [f"{module}.{n}" if f"{module}.{n}" in modules else module for n in names] or [module]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
                    where.setdefault((name, target), f"{rel}:{line}: {text}")
    return graph, where


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (each a circle of imports), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        # Tarjan's algorithm, iterative: (node, its remaining successors).
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            child = next(successors, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return sorted(circles)


def test_no_import_circle():
    graph, where = import_graph()
    problems = []
    for circle in import_circles(graph):
        members = set(circle)
        edges = [where[(a, b)] for a in circle for b in sorted(graph[a]) if b in members]
        problems.append(" <-> ".join(circle) + "\n  " + "\n  ".join(edges))
    assert not problems, "import circles in the package:\n" + "\n".join(problems)


def test_the_circle_check_catches_a_circle():
    """A module pair importing each other (one of them only inside a function) is reported."""
    probes = [ROOT / "client" / "_circle_probe_a.py", ROOT / "client" / "_circle_probe_b.py"]
    probes[0].write_text("from graphstore.client import _circle_probe_b\n")
    probes[1].write_text("def f():\n    from graphstore.client._circle_probe_a import f\n")
    try:
        graph, _ = import_graph()
        circles = import_circles(graph)
    finally:
        for probe in probes:
            probe.unlink()
    assert ["graphstore.client._circle_probe_a", "graphstore.client._circle_probe_b"] in circles


def test_every_import_follows_the_layers():
    problems = layering_violations()
    assert not problems, "imports against the layering:\n" + "\n".join(problems)


def test_the_rule_catches_a_violation(tmp_path, monkeypatch):
    """The checker itself fails on a bad import (a server module importing the client)."""
    bad = ROOT / "server" / "_layering_probe.py"
    bad.write_text("from graphstore.client import DistGraph\nfrom .. import client\n")
    try:
        problems = [p for p in layering_violations() if "_layering_probe" in p]
    finally:
        bad.unlink()
    assert len(problems) == 2
    assert "server may not import client" in problems[0]
    assert ":1:" in problems[0] and ":2:" in problems[1]


PACKAGES = [
    "graphstore.protos",
    "graphstore.partition",
    "graphstore.server",
    "graphstore.client",
    "graphstore.client.context",
    "graphstore.client.nn",
    "graphstore.client.dataloader",
    "graphstore.client.optim",
    "graphstore.client.transport",
    "graphstore.launcher",
    "graphstore.compat.dgl",
    "graphstore.compat.dgl.distributed",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_each_package_lists_its_public_names(name):
    package = importlib.import_module(name)
    public = getattr(package, "__all__", None)
    assert public, f"{name}/__init__ has no __all__"
    missing = [n for n in public if not hasattr(package, n)]
    assert not missing, f"{name}.__all__ names missing attributes: {missing}"
