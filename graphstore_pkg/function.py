"""Built-in message and reduce functions for ``update_all`` / ``apply_edges`` (``dgl.function``'s names).

A built-in is a description, not a computation: ``copy_u('h', 'm')`` says "the message of each edge is
its source node's ``h``, stored as ``m``"; the graph objects that run them (blocks and pair graphs, see
:mod:`graphstore.client.graph_ops`) do the work over one relation at a time. So this module has no
dependency beyond the standard library and sits at the root of the import graph.

Message functions:

- ``copy_u(u, out)``, ``copy_e(e, out)``: the source node's field ``u`` / the edge's field ``e``;
- ``{u,v,e}_{add,sub,mul,div,dot}_{u,v,e}(lhs_field, rhs_field, out)`` for every pair of distinct
  targets (``u``: the edge's source node, ``v``: its destination node, ``e``: the edge). Operands
  broadcast over their feature dimensions (NumPy rules, aligned on the right); ``dot`` sums the
  product over the last dimension and keeps it (``[E, D]`` operands give ``[E, 1]``).

Reduce functions: ``sum``, ``mean``, ``max``, ``min`` with ``(msg, out)``; a destination node without
incoming edges gets zeros.

Usage::

    import graphstore.function as fn

    with block.local_scope():
        block.srcdata["h"] = h
        block.update_all(fn.copy_u("h", "m"), fn.mean("m", "h_neigh"))
        h_neigh = block.dstdata["h_neigh"]
    pair_graph.apply_edges(fn.u_dot_v("h", "h", "score"))
"""

from __future__ import annotations

from dataclasses import dataclass

# Where an operand comes from: the edge's source node, its destination node, or the edge itself.
TARGETS = ("u", "v", "e")
BINARY_OPS = ("add", "sub", "mul", "div", "dot")
REDUCE_OPS = ("sum", "mean", "max", "min")


def _check_field(value, argument: str, function: str) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{function}(): {argument} must be a non-empty field name, got {value!r}")
    return value


class BuiltinFunction:
    """Base of every built-in: the name it was made with (``copy_u``, ``u_dot_v``, ``sum``)."""

    name: str


class MessageFunction(BuiltinFunction):
    """A built-in computing one value per edge, stored under ``out_field``."""

    out_field: str


@dataclass(frozen=True)
class CopyMessageFunction(MessageFunction):
    """The message is a field of one target, unchanged.

    Attributes:
        target: ``'u'`` (source node) or ``'e'`` (edge).
        in_field: the field read.
        out_field: where the message is stored.
    """

    target: str
    in_field: str
    out_field: str

    @property
    def name(self) -> str:
        return f"copy_{self.target}"


@dataclass(frozen=True)
class BinaryMessageFunction(MessageFunction):
    """The message is ``lhs <op> rhs`` of two targets' fields.

    Attributes:
        binary_op: one of :data:`BINARY_OPS`.
        lhs, rhs: targets (``'u'``, ``'v'`` or ``'e'``), different from each other.
        lhs_field, rhs_field: the fields read.
        out_field: where the message is stored.
    """

    binary_op: str
    lhs: str
    rhs: str
    lhs_field: str
    rhs_field: str
    out_field: str

    @property
    def name(self) -> str:
        return f"{self.lhs}_{self.binary_op}_{self.rhs}"


@dataclass(frozen=True)
class ReduceFunction(BuiltinFunction):
    """Combines the messages arriving at each destination node.

    Attributes:
        reduce_op: one of :data:`REDUCE_OPS`.
        msg_field: the message field read.
        out_field: the destination-node field written.
    """

    reduce_op: str
    msg_field: str
    out_field: str

    @property
    def name(self) -> str:
        return self.reduce_op


def copy_u(u: str, out: str) -> CopyMessageFunction:
    """Message = the source node's field ``u``, stored as ``out``."""
    return CopyMessageFunction("u", _check_field(u, "u", "copy_u"), _check_field(out, "out", "copy_u"))


def copy_e(e: str, out: str) -> CopyMessageFunction:
    """Message = the edge's field ``e``, stored as ``out``."""
    return CopyMessageFunction("e", _check_field(e, "e", "copy_e"), _check_field(out, "out", "copy_e"))


def _binary(lhs: str, op: str, rhs: str):
    function_name = f"{lhs}_{op}_{rhs}"

    def make(lhs_field: str, rhs_field: str, out: str) -> BinaryMessageFunction:
        return BinaryMessageFunction(
            op,
            lhs,
            rhs,
            _check_field(lhs_field, "lhs_field", function_name),
            _check_field(rhs_field, "rhs_field", function_name),
            _check_field(out, "out", function_name),
        )

    make.__name__ = make.__qualname__ = function_name
    make.__doc__ = f"Message = ``{lhs}.lhs_field {op} {rhs}.rhs_field``, stored as ``out``."
    return make


u_add_v = _binary("u", "add", "v")
u_sub_v = _binary("u", "sub", "v")
u_mul_v = _binary("u", "mul", "v")
u_div_v = _binary("u", "div", "v")
u_dot_v = _binary("u", "dot", "v")
u_add_e = _binary("u", "add", "e")
u_sub_e = _binary("u", "sub", "e")
u_mul_e = _binary("u", "mul", "e")
u_div_e = _binary("u", "div", "e")
u_dot_e = _binary("u", "dot", "e")
v_add_u = _binary("v", "add", "u")
v_sub_u = _binary("v", "sub", "u")
v_mul_u = _binary("v", "mul", "u")
v_div_u = _binary("v", "div", "u")
v_dot_u = _binary("v", "dot", "u")
v_add_e = _binary("v", "add", "e")
v_sub_e = _binary("v", "sub", "e")
v_mul_e = _binary("v", "mul", "e")
v_div_e = _binary("v", "div", "e")
v_dot_e = _binary("v", "dot", "e")
e_add_u = _binary("e", "add", "u")
e_sub_u = _binary("e", "sub", "u")
e_mul_u = _binary("e", "mul", "u")
e_div_u = _binary("e", "div", "u")
e_dot_u = _binary("e", "dot", "u")
e_add_v = _binary("e", "add", "v")
e_sub_v = _binary("e", "sub", "v")
e_mul_v = _binary("e", "mul", "v")
e_div_v = _binary("e", "div", "v")
e_dot_v = _binary("e", "dot", "v")


def _reducer(op: str):
    def make(msg: str, out: str) -> ReduceFunction:
        return ReduceFunction(op, _check_field(msg, "msg", op), _check_field(out, "out", op))

    make.__name__ = make.__qualname__ = op
    make.__doc__ = f"Each destination node's ``out`` = the {op} of its incoming messages ``msg``."
    return make


# The reducers are named after Python built-ins, as in DGL; the module keeps the originals reachable.
sum = _reducer("sum")  # noqa: A001
mean = _reducer("mean")
max = _reducer("max")  # noqa: A001
min = _reducer("min")  # noqa: A001

BINARY_MESSAGE_NAMES = tuple(
    f"{lhs}_{op}_{rhs}" for lhs in TARGETS for rhs in TARGETS if lhs != rhs for op in BINARY_OPS
)

__all__ = [
    "BINARY_MESSAGE_NAMES",
    "BINARY_OPS",
    "REDUCE_OPS",
    "TARGETS",
    "BinaryMessageFunction",
    "BuiltinFunction",
    "CopyMessageFunction",
    "MessageFunction",
    "ReduceFunction",
    "copy_e",
    "copy_u",
    "e_add_u",
    "e_add_v",
    "e_div_u",
    "e_div_v",
    "e_dot_u",
    "e_dot_v",
    "e_mul_u",
    "e_mul_v",
    "e_sub_u",
    "e_sub_v",
    "max",
    "mean",
    "min",
    "sum",
    "u_add_e",
    "u_add_v",
    "u_div_e",
    "u_div_v",
    "u_dot_e",
    "u_dot_v",
    "u_mul_e",
    "u_mul_v",
    "u_sub_e",
    "u_sub_v",
    "v_add_e",
    "v_add_u",
    "v_div_e",
    "v_div_u",
    "v_dot_e",
    "v_dot_u",
    "v_mul_e",
    "v_mul_u",
    "v_sub_e",
    "v_sub_u",
]
