"""``dgl.distributed``'s graph services: neighbor sampling and edge look-ups on a DistGraph.

:func:`sample_neighbors` returns a :class:`graphstore.client.frontier.SampledSubgraph` (global IDs, with
``edata[EID]``); ``dgl.to_block(frontier, seeds)`` turns it into a block as in DGL.
"""

from __future__ import annotations

import torch

from graphstore.client import sampling as _sampling
from graphstore.client.frontier import SampledSubgraph


def _check_default(function: str, name: str, value, default) -> None:
    if value != default:
        raise NotImplementedError(f"{function}({name}={value!r}) is not supported; only {name}={default!r}")


def sample_neighbors(
    g,
    nodes,
    fanout: int,
    edge_dir: str = "in",
    prob=None,
    exclude_edges=None,
    replace: bool = False,
    etype_sorted: bool = True,
    output_device=None,
    use_graphbolt: bool = False,
) -> SampledSubgraph:
    """Sample up to ``fanout`` in- (or out-) edges of each node (``dgl.distributed.sample_neighbors``).

    Args:
        g: the DistGraph.
        nodes: global node IDs.
        fanout: edges per node; -1 takes all.
        edge_dir: ``'in'`` or ``'out'``.
        prob: name of an edge feature of sampling weights.
        exclude_edges: global edge IDs never sampled.
        replace: sample with replacement.
        etype_sorted: True (DGL's default; the edges of a homogeneous graph have one type).
        output_device: None or the CPU (the frontier stays on the CPU; blocks move with ``to``).
        use_graphbolt: False.

    Returns:
        The sampled frontier.

    Raises:
        NotImplementedError: another value of ``etype_sorted``, ``output_device`` or ``use_graphbolt``.
    """
    _check_default("sample_neighbors", "etype_sorted", bool(etype_sorted), True)
    _check_default("sample_neighbors", "use_graphbolt", bool(use_graphbolt), False)
    if output_device is not None and torch.device(output_device).type != "cpu":
        raise NotImplementedError(
            f"sample_neighbors(output_device={output_device!r}): frontiers stay on the CPU; move the block "
            "with block.to(device) (or NeighborSampler(output_device=...))"
        )
    return _sampling.sample_neighbors(
        g, nodes, fanout, edge_dir=edge_dir, prob=prob, exclude_edges=exclude_edges, replace=replace
    )


find_edges = _sampling.find_edges
in_subgraph = _sampling.in_subgraph

__all__ = ["find_edges", "in_subgraph", "sample_neighbors"]
