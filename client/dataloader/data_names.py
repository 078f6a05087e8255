"""Which node data the loaders pull when they are not told: the names come from the graph's own data.

The partition files hold the graph's node arrays under the names they had (``feat`` from
``graphstore generate``, ``x`` / ``y`` from PyG, ``features`` / ``labels`` from DGL's examples).
:func:`default_feature_names` and :func:`default_label_name` pick the input features and the labels
among the arrays loaded from the partition files (tensors created at run time are never picked), of
every node type on a typed graph (the loaders then pull a name for each type that holds it):

- features: ``feat`` when the graph has it, else every floating array with a feature dimension
  (``[N, D]``);
- labels: the first of ``label``, ``labels``, ``y`` the graph has, else its only integer ``[N]`` array,
  else none.
"""

from __future__ import annotations

from graphstore import dtypes

PREFERRED_FEATURE = "feat"
PREFERRED_LABELS = ("label", "labels", "y")


class _FromGraph:
    """The default of ``load_features`` / ``load_labels``: take the names from the graph's data."""

    def __repr__(self) -> str:
        return "FROM_GRAPH"


FROM_GRAPH = _FromGraph()


def _partition_arrays(g) -> dict[str, tuple[tuple[int, ...], str]]:
    """``{name: (global shape, dtype name)}`` of the node arrays loaded from the partition files, over
    every node type (a name several types hold is listed with its first type's shape)."""
    out: dict[str, tuple[tuple[int, ...], str]] = {}
    for ntype in g.ntypes:
        data = g.nodes[ntype].data
        for name in data.keys():
            scheme = getattr(data[name], "scheme", None)
            if name not in out and scheme is not None and scheme.from_partition:
                out[name] = (tuple(scheme.shape), scheme.dtype)
    return out


def default_feature_names(g) -> tuple[str, ...]:
    """The node features a loader pulls by default (see the module docstring); may be empty."""
    arrays = _partition_arrays(g)
    if PREFERRED_FEATURE in arrays:
        return (PREFERRED_FEATURE,)
    return tuple(
        sorted(
            name
            for name, (shape, dtype) in arrays.items()
            if len(shape) >= 2 and dtypes.torch_dtype(dtype).is_floating_point
        )
    )


def default_label_name(g) -> str | None:
    """The node labels a node loader pulls by default (see the module docstring), or None."""
    arrays = _partition_arrays(g)
    for name in PREFERRED_LABELS:
        if name in arrays:
            return name
    integers = [
        name
        for name, (shape, dtype) in arrays.items()
        if len(shape) == 1 and dtype != "bool" and not dtypes.torch_dtype(dtype).is_floating_point
    ]
    return integers[0] if len(integers) == 1 else None
