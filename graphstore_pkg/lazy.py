"""Package attributes loaded on first use (PEP 562), for packages whose submodules must import quickly.

``graphstore.client`` exports DistGraph and the layers (torch); ``graphstore status --probe`` and
``graphstore stop`` call servers through ``graphstore.client.transport.channel`` (grpc only). A package
``__init__`` that imported its exports would load torch for them; one that declares them here loads each
export's module only when the name is first read.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for names defined in its submodules.

    Args:
        package: the package's ``__name__``.
        exports: each exported name -> the module defining it (a submodule exported as itself maps to
            its own module name).

    Returns:
        ``(__getattr__, __dir__)`` to assign in the package's ``__init__``; a name read once is cached in
        the package's namespace.
    """

    def __getattr__(name: str) -> Any:
        module_name = exports.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(module_name)
        value = module if module_name == f"{package}.{name}" else getattr(module, name)
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(importlib.import_module(package))) | set(exports))

    return __getattr__, __dir__
