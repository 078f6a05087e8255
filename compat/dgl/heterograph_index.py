"""``dgl.heterograph_index``: DGL's C++ graph index, which DGL's distributed tests import by name
(``create_unitgraph_from_coo``). graphstore has no such index: in-memory graphs are
:class:`~graphstore.compat.dgl.local_graph.LocalGraph` (build them with ``dgl.graph`` /
``dgl.heterograph``)."""

from __future__ import annotations


def create_unitgraph_from_coo(
    num_ntypes, num_src, num_dst, row, col, formats, row_sorted=False, col_sorted=False
):
    """DGL's internal graph-index constructor.

    Raises:
        NotImplementedError: always (use ``dgl.graph((row, col), num_nodes=...)``).
    """
    raise NotImplementedError(
        "dgl.heterograph_index is DGL's internal graph index; build graphs with dgl.graph((row, col)) or "
        "dgl.heterograph"
    )


__all__ = ["create_unitgraph_from_coo"]
