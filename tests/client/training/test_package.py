"""The training package's surface: every public name resolves, and it builds only on the public names
of ``graphstore.client`` (so that the client's internal modules can move freely)."""

from __future__ import annotations

import ast
from pathlib import Path

import graphstore.client
import graphstore.client.training as training

PACKAGE_DIR = Path(training.__file__).parent


def test_every_public_name_resolves():
    assert training.__all__
    missing = [name for name in training.__all__ if not hasattr(training, name)]
    assert not missing


def test_only_public_client_names_are_imported():
    problems = []
    for path in sorted(PACKAGE_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [(alias.name, []) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [(node.module or "", [alias.name for alias in node.names])]
            else:
                continue
            for module, names in modules:
                if not module.startswith("graphstore.client") or module.startswith(
                    "graphstore.client.training"
                ):
                    continue
                if module != "graphstore.client":
                    problems.append(f"{path.name}:{node.lineno}: imports the client module {module}")
                private = [n for n in names if n not in graphstore.client.__all__]
                if private:
                    problems.append(f"{path.name}:{node.lineno}: {private} not in graphstore.client.__all__")
    assert not problems, "\n".join(problems)
