"""``graphstore.function``: the built-ins describe what to compute, with DGL's names and arguments."""

from __future__ import annotations

import pytest

import graphstore.function as fn


def test_every_binary_builtin_of_dgl_exists_with_its_operands():
    assert len(fn.BINARY_MESSAGE_NAMES) == 30  # 6 ordered pairs of distinct targets x 5 operators
    for name in fn.BINARY_MESSAGE_NAMES:
        lhs, op, rhs = name.split("_")
        built = getattr(fn, name)("a", "b", "c")
        assert isinstance(built, fn.BinaryMessageFunction) and built.name == name
        assert (built.binary_op, built.lhs, built.rhs) == (op, lhs, rhs)
        assert (built.lhs_field, built.rhs_field, built.out_field) == ("a", "b", "c")
        assert name in fn.__all__


def test_copy_and_reduce_builtins():
    assert fn.copy_u("h", "m") == fn.CopyMessageFunction("u", "h", "m")
    assert fn.copy_e("w", "m").name == "copy_e"
    for op in fn.REDUCE_OPS:
        reducer = getattr(fn, op)("m", "h")
        assert isinstance(reducer, fn.ReduceFunction) and reducer.name == op
        assert (reducer.msg_field, reducer.out_field) == ("m", "h")


def test_a_field_must_be_a_name():
    with pytest.raises(TypeError, match="u_dot_v\\(\\): rhs_field"):
        fn.u_dot_v("h", None, "score")
    with pytest.raises(TypeError, match="copy_u\\(\\): out"):
        fn.copy_u("h", "")
    with pytest.raises(TypeError, match="mean\\(\\): msg"):
        fn.mean(3, "h")
