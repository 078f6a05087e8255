"""The data views of a DistGraph: ``g.ndata`` / ``g.edata`` and ``g.nodes[ntype].data`` /
``g.edges[etype].data``, each a mapping of names to :class:`DistTensor` over one ID space.

On a homogeneous graph a name is the tensor's name on the servers (an edge feature that clashes with
a node feature is stored as ``edge:NAME``). On a typed graph the data of a type are the tensors named
``TYPE/NAME`` (DGL's keys: ``"paper/feat"``, ``"author:writes:paper/weight"``) over that type's
per-type IDs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import NamedTuple

import numpy as np
import torch

from graphstore import dtypes
from graphstore.client.constants import ANONYMOUS_PREFIX
from graphstore.client.context import ClientContext
from graphstore.client.dist_tensor import DistTensor
from graphstore.types import EDGE, NODE, TensorScheme, etype_key, typed_tensor_name

# Edge features whose name clashes with a node feature are stored as "edge:NAME" on the servers.
_EDGE_PREFIX = "edge:"


class AttrScheme(NamedTuple):
    """Row shape and torch dtype of one node or edge feature (DGL's ``Scheme``)."""

    shape: tuple[int, ...]
    dtype: torch.dtype


class DataView(MutableMapping):
    """Names -> :class:`DistTensor` of one ID space (a policy).

    Reading a name attaches to the tensor on the servers; assigning a :class:`DistTensor` registers it
    under the key (keeping the object, and so a non-persistent tensor, alive as long as the graph);
    assigning a full torch tensor or numpy array creates (or overwrites) the tensor with those rows.
    ``del`` drops the graph's reference (a non-persistent tensor it created is then released).
    Unnamed tensors are hidden from iteration.

    Args:
        ctx: the graph's client context (its servers and partition book).
        policy: the ID space (``"node"``, ``"edge"``, ``"node:<ntype>"``, ``"edge:<src>:<etype>:<dst>"``).
        type_key: the node type or canonical edge type key of a typed graph's view; None on a
            homogeneous graph.
    """

    def __init__(self, ctx: ClientContext, policy: str, type_key: str | None = None):
        self._ctx = ctx
        self._policy = policy
        self._kind = policy.partition(":")[0]
        self._type_key = type_key
        self._registered: dict[str, DistTensor] = {}
        self._attached: dict[str, DistTensor] = {}

    def _tensor_names(self, key: str) -> tuple[str, ...]:
        """Server names a key may have, most likely first."""
        if self._type_key is not None:
            return (typed_tensor_name(self._type_key, key),)
        return (key, _EDGE_PREFIX + key) if self._kind == EDGE else (key,)

    def _key_of(self, name: str) -> str | None:
        """The key of a server tensor name in this view, or None when it is not this view's."""
        if name.startswith(ANONYMOUS_PREFIX):
            return None
        if self._type_key is not None:
            prefix = typed_tensor_name(self._type_key, "")
            return name[len(prefix) :] if name.startswith(prefix) else None
        if self._kind == EDGE and name.startswith(_EDGE_PREFIX):
            return name[len(_EDGE_PREFIX) :]
        return name

    def _server_schemes(self) -> dict[str, TensorScheme]:
        schemes = self._ctx.refresh_schemes()
        out = {}
        for name, scheme in schemes.items():
            key = self._key_of(name)
            if key is not None and scheme.policy == self._policy:
                out[key] = scheme
        return out

    def _keys(self) -> list[str]:
        names = dict.fromkeys(self._server_schemes())
        names.update(dict.fromkeys(self._registered))
        return list(names)

    def __getitem__(self, key: str) -> DistTensor:
        if key in self._registered:
            return self._registered[key]
        cached = self._attached.get(key)
        if cached is not None:
            return cached
        ctx = self._ctx
        scheme = None
        for candidate in self._tensor_names(key):
            scheme = ctx.tensor_scheme(candidate)
            if scheme is None:
                scheme = ctx.tensor_scheme(candidate, refresh=True)
            if scheme is not None and scheme.policy == self._policy:
                break
            scheme = None
        if scheme is None:
            raise KeyError(f"no {self._describe()} data named {key!r}; available: {sorted(self._keys())}")
        tensor = DistTensor._from_scheme(ctx, scheme)
        self._attached[key] = tensor
        return tensor

    def _describe(self) -> str:
        if self._type_key is None:
            return "node (ndata)" if self._kind == NODE else "edge (edata)"
        return f"{self._kind} type {self._type_key!r}"

    def __setitem__(self, key: str, value) -> None:
        if not isinstance(key, str) or not key or "/" in key:
            raise KeyError(f"data names must be non-empty strings without '/', got {key!r}")
        if isinstance(value, DistTensor):
            if value._policy_kind != self._policy:
                raise ValueError(
                    f"DistTensor {value.name!r} is partitioned by {value._policy_kind!r} but is assigned to "
                    f"the {self._describe()} data ({self._policy!r})"
                )
            self._registered[key] = value
            self._attached.pop(key, None)
            return
        if isinstance(value, np.ndarray):
            value = dtypes.to_torch(value, dtypes.name_of(value.dtype))
        if not isinstance(value, torch.Tensor):
            raise TypeError(
                f"data values must be DistTensors, torch tensors or numpy arrays, got {type(value).__name__}"
            )
        ctx = self._ctx
        total = ctx.num_rows(self._policy)
        if value.dim() == 0 or value.shape[0] != total:
            raise ValueError(f"{key!r}: a full tensor needs {total} rows, got shape {tuple(value.shape)}")
        name = self._tensor_names(key)[0]
        tensor = DistTensor(tuple(value.shape), value.dtype, name=name, part_policy=self._policy)
        tensor.write(slice(0, total), value)
        self._registered[key] = tensor
        self._attached.pop(key, None)

    def __delitem__(self, key: str) -> None:
        found = self._registered.pop(key, None) is not None
        found = self._attached.pop(key, None) is not None or found
        if not found:
            raise KeyError(f"{key!r} is not registered in this graph's data view")

    def __contains__(self, key: object) -> bool:
        if key in self._registered or key in self._attached:
            return True
        if not isinstance(key, str):
            return False
        try:
            self[key]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def schemes(self) -> dict[str, AttrScheme]:
        """Row shape and torch dtype per name."""
        out = {}
        for key, scheme in self._server_schemes().items():
            out[key] = AttrScheme(tuple(scheme.shape[1:]), dtypes.torch_dtype(scheme.dtype))
        for key, tensor in self._registered.items():
            out[key] = AttrScheme(tensor.shape[1:], tensor.dtype)
        return out

    def __repr__(self) -> str:
        kind = "NodeDataView" if self._kind == NODE else "EdgeDataView"
        return f"{kind}({sorted(self._keys())})"


class TypeSpace:
    """One node or edge type of a DistGraph (``g.nodes['paper']``): its ``data`` view."""

    def __init__(self, data: DataView):
        self.data = data


class TypeViews:
    """``g.nodes`` / ``g.edges``: ``g.nodes[ntype].data[name]``; calling it (``g.nodes('paper')``) gives
    the type's IDs, as DGL's node and edge views do.

    Args:
        ctx: the graph's client context.
        kind: ``"node"`` or ``"edge"``.
        whole: the graph's ``ndata`` (or ``edata``) view, the one type's data on a homogeneous graph.
        count: the number of nodes (or edges) of a type (``DistGraph.num_nodes`` / ``num_edges``).
    """

    def __init__(self, ctx: ClientContext, kind: str, whole: DataView, count: Callable[..., int]):
        self._ctx = ctx
        self._kind = kind
        self._whole = whole
        self._count = count
        self._views: dict[str, TypeSpace] = {}

    def __getitem__(self, type_name) -> TypeSpace:
        schema = self._ctx.book.schema
        if self._kind == NODE:
            policy = schema.node_policy(type_name)
            key = schema.ntypes[schema.ntype_id(type_name)]
        else:
            canonical = schema.to_canonical_etype(type_name)
            policy = schema.edge_policy(canonical)
            key = etype_key(canonical)
        if key not in self._views:
            view = self._whole if schema.is_homogeneous else DataView(self._ctx, policy, key)
            self._views[key] = TypeSpace(view)
        return self._views[key]

    def __call__(self, type_name=None) -> torch.Tensor:
        return torch.arange(self._count(type_name), dtype=torch.int64)

    def __repr__(self) -> str:
        schema = self._ctx.book.schema
        names = schema.ntypes if self._kind == NODE else [etype_key(c) for c in schema.canonical_etypes]
        return f"{'Node' if self._kind == NODE else 'Edge'}Views({list(names)})"
