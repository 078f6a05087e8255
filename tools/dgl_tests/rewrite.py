"""The one change made to DGL's test files before they run on graphstore: their imports of ``dgl`` point
at :mod:`graphstore.compat.dgl`. Nothing else in a file changes (:func:`changed_lines_are_imports`
checks it line by line).

Rules (``PKG`` is ``graphstore.compat.dgl``):

- ``import dgl`` -> ``import PKG as dgl``; ``import dgl as x`` -> ``import PKG as x``;
- ``import dgl.a.b as x`` -> ``import PKG.a.b as x``; ``import dgl.a.b`` (which binds ``dgl``) ->
  ``import PKG.a.b; import PKG as dgl`` (one line, so line numbers stay the same);
- ``from dgl import ...`` -> ``from PKG import ...``; ``from dgl.a import ...`` -> ``from PKG.a import ...``
  (a parenthesised list continues unchanged on the next lines);
- ``from dgl.backend import *`` (DGL's ``tests/backend`` helper) -> ``from PKG.backend import *``.

The rewrite works on whole lines that are import statements (any indentation: imports inside functions
count); a line that merely mentions ``dgl.`` (``dgl.NID``, ``dgl.distributed.initialize(...)``) is an
attribute of the imported module and stays as it is.
"""

from __future__ import annotations

import re

PACKAGE = "graphstore.compat.dgl"

_IMPORT = re.compile(
    r"^(?P<indent>\s*)import\s+dgl(?P<sub>(?:\.\w+)*)(?:\s+as\s+(?P<alias>\w+))?\s*(?P<comment>#.*)?$"
)
_FROM = re.compile(r"^(?P<indent>\s*)from\s+dgl(?P<sub>(?:\.\w+)*)\s+import\b(?P<rest>.*)$")


def rewrite_line(line: str) -> str:
    """One source line with its ``dgl`` import pointed at the compat namespace (other lines unchanged).

    Args:
        line: a line without its newline.

    Returns:
        The rewritten line.
    """
    match = _IMPORT.match(line)
    if match:
        indent, sub, alias = match["indent"], match["sub"], match["alias"]
        comment = f"  {match['comment']}" if match["comment"] else ""
        if alias:
            return f"{indent}import {PACKAGE}{sub} as {alias}{comment}"
        if not sub:
            return f"{indent}import {PACKAGE} as dgl{comment}"
        return f"{indent}import {PACKAGE}{sub}; import {PACKAGE} as dgl{comment}"
    match = _FROM.match(line)
    if match:
        return f"{match['indent']}from {PACKAGE}{match['sub']} import{match['rest']}"
    return line


def rewrite_source(text: str) -> tuple[str, int]:
    """A file's text with every ``dgl`` import rewritten.

    Returns:
        ``(new text, number of lines changed)``; the number of lines and their endings are kept.
    """
    lines = text.split("\n")
    out = [rewrite_line(line) for line in lines]
    changed = sum(1 for old, new in zip(lines, out, strict=True) if old != new)
    return "\n".join(out), changed


def changed_lines_are_imports(old: str, new: str) -> list[str]:
    """The lines where ``new`` differs from ``old`` other than by an import rewrite (empty when the only
    changes are imports).

    Raises:
        ValueError: the two texts have different line counts.
    """
    old_lines, new_lines = old.split("\n"), new.split("\n")
    if len(old_lines) != len(new_lines):
        raise ValueError(f"line count changed: {len(old_lines)} -> {len(new_lines)}")
    problems = []
    for number, (a, b) in enumerate(zip(old_lines, new_lines, strict=True), start=1):
        if a != b and not (_IMPORT.match(a) or _FROM.match(a)):
            problems.append(f"line {number}: {a!r} -> {b!r}")
    return problems
