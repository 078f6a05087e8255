"""docs/compat.md's table of ``dgl.distributed`` names stays true: every name marked implemented or
default only exists in the compat namespace, every name marked not planned is absent or raises
NotImplementedError, and the counts printed under the table are the table's."""

from __future__ import annotations

import inspect
import re
from collections import Counter

import pytest

import graphstore.compat.dgl as dgl
from tests.launcher.helpers import REPO

# Members DGL exposes as properties that graphstore sets on each instance.
INSTANCE_ATTRIBUTES = {"DistEmbedding.num_embeddings", "DistEmbedding.embedding_dim", "DistEmbedding.weight"}
STATUSES = ("implemented", "default only", "not planned")


def _rows() -> list[tuple[str, str]]:
    text = (REPO / "docs" / "compat.md").read_text()
    table = text[text.index("## Every public name") : text.index("Counts:")]
    return re.findall(r"^\| `([^`|]+)` \| ([a-z ]+?) \|", table, flags=re.M)


def _resolve(name: str):
    target = dgl.distributed
    for part in name.split("."):
        target = getattr(target, part)
    return target


def test_the_table_names_every_name_once_with_a_known_status():
    rows = _rows()
    names = [name for name, _ in rows]
    assert len(names) == len(set(names)) and len(names) > 100
    assert {status for _, status in rows} <= set(STATUSES)


@pytest.mark.parametrize("name, status", _rows())
def test_each_name_is_what_the_table_says(name, status):
    if status == "not planned":
        try:
            member = _resolve(name)
        except AttributeError:
            return
        # Present only to say so: its body raises NotImplementedError.
        assert "raise NotImplementedError" in inspect.getsource(member), name
        return
    if name in INSTANCE_ATTRIBUTES:
        cls, attribute = name.split(".")
        assert attribute in getattr(dgl.distributed, cls).__init__.__code__.co_names
        return
    assert _resolve(name) is not None


def test_the_printed_counts_are_the_tables():
    counts = Counter(status for _, status in _rows())
    text = (REPO / "docs" / "compat.md").read_text()
    expected = (
        f"Counts: **{counts['implemented']} implemented, {counts['default only']} default only, "
        f"{counts['not planned']} not planned** ({sum(counts.values())} names)."
    )
    assert expected in text
