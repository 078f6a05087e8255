"""Member names of a typed (heterogeneous) input ``.npz``.

- ``num_nodes/<ntype>``: 0-d int64, the node count of each node type;
- ``node/<ntype>/<name>``: a node array of that type (first dimension = its node count);
- ``edge/<src>:<etype>:<dst>/src`` and ``.../dst``: int64 per-type node IDs of the canonical edge type's
  endpoints (``src`` IDs of type ``<src>``, ``dst`` IDs of type ``<dst>``);
- ``edge/<src>:<etype>:<dst>/<name>``: an edge array of that canonical edge type (first dimension = its
  edge count).

Type names contain neither ``/`` nor ``:``.
"""

from __future__ import annotations

CanonicalEtype = tuple[str, str, str]


def num_nodes_key(ntype: str) -> str:
    """``num_nodes/<ntype>``."""
    return f"num_nodes/{ntype}"


def node_key(ntype: str, name: str) -> str:
    """``node/<ntype>/<name>``."""
    return f"node/{ntype}/{name}"


def edge_key(canonical_etype: CanonicalEtype, name: str) -> str:
    """``edge/<src>:<etype>:<dst>/<name>`` (``name`` is ``src``, ``dst`` or an edge array's name)."""
    return f"edge/{':'.join(canonical_etype)}/{name}"
