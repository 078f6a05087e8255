"""A non-editable install (the Docker image's ``pip install .``) ships every package of the tree.

pyproject.toml maps the root folders into the ``graphstore`` namespace and lists the packages by
name; a subpackage missing from that list installs nowhere but in editable mode.
"""

from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_folder_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    folders = {name: Path(path) for name, path in config["package-dir"].items()}
    found = set()
    for name, folder in folders.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            found.add(".".join([name, *relative.parts]) if relative.parts else name)
    missing = sorted(found - listed)
    assert not missing, f"packages missing from pyproject.toml [tool.setuptools] packages: {missing}"
