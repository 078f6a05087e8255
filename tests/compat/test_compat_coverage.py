"""docs/compat.md's tables are what the code says: every name of DGL 2.x's distributed API (the reference
list) resolves in the compat namespace with DGL's signature, or is listed as not planned with a reason;
the file is exactly what ``make dgl-coverage`` (``python tools/dgl_coverage.py --write``) renders; the
reference copy in docs/ is the project's shared one where that exists."""

from __future__ import annotations

import pytest

from tests.launcher.helpers import REPO
from tools import dgl_coverage as coverage

TEXT = coverage.REFERENCE.read_text()
# The project's shared folder sits beside the main checkout (../shared), or beside a worktree's parent.
CANDIDATES = [p / "shared" / "reference" / coverage.REFERENCE.name for p in (REPO.parent, REPO.parent.parent)]
SHARED = next((path for path in CANDIDATES if path.exists()), CANDIDATES[0])


def test_no_name_is_missing_or_differs_from_dgls_signature():
    table = coverage.rows(TEXT) + coverage.example_rows(TEXT)
    bad = [f"{row.status}: {row.name}: {row.notes}" for row in table if row.status in ("differs", "missing")]
    assert not bad, "\n".join(bad)
    assert len(coverage.rows(TEXT)) > 200


def test_every_not_planned_name_says_why():
    for row in coverage.rows(TEXT) + coverage.example_rows(TEXT):
        if row.status in ("not planned", "default only"):
            assert row.notes, row.name


def test_the_doc_is_what_the_code_renders():
    doc = (REPO / "docs" / "compat.md").read_text()
    assert coverage.replace_generated(doc, coverage.render(TEXT)) == doc, (
        "docs/compat.md is stale: run python tools/dgl_coverage.py --write (make dgl-coverage)"
    )


def test_a_changed_signature_is_caught():
    entry = coverage.Entry("dgl.distributed.node_split", "nodes, partition_book=None, ntype='_E'", "function")
    assert "ntype" in coverage.signature_difference(entry, coverage.resolve(entry.name))
    entry = coverage.Entry("dgl.nn.pytorch.GraphConv", "in_feats, out_feats, norm='both'", "class")
    assert coverage.signature_difference(entry, coverage.resolve(entry.name)) is None


@pytest.mark.skipif(
    not SHARED.exists(), reason="the project's shared reference folder is not beside the checkout"
)
def test_the_reference_copy_is_the_shared_one():
    assert SHARED.read_text() == TEXT
