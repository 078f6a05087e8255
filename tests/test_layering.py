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
- ``examples`` and ``bench``: the package's public names only (no ``tests``, no ``_private`` names or
  modules).

Relative imports and imports inside functions count. A violation fails with the file, the line and
the import.
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
