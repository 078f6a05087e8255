"""How much of DGL 2.x's distributed API the compat namespace covers, checked against the reference list
of DGL's names and signatures, and rendered as docs/compat.md's tables (so the document cannot drift
from the code). A documentation tool of the repository, not part of the package: it reads the docs
folder and :data:`NOTES_FILE` (``tools/dgl_coverage_notes.yaml``) beside it.

Every name of the reference (``docs/reference/dgl-2.x-signatures.md``, a copy of the project's
``../shared/reference/dgl-2.x-signatures.md``) gets a status:

- **implemented**: the name resolves in :mod:`graphstore.compat.dgl` and its parameters begin with DGL's,
  in DGL's order, with DGL's literal defaults (graphstore may add keyword parameters after them);
- **default only**: it resolves and its signature matches, but some argument works only at DGL's
  default (:data:`NOTES_FILE` says which);
- **not planned**: absent, or present only to raise ``NotImplementedError``; :data:`NOTES_FILE` gives the
  reason.

A name that resolves but whose signature differs from DGL's is reported as **differs**, a name that does
not resolve and has no reason as **missing**; ``tests/compat/test_compat_coverage.py`` fails on either,
and on a docs/compat.md whose tables are not what :func:`render` makes now.

    python tools/dgl_coverage.py            # print the tables
    python tools/dgl_coverage.py --write    # rewrite them in docs/compat.md
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import re
import sys
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]  # this file is tools/dgl_coverage.py
REFERENCE = REPO / "docs" / "reference" / "dgl-2.x-signatures.md"
DOC = REPO / "docs" / "compat.md"
BEGIN, END = "<!-- coverage:begin -->", "<!-- coverage:end -->"
STATUSES = ("implemented", "default only", "not planned", "differs", "missing")

# Where the reference's sections live in the compat namespace (DGL exports DistEmbedding from
# dgl.distributed too); the block / pair graph members are checked on the loaders' Block.
MODULE_ALIASES = {"dgl.distributed.nn": "dgl.distributed"}
GRAPH_SECTION = "DGLGraph"

# What the code cannot say by itself: the arguments that work only at DGL's default, and the reasons
# for names not planned, keyed by full name (``dgl.distributed.DistGraph.edge_subgraph``).
NOTES_FILE = Path(__file__).with_name("dgl_coverage_notes.yaml")
NOTES: dict[str, tuple[str, str]] = {
    name: (note["status"], note["note"])
    for name, note in yaml.safe_load(NOTES_FILE.read_text(encoding="utf-8")).items()
}


@dataclasses.dataclass
class Entry:
    """One name of the reference list.

    Attributes:
        name: the full name (``dgl.distributed.DistGraph.barrier``), or ``DGLGraph.member``.
        params: DGL's parameter list as written (None for a property).
        kind: ``'function'``, ``'class'``, ``'method'`` or ``'property'``.
    """

    name: str
    params: str | None
    kind: str


@dataclasses.dataclass
class Row:
    """A name's status and notes, as the tables show them."""

    name: str
    status: str
    notes: str


ENTRY = re.compile(r"^- (class )?`(\w[\w.]*)(?:\((.*)\))?`")
GRAPH_MEMBER = re.compile(r"^- (property )?`\.(\w+)(?:\((.*)\))?`")
MEMBER = re.compile(r"^  - (property )?`\.(\w+)(?:\((.*)\))?`")


def parse_reference(text: str) -> list[Entry]:
    """The names of the reference list's signature sections, in order.

    Args:
        text: the reference's markdown.

    Returns:
        Every module-level name and member as an :class:`Entry`.
    """
    entries: list[Entry] = []
    module, owner = None, None
    for line in text.splitlines():
        if line.startswith("## Names used"):
            break
        if line.startswith("### "):
            title = line[4:].split(" ")[0]
            module = GRAPH_SECTION if title.startswith(GRAPH_SECTION) else MODULE_ALIASES.get(title, title)
            owner = GRAPH_SECTION if module == GRAPH_SECTION else None
            continue
        if module is None:
            continue
        match = GRAPH_MEMBER.match(line) if module == GRAPH_SECTION else None
        if match:
            is_property, name, params = match.groups()
            kind = "property" if is_property else "method"
            entries.append(Entry(f"{GRAPH_SECTION}.{name}", None if is_property else params or "", kind))
            continue
        match = ENTRY.match(line)
        if match:
            is_class, name, params = match.groups()
            owner = f"{module}.{name}"
            entries.append(Entry(owner, params, "class" if is_class else "function"))
            continue
        match = MEMBER.match(line)
        if match and owner is not None:
            is_property, name, params = match.groups()
            kind = "property" if is_property else "method"
            entries.append(Entry(f"{owner}.{name}", None if is_property else params or "", kind))
    return entries


def example_names(text: str) -> list[str]:
    """The names the reference's table of DGL's distributed examples lists (module-level names full, e.g.
    ``dgl.distributed.DistGraph``; members as ``.member``)."""
    table = text[text.index("## Names used") :]
    names: list[str] = []
    for line in table.splitlines():
        cells = line.split("|")
        if (
            len(cells) < 4
            or not cells[1].strip().startswith("graphsage")
            and not cells[1].strip().startswith("rgcn")
        ):
            continue
        module = "dgl.distributed"
        for name in re.findall(r"`([\w.]+)`", cells[2]):
            if name.startswith("dgl."):
                names.append(name)
                prefix = name.rsplit(".", 1)[0]
                module = prefix if prefix != "dgl" else "dgl.distributed"
            else:
                names.append(f"{module}.{name}")
        names += [f".{name}" for name in re.findall(r"`([\w.]+)`", cells[3])]
    return list(dict.fromkeys(names))


def resolve(name: str):
    """The compat object of a full DGL name.

    Raises:
        AttributeError: the name does not exist in the compat namespace.
    """
    if name.startswith(GRAPH_SECTION + "."):
        from graphstore.client.block import Block

        target, parts = Block, name.split(".")[1:]
    else:
        target, parts = importlib.import_module("graphstore.compat.dgl"), name.split(".")[1:]
    for part in parts:
        if inspect.isclass(target) and part in vars(target).get("__annotations__", {}):
            return target
        try:
            target = (
                inspect.getattr_static(target, part) if inspect.isclass(target) else getattr(target, part)
            )
        except AttributeError:
            if inspect.ismodule(target):
                target = importlib.import_module(f"{target.__name__}.{part}")
            elif inspect.isclass(target) and _sets_attribute(target, part):
                return property(doc=f"{target.__name__}.{part}, set on each instance")
            else:
                raise
    return target


def _sets_attribute(cls: type, name: str) -> bool:
    """Whether ``cls`` (or a base) sets ``self.name`` on each instance."""
    for klass in cls.__mro__[:-1]:
        try:
            if re.search(rf"\bself\.{name}\s*(:[^=]+)?=", inspect.getsource(klass)):
                return True
        except (OSError, TypeError):
            continue
    return False


def _dgl_params(params: str) -> list[tuple[str, str, object]]:
    """DGL's parameters as ``(name, kind, default)``; a default that is not a literal is ``...``."""
    tree = ast.parse(f"def f({params}): pass").body[0].args
    out: list[tuple[str, str, object]] = []
    positional = tree.posonlyargs + tree.args
    defaults = [None] * (len(positional) - len(tree.defaults)) + list(tree.defaults)
    for arg, default in zip(positional, defaults, strict=True):
        out.append((arg.arg, "positional", _literal(default)))
    if tree.vararg is not None:
        out.append((tree.vararg.arg, "var", None))
    for arg, default in zip(tree.kwonlyargs, tree.kw_defaults, strict=True):
        out.append((arg.arg, "keyword", _literal(default)))
    if tree.kwarg is not None:
        out.append((tree.kwarg.arg, "varkw", None))
    return out


_NO_DEFAULT = object()


def _literal(node):
    if node is None:
        return _NO_DEFAULT
    try:
        return ast.literal_eval(node)
    except ValueError:
        return ...


def signature_difference(entry: Entry, target) -> str | None:
    """Why ``target``'s parameters do not begin with DGL's (None when they do).

    The names, their order and kind, and DGL's literal defaults must match; graphstore may add
    parameters after DGL's (keyword ones, or with defaults).
    """
    if entry.params is None:
        return None
    function = target.__init__ if entry.kind == "class" else target
    if isinstance(function, (staticmethod, classmethod)):
        function = function.__func__
    if isinstance(function, property):
        return "a property in graphstore, a method in DGL"
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    ours = list(signature.parameters.values())
    if entry.kind in ("class", "method") and ours and ours[0].name in ("self", "cls"):
        ours = ours[1:]
    dgl = _dgl_params(entry.params)
    if any(p.kind is p.VAR_POSITIONAL for p in ours) and any(p.kind is p.VAR_KEYWORD for p in ours):
        return None  # forwards everything (a wrapper)
    for index, (name, kind, default) in enumerate(dgl):
        if kind in ("var", "varkw"):
            if not any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in ours):
                return f"no *{name}"
            continue
        if index >= len(ours) or ours[index].name != name:
            got = ", ".join(p.name for p in ours)
            want = ", ".join(n for n, _, _ in dgl)
            return f"parameters ({got}) where DGL has ({want})"
        ours_default = ours[index].default
        if default is _NO_DEFAULT:
            continue
        if ours_default is inspect.Parameter.empty:
            return f"`{name}` has no default (DGL: {default!r})"
        if default is not ... and not _same_default(ours_default, default):
            return f"`{name}={ours_default!r}` (DGL: {default!r})"
    extra = ours[len(dgl) :]
    for param in extra:
        if param.default is inspect.Parameter.empty and param.kind not in (
            param.VAR_POSITIONAL,
            param.VAR_KEYWORD,
        ):
            return f"an extra required parameter `{param.name}`"
    return None


def _same_default(ours, dgl) -> bool:
    if isinstance(dgl, tuple) and isinstance(ours, (tuple, list)):
        return tuple(ours) == dgl
    return type(ours) is type(dgl) and ours == dgl or (ours is None and dgl is None)


def _raises_not_implemented(target) -> bool:
    try:
        return "raise NotImplementedError" in inspect.getsource(target)
    except (TypeError, OSError):
        return False


def status_of(entry: Entry) -> Row:
    """The row of one reference name (see the module docstring)."""
    planned, note = NOTES.get(entry.name, (None, ""))
    owner = entry.name.rsplit(".", 1)[0]
    if (
        planned is None
        and entry.kind in ("method", "property")
        and NOTES.get(owner, ("",))[0] == "not planned"
    ):
        planned, note = "not planned", f"as `{owner.rsplit('.', 1)[1]}`"
    try:
        target = resolve(entry.name)
    except (AttributeError, ImportError):
        return Row(entry.name, "not planned" if planned == "not planned" else "missing", note)
    if planned == "not planned":
        ok = _raises_not_implemented(target)
        return Row(entry.name, "not planned" if ok else "differs", note if ok else f"present: {note}")
    difference = signature_difference(entry, target)
    if difference is not None:
        return Row(entry.name, "differs", difference)
    return Row(entry.name, planned or "implemented", note)


def example_rows(text: str) -> list[Row]:
    """Rows for the names DGL's distributed examples use: module-level names resolve in the compat
    namespace; members on a DistGraph, a block, a pair graph or the partition book."""
    from graphstore.client.block import Block
    from graphstore.client.dataloader.pair_graph import PairGraph
    from graphstore.compat.dgl.distributed import DistGraph, RangePartitionBook

    owners = (DistGraph, Block, PairGraph, RangePartitionBook)
    rows = []
    for name in example_names(text):
        planned, note = NOTES.get(name, (None, ""))
        if name.startswith("."):
            found = [o.__name__ for o in owners if _has_member(o, name[1:])]
            status = "implemented" if found else ("not planned" if planned == "not planned" else "missing")
            rows.append(Row(f"`{name[1:]}` on {', '.join(found) or 'graphs'}", status, note))
            continue
        try:
            status = planned if planned in ("default only", "implemented") else "implemented"
            if planned == "not planned" and _raises_not_implemented(resolve(name)):
                status = "not planned"  # present only to raise
        except (AttributeError, ImportError):
            status = "not planned" if planned == "not planned" else "missing"
        rows.append(Row(f"`{name}`", status, note))
    return rows


def _has_member(owner: type, name: str) -> bool:
    if hasattr(owner, name):
        return True
    init = getattr(owner, "_attach", None) or owner.__init__
    try:
        return f"self.{name} =" in inspect.getsource(init) or f".{name} =" in inspect.getsource(owner)
    except (OSError, TypeError):
        return False


def rows(text: str) -> list[Row]:
    """Every reference name's row, in the reference's order."""
    return [status_of(entry) for entry in parse_reference(text)]


def counts(table: list[Row]) -> Counter:
    """Rows per status."""
    return Counter(row.status for row in table)


def render(text: str) -> str:
    """docs/compat.md's generated part: a table per module of the reference, the counts, and the table of
    the names DGL's distributed examples use."""
    table = rows(text)
    out = [
        BEGIN,
        "<!-- generated by `python tools/dgl_coverage.py --write`; do not edit by hand -->",
        "",
    ]
    module = None
    for row in table:
        parts = row.name.split(".")
        section = GRAPH_SECTION if parts[0] == GRAPH_SECTION else _module_of(row.name)
        if section != module:
            module = section
            title = (
                "blocks and pair graphs (`DGLGraph` members)" if section == GRAPH_SECTION else f"`{section}`"
            )
            out += ["", f"### {title}", "", "| name | status | notes |", "|---|---|---|"]
        short = row.name[len(section) + 1 :]
        out.append(f"| `{short}` | {row.status} | {row.notes} |")
    total = counts(table)
    summary = ", ".join(f"{total[s]} {s}" for s in STATUSES if total[s])
    out += [
        "",
        f"Counts: **{summary}** ({len(table)} names).",
        "",
        "### Names DGL 2.x's distributed examples use",
        "",
    ]
    out += ["| name | status | notes |", "|---|---|---|"]
    examples = example_rows(text)
    out += [f"| {row.name} | {row.status} | {row.notes} |" for row in examples]
    total = counts(examples)
    summary = ", ".join(f"{total[s]} {s}" for s in STATUSES if total[s])
    out += ["", f"Example names: **{summary}** ({len(examples)} names).", "", END]
    return "\n".join(out)


def _module_of(name: str) -> str:
    parts = name.split(".")
    for end in range(len(parts) - 1, 0, -1):
        candidate = ".".join(parts[:end])
        if (
            candidate in ("dgl.distributed.optim", "dgl.dataloading.negative_sampler", "dgl.nn.pytorch")
            or end == 2
        ):
            return candidate
    return parts[0]


def replace_generated(doc: str, generated: str) -> str:
    """``doc`` with its generated part replaced.

    Raises:
        ValueError: the document has no generated part (its markers).
    """
    if BEGIN not in doc or END not in doc:
        raise ValueError(f"{DOC} has no {BEGIN} ... {END} part")
    head, rest = doc.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    return head + generated + tail


def main(argv=None) -> int:
    """Print the generated tables, or write them into docs/compat.md (``--write``)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--write", action="store_true", help=f"rewrite the generated part of {DOC}")
    parser.add_argument("--reference", type=Path, default=REFERENCE, help="the DGL signature list")
    args = parser.parse_args(argv)
    generated = render(args.reference.read_text())
    if args.write:
        DOC.write_text(replace_generated(DOC.read_text(), generated))
    else:
        print(generated)
    bad = [row for row in rows(args.reference.read_text()) if row.status in ("differs", "missing")]
    for row in bad:
        print(f"{row.status}: {row.name}: {row.notes}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
