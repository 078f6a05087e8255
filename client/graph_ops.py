"""Message passing on one relation: ``local_scope``, ``apply_edges`` and ``update_all`` for blocks and
pair graphs, with the built-ins of :mod:`graphstore.function` or user-defined edge functions.

:class:`GraphOps` is a mixin. A class that uses it names the attributes holding its frame tables
(``_frame_attrs``, e.g. ``("_src_frames", "_dst_frames", "_edge_frames")``: each maps a node or edge
type to that type's frame, a dict of tensors), re-derives its data views from them in
:meth:`GraphOps._derive_views`, and describes each relation in :meth:`GraphOps._relation`: local source
and destination IDs of the edges, the node counts of both sides, and the three frames the operands are
read from and results written to. :class:`~graphstore.client.block.Block` and
:class:`~graphstore.client.dataloader.PairGraph` use it; a typed graph runs it per relation: ``etype``
picks the relation (on a graph with one relation, homogeneous or ``block[etype]``, it may be left out).

Semantics follow DGL: ``apply_edges(fn.u_dot_v('h', 'h', 'score'))`` writes ``edata['score']``;
``update_all(fn.copy_u('h', 'm'), fn.mean('m', 'h_neigh'))`` writes the destination nodes'
``h_neigh`` (zeros where a node has no incoming edge) and keeps no message; data set inside
``with g.local_scope():`` is gone after it (tensors changed in place stay changed).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import NamedTuple

import torch

from graphstore import function as fn

# DGL's name for "every edge" (``dgl.base.ALL``).
ALL = "__ALL__"
_LOW_PRECISION = (torch.float16, torch.bfloat16)


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype sums and softmaxes of ``dtype`` values accumulate in: float32 for float16 and bfloat16,
    else ``dtype`` itself."""
    return torch.float32 if dtype in _LOW_PRECISION else dtype


def scatter_sum(messages: torch.Tensor, index: torch.Tensor, num_rows: int) -> torch.Tensor:
    """Sum ``messages`` rows into ``num_rows`` rows by ``index`` (in float32 for half precision).

    Args:
        messages: ``[E, ...]`` per-edge values.
        index: ``[E]`` destination row of each edge (int64).
        num_rows: number of output rows.

    Returns:
        ``[num_rows, ...]`` sums in the accumulation dtype (float32 for float16 / bfloat16 input).
    """
    acc = accumulation_dtype(messages.dtype)
    out = torch.zeros((num_rows, *messages.shape[1:]), dtype=acc, device=messages.device)
    return out.index_add_(0, index, messages.to(acc))


class Relation(NamedTuple):
    """One relation of a graph, as the message-passing functions see it.

    Attributes:
        src, dst: local source / destination node IDs of the edges (int64, same length).
        num_src, num_dst: the node counts of the two sides.
        src_frame, dst_frame, edge_frame: the data (name -> tensor) of the source nodes, destination
            nodes and edges; a pair graph passes its one node frame as both node frames.
    """

    src: torch.Tensor
    dst: torch.Tensor
    num_src: int
    num_dst: int
    src_frame: dict
    dst_frame: dict
    edge_frame: dict


class _Gathered(Mapping):
    """A node frame read along the edges: ``frame[name][index]``, computed on access."""

    def __init__(self, frame: Mapping, index: torch.Tensor):
        self._frame, self._index = frame, index

    def __getitem__(self, name: str) -> torch.Tensor:
        return self._frame[name][self._index]

    def __iter__(self):
        return iter(self._frame)

    def __len__(self) -> int:
        return len(self._frame)


class EdgeBatch:
    """What a user-defined edge function gets: ``edges.src[name]``, ``edges.dst[name]``,
    ``edges.data[name]`` (one row per edge) and ``edges.edges()``."""

    def __init__(self, relation: Relation):
        self._relation = relation
        self.src = _Gathered(relation.src_frame, relation.src)
        self.dst = _Gathered(relation.dst_frame, relation.dst)
        self.data = relation.edge_frame

    def edges(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(src, dst, edge IDs)`` in local IDs."""
        src = self._relation.src
        return src, self._relation.dst, torch.arange(src.shape[0], device=src.device)

    def batch_size(self) -> int:
        """Number of edges."""
        return int(self._relation.src.shape[0])


class NodeBatch:
    """What an ``apply_node_func`` gets: ``nodes.data[name]`` of the destination nodes."""

    def __init__(self, frame: dict, num_nodes: int, device: torch.device):
        self.data = frame
        self._num_nodes, self._device = num_nodes, device

    def nodes(self) -> torch.Tensor:
        """Local IDs of the nodes."""
        return torch.arange(self._num_nodes, device=self._device)

    def batch_size(self) -> int:
        """Number of nodes."""
        return self._num_nodes


class GraphOps:
    """``local_scope``, ``apply_edges`` and ``update_all`` over the relations :meth:`_relation` describes.

    The class also has ``to_canonical_etype(etype)`` (None: the only relation; KeyError otherwise).
    """

    _frame_attrs: tuple[str, ...] = ()

    def _relation(self, canonical) -> Relation:
        """The relation of one canonical edge type."""
        raise NotImplementedError

    def _derive_views(self) -> None:
        """Re-derive the data views (``srcdata``, ``edata``, ...) after the frames were replaced."""

    def _relation_for(self, etype) -> Relation:
        """The relation ``etype`` names (None: the graph's only one).

        Raises:
            ValueError: an unknown or ambiguous edge type, or None on a graph with several.
        """
        try:
            canonical = self.to_canonical_etype(etype)
        except KeyError as err:
            raise ValueError(f"etype={etype!r}: {err.args[0]}") from None
        return self._relation(canonical)

    @contextlib.contextmanager
    def local_scope(self) -> Iterator[None]:
        """A scope whose data changes are dropped on exit: every frame is a shallow copy inside it.

        Tensors stored before the scope stay shared, so an in-place change of one (``h += 1``) is
        kept; setting, replacing or deleting a name is not.
        """
        tables = [getattr(self, name) for name in self._frame_attrs]
        saved = [dict(table) for table in tables]
        for table in tables:
            for key, frame in table.items():
                table[key] = dict(frame)
        self._derive_views()
        try:
            yield
        finally:
            for table, frames in zip(tables, saved, strict=True):
                table.clear()
                table.update(frames)
            self._derive_views()

    def apply_edges(self, func, edges=ALL, etype=None) -> None:
        """Compute one value per edge into the edge data.

        Args:
            func: a message built-in (``fn.u_dot_v('h', 'h', 'score')``), or a callable taking an
                :class:`EdgeBatch` and returning ``{name: [E, ...] tensor}``.
            edges: every edge (DGL's ``ALL``, the default); a subset is not supported.
            etype: the relation (a canonical triple, ``"src:etype:dst"`` or an unambiguous name); None
                on a graph with one.

        Raises:
            NotImplementedError: ``edges`` other than ALL.
            ValueError: an unknown edge type, or none named on a graph with several.
            KeyError: an operand field missing from its frame (the message names the frame).
            TypeError: ``func`` neither a message built-in nor callable, or a callable not returning a
                dict of tensors.
        """
        _check_all_edges(edges)
        relation = self._relation_for(etype)
        relation.edge_frame.update(_messages(func, relation, "apply_edges"))

    def update_all(
        self, message_func, reduce_func, apply_node_func: Callable | None = None, etype=None
    ) -> None:
        """Send a message along every edge and combine them at each destination node.

        Args:
            message_func: a message built-in or a callable over an :class:`EdgeBatch` (see
                :meth:`apply_edges`).
            reduce_func: a reduce built-in (``fn.sum``, ``fn.mean``, ``fn.max``, ``fn.min``).
            apply_node_func: optional callable taking a :class:`NodeBatch` of the destination nodes
                and returning ``{name: tensor}`` to store on them.
            etype: the relation (see :meth:`apply_edges`).

        Raises:
            ValueError: an unknown edge type, or none named on a graph with several.
            TypeError: ``reduce_func`` not a reduce built-in (user-defined reducers are not supported).
            KeyError: the reducer's message field is not one the message function produced.
        """
        if not isinstance(reduce_func, fn.ReduceFunction):
            raise TypeError(
                "update_all(reduce_func=...) takes a reduce built-in of graphstore.function (sum, mean, "
                f"max, min); got {reduce_func!r} (user-defined reduce functions are not supported)"
            )
        relation = self._relation_for(etype)
        messages = _messages(message_func, relation, "update_all")
        if reduce_func.msg_field not in messages:
            raise KeyError(
                f"update_all: the reducer reads message {reduce_func.msg_field!r} but the message "
                f"function produced {sorted(messages)}"
            )
        relation.dst_frame[reduce_func.out_field] = reduce_messages(
            reduce_func.reduce_op, messages[reduce_func.msg_field], relation.dst, relation.num_dst
        )
        if apply_node_func is not None:
            batch = NodeBatch(relation.dst_frame, relation.num_dst, relation.dst.device)
            relation.dst_frame.update(_as_data(apply_node_func(batch), "apply_node_func"))


def _check_all_edges(edges) -> None:
    if not (isinstance(edges, str) and edges == ALL):
        raise NotImplementedError(
            f"apply_edges(edges={edges!r}): only every edge (ALL, the default) is supported"
        )


def _messages(func, relation: Relation, caller: str) -> dict[str, torch.Tensor]:
    if isinstance(func, fn.MessageFunction):
        return {func.out_field: compute_message(func, relation)}
    if isinstance(func, fn.BuiltinFunction):
        raise TypeError(f"{caller}: {func.name} is a reduce function; a message function is needed here")
    if callable(func):
        return _as_data(func(EdgeBatch(relation)), caller)
    raise TypeError(f"{caller}: expected a message built-in or a callable, got {type(func).__name__}")


def _as_data(result, caller: str) -> dict[str, torch.Tensor]:
    if not isinstance(result, Mapping) or not all(isinstance(v, torch.Tensor) for v in result.values()):
        raise TypeError(f"{caller}: a user-defined function must return a dict of tensors, got {result!r}")
    return dict(result)


def _operand(relation: Relation, target: str, field: str, builtin: str) -> torch.Tensor:
    frames = {
        "u": ("srcdata", relation.src_frame, relation.src),
        "v": ("dstdata", relation.dst_frame, relation.dst),
        "e": ("edata", relation.edge_frame, None),
    }
    frame_name, frame, index = frames[target]
    if field not in frame:
        raise KeyError(f"{builtin}: {frame_name} has no {field!r} (it has {sorted(frame)})")
    value = frame[field]
    return value if index is None else value[index]


def compute_message(func: fn.MessageFunction, relation: Relation) -> torch.Tensor:
    """The per-edge value of a message built-in on one relation.

    Returns:
        ``[E, ...]``: the operands broadcast over their feature dimensions (``dot``: ``[E, ..., 1]``).

    Raises:
        KeyError: an operand field missing from its frame.
    """
    if isinstance(func, fn.CopyMessageFunction):
        return _operand(relation, func.target, func.in_field, func.name)
    lhs = _operand(relation, func.lhs, func.lhs_field, func.name)
    rhs = _operand(relation, func.rhs, func.rhs_field, func.name)
    lhs, rhs = _align_feature_dims(lhs, rhs)
    if func.binary_op == "add":
        return lhs + rhs
    if func.binary_op == "sub":
        return lhs - rhs
    if func.binary_op == "mul":
        return lhs * rhs
    if func.binary_op == "div":
        return lhs / rhs
    return (lhs * rhs).sum(dim=-1, keepdim=True)


def _align_feature_dims(lhs: torch.Tensor, rhs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Give both operands the same rank by adding unit feature dimensions after the edge dimension,
    so their feature shapes broadcast aligned on the right (``[E]`` with ``[E, D]`` -> ``[E, 1]``)."""

    def widen(t: torch.Tensor, rank: int) -> torch.Tensor:
        missing = rank - t.dim()
        return t if missing <= 0 else t.reshape(t.shape[0], *([1] * missing), *t.shape[1:])

    rank = max(lhs.dim(), rhs.dim())
    return widen(lhs, rank), widen(rhs, rank)


def reduce_messages(op: str, messages: torch.Tensor, dst: torch.Tensor, num_dst: int) -> torch.Tensor:
    """Combine per-edge ``messages`` at their destinations.

    Args:
        op: ``'sum'``, ``'mean'``, ``'max'`` or ``'min'``.
        messages: ``[E, ...]``.
        dst: ``[E]`` destination of each edge.
        num_dst: number of destination nodes.

    Returns:
        ``[num_dst, ...]`` in the messages' dtype; zeros for nodes without incoming edges.
    """
    if op in ("sum", "mean"):
        total = scatter_sum(messages, dst, num_dst)
        if op == "mean":
            degree = torch.bincount(dst, minlength=num_dst).clamp(min=1).to(total.dtype)
            total = total / degree.view(-1, *([1] * (total.dim() - 1)))
        return total.to(messages.dtype)
    index = dst.view(-1, *([1] * (messages.dim() - 1))).expand_as(messages)
    out = torch.zeros((num_dst, *messages.shape[1:]), dtype=messages.dtype, device=messages.device)
    return out.scatter_reduce(
        0, index, messages, reduce="amax" if op == "max" else "amin", include_self=False
    )
