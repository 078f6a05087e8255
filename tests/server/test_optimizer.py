"""Tests of the server-side sparse optimizer math (graphstore.server.optimizer)."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import torch

from graphstore.server.optimizer import STATE_NAMES, SparseOptimizerState
from graphstore.types import OptimizerConfig


def _naive_step(kind, weights, state, ids, grads, cfg):
    """Per-row, per-element Python reference of one step (float64 accumulation, then float32)."""
    for i, row in enumerate(ids):
        g = grads[i].astype(np.float64)
        if kind == "adagrad":
            state["adagrad_sum"][row] += (g * g).astype(np.float32)
            denom = np.sqrt(state["adagrad_sum"][row].astype(np.float64) + cfg.eps)
            weights[row] -= (cfg.lr * g / denom).astype(np.float32)
        elif kind == "rowwise_adagrad":
            state["rowwise_adagrad_sum"][row] += np.float32(np.mean(g * g))
            denom = math.sqrt(float(state["rowwise_adagrad_sum"][row]) + cfg.eps)
            weights[row] -= (cfg.lr * g / denom).astype(np.float32)
        else:
            state["adam_step"][row] += 1
            t = int(state["adam_step"][row])
            state["adam_m"][row] = cfg.beta1 * state["adam_m"][row] + (1 - cfg.beta1) * g
            state["adam_v"][row] = cfg.beta2 * state["adam_v"][row] + (1 - cfg.beta2) * g * g
            m_hat = state["adam_m"][row].astype(np.float64) / (1 - cfg.beta1**t)
            v_hat = state["adam_v"][row].astype(np.float64) / (1 - cfg.beta2**t)
            weights[row] -= (cfg.lr * m_hat / (np.sqrt(v_hat) + cfg.eps)).astype(np.float32)


def _zero_state(kind, n, dim):
    if kind == "adagrad":
        return {"adagrad_sum": np.zeros((n, dim), np.float32)}
    if kind == "rowwise_adagrad":
        return {"rowwise_adagrad_sum": np.zeros(n, np.float32)}
    return {
        "adam_step": np.zeros(n, np.int64),
        "adam_m": np.zeros((n, dim), np.float32),
        "adam_v": np.zeros((n, dim), np.float32),
    }


@pytest.mark.parametrize("kind", ["adagrad", "rowwise_adagrad", "adam"])
def test_sparse_steps_match_naive_reference(kind):
    rng = np.random.default_rng(7)
    n, dim = 50, 6
    cfg = OptimizerConfig(kind=kind, lr=0.05, eps=1e-8)
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    ref_rows = rows.copy()
    ref_state = _zero_state(kind, n, dim)
    opt = SparseOptimizerState()
    for _ in range(12):
        ids = rng.choice(n, size=rng.integers(1, 20), replace=False).astype(np.int64)
        grads = rng.standard_normal((ids.size, dim)).astype(np.float32)
        opt.apply("emb", rows, ids, grads, cfg)
        _naive_step(kind, ref_rows, ref_state, ids, grads, cfg)
    np.testing.assert_allclose(rows, ref_rows, rtol=1e-5, atol=1e-5)
    got = opt.state_arrays("emb")
    assert set(got) == set(STATE_NAMES[kind]) == set(ref_state)
    for key in got:
        np.testing.assert_allclose(got[key], ref_state[key], rtol=1e-5, atol=1e-6)
    assert opt.kind("emb") == kind


def test_adam_with_every_row_each_step_matches_torch_adam():
    rng = np.random.default_rng(3)
    n, dim = 8, 5
    weight = torch.tensor(rng.standard_normal((n, dim)), dtype=torch.float32, requires_grad=True)
    torch_opt = torch.optim.Adam([weight], lr=0.01, betas=(0.8, 0.99), eps=1e-8)
    rows = weight.detach().numpy().copy()
    opt = SparseOptimizerState()
    cfg = OptimizerConfig(kind="adam", lr=0.01, eps=1e-8, beta1=0.8, beta2=0.99)
    ids = np.arange(n, dtype=np.int64)
    for _ in range(6):
        g = rng.standard_normal((n, dim)).astype(np.float32)
        weight.grad = torch.from_numpy(g.copy())
        torch_opt.step()
        opt.apply("e", rows, ids, g, cfg)
    np.testing.assert_allclose(rows, weight.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_adagrad_with_every_row_each_step_matches_torch_adagrad():
    rng = np.random.default_rng(4)
    n, dim = 6, 4
    weight = torch.tensor(rng.standard_normal((n, dim)), dtype=torch.float32, requires_grad=True)
    # torch adds eps outside the square root; eps=0 makes the two definitions identical.
    torch_opt = torch.optim.Adagrad([weight], lr=0.1, eps=0.0)
    rows = weight.detach().numpy().copy()
    opt = SparseOptimizerState()
    cfg = OptimizerConfig(kind="adagrad", lr=0.1, eps=0.0)
    for _ in range(5):
        g = rng.standard_normal((n, dim)).astype(np.float32)
        weight.grad = torch.from_numpy(g.copy())
        torch_opt.step()
        opt.apply("e", rows, np.arange(n, dtype=np.int64), g, cfg)
    np.testing.assert_allclose(rows, weight.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_adam_bias_correction_is_per_row():
    """A row first seen at step 5 gets the step-1 correction (its first update has size ~lr)."""
    opt = SparseOptimizerState()
    cfg = OptimizerConfig(kind="adam", lr=0.1, eps=1e-8)
    rows = np.zeros((4, 3), np.float32)
    for _ in range(4):
        opt.apply("e", rows, np.array([0]), np.ones((1, 3), np.float32), cfg)
    opt.apply("e", rows, np.array([0, 1]), np.ones((2, 3), np.float32), cfg)
    steps = opt.state_arrays("e")["adam_step"]
    np.testing.assert_array_equal(steps, [5, 1, 0, 0])
    # First Adam step on a constant gradient moves each element by exactly lr.
    np.testing.assert_allclose(rows[1], -0.1, rtol=1e-5)
    np.testing.assert_array_equal(rows[2:], 0.0)


def test_rowwise_state_is_one_value_per_row():
    opt = SparseOptimizerState()
    rows = np.zeros((10, 16), np.float32)
    grads = np.full((2, 16), 2.0, np.float32)
    opt.apply("e", rows, np.array([3, 7]), grads, OptimizerConfig(kind="rowwise_adagrad", lr=1.0))
    acc = opt.state_arrays("e")["rowwise_adagrad_sum"]
    assert acc.shape == (10,)
    np.testing.assert_allclose(acc[[3, 7]], 4.0)
    np.testing.assert_allclose(rows[3], -1.0, rtol=1e-6)


def _fresh(kind="adagrad"):
    opt = SparseOptimizerState()
    rows = np.ones((5, 3), np.float32)
    opt.apply("e", rows, np.array([0]), np.ones((1, 3), np.float32), OptimizerConfig(kind=kind, lr=0.1))
    return opt, rows


@pytest.mark.parametrize(
    "ids, grads, cfg, match",
    [
        (np.array([1]), np.ones((1, 3), np.float32), OptimizerConfig(kind="adam", lr=0.1), "'adagrad'"),
        (np.array([1]), np.ones((1, 4), np.float32), OptimizerConfig(kind="adagrad", lr=0.1), "shape"),
        (np.array([1, 2]), np.ones((1, 3), np.float32), OptimizerConfig(kind="adagrad", lr=0.1), "shape"),
        (np.array([1]), np.ones((1, 3), np.float64), OptimizerConfig(kind="adagrad", lr=0.1), "float32"),
        (np.array([5]), np.ones((1, 3), np.float32), OptimizerConfig(kind="adagrad", lr=0.1), "5"),
        (np.array([-1]), np.ones((1, 3), np.float32), OptimizerConfig(kind="adagrad", lr=0.1), "-1"),
        (np.array([2, 2]), np.ones((2, 3), np.float32), OptimizerConfig(kind="adagrad", lr=0.1), "unique"),
        (np.array([1.0]), np.ones((1, 3), np.float32), OptimizerConfig(kind="adagrad", lr=0.1), "integer"),
        (
            np.array([1, 2]),
            np.array([[1, 1, 1], [1, np.inf, 1]], np.float32),
            OptimizerConfig(kind="adagrad", lr=0.1),
            "NaN or inf",
        ),
    ],
)
def test_bad_input_raises_and_changes_nothing(ids, grads, cfg, match):
    opt, rows = _fresh("adagrad")
    before_rows = rows.copy()
    before_state = {k: v.copy() for k, v in opt.state_arrays("e").items()}
    with pytest.raises(ValueError, match=match):
        opt.apply("e", rows, ids, grads, cfg)
    np.testing.assert_array_equal(rows, before_rows)
    after = opt.state_arrays("e")
    assert opt.kind("e") == "adagrad"
    for key, value in before_state.items():
        np.testing.assert_array_equal(after[key], value)


def test_rows_must_be_writable_2d_float32():
    opt = SparseOptimizerState()
    cfg = OptimizerConfig(kind="adagrad", lr=0.1)
    with pytest.raises(ValueError, match="float32"):
        opt.apply("e", np.ones((3, 2), np.float16), np.array([0]), np.ones((1, 2), np.float32), cfg)
    with pytest.raises(ValueError, match="2-D"):
        opt.apply("e", np.ones(3, np.float32), np.array([0]), np.ones((1, 1), np.float32), cfg)
    ro = np.ones((3, 2), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        opt.apply("e", ro, np.array([0]), np.ones((1, 2), np.float32), cfg)
    assert opt.kind("e") is None


def test_empty_update_allocates_nothing():
    opt = SparseOptimizerState()
    rows = np.ones((3, 2), np.float32)
    opt.apply("e", rows, np.zeros(0, np.int64), np.zeros((0, 2), np.float32), OptimizerConfig("adam", 0.1))
    assert opt.kind("e") is None and opt.state_arrays("e") == {}
    np.testing.assert_array_equal(rows, 1.0)


@pytest.mark.parametrize("kind", ["adagrad", "rowwise_adagrad", "adam"])
def test_state_round_trips_through_load(kind):
    rng = np.random.default_rng(11)
    cfg = OptimizerConfig(kind=kind, lr=0.1)
    rows_a = rng.standard_normal((20, 4)).astype(np.float32)
    a = SparseOptimizerState()
    for _ in range(3):
        ids = rng.choice(20, 8, replace=False)
        a.apply("e", rows_a, ids, rng.standard_normal((8, 4)).astype(np.float32), cfg)
    saved = {k: v.copy() for k, v in a.state_arrays("e").items()}
    rows_b = rows_a.copy()
    b = SparseOptimizerState()
    b.load_state_arrays("e", saved, None)  # kind inferred from the array names
    assert b.kind("e") == kind
    ids = np.array([0, 5, 19])
    grads = rng.standard_normal((3, 4)).astype(np.float32)
    a.apply("e", rows_a, ids, grads, cfg)
    b.apply("e", rows_b, ids, grads, cfg)
    np.testing.assert_array_equal(rows_a, rows_b)
    for key, value in a.state_arrays("e").items():
        np.testing.assert_array_equal(b.state_arrays("e")[key], value)


def _step_row_zero_of_four(opt: SparseOptimizerState, kind: str) -> None:
    """One ``kind`` step of row 0 of a 4 x 2 tensor ``e``."""
    opt.apply(
        "e",
        np.zeros((4, 2), np.float32),
        np.array([0]),
        np.ones((1, 2), np.float32),
        OptimizerConfig(kind, 0.1),
    )


def test_load_state_rejects_mismatches_and_drop_forgets():
    opt = SparseOptimizerState()
    with pytest.raises(ValueError, match="match no optimizer"):
        opt.load_state_arrays("e", {"foo": np.zeros(3)}, None)
    with pytest.raises(ValueError, match="needs arrays"):
        opt.load_state_arrays("e", {"adagrad_sum": np.zeros((3, 2))}, "adam")
    with pytest.raises(ValueError, match="unknown optimizer kind"):
        opt.load_state_arrays("e", {"adagrad_sum": np.zeros((3, 2))}, "sgd")
    with pytest.raises(ValueError, match="row counts"):
        opt.load_state_arrays(
            "e", {"adam_step": np.zeros(3), "adam_m": np.zeros((4, 2)), "adam_v": np.zeros((3, 2))}, "adam"
        )
    with pytest.raises(ValueError, match="shape"):
        opt.load_state_arrays("e", {"rowwise_adagrad_sum": np.zeros((3, 2))}, "rowwise_adagrad")
    assert opt.names() == []
    opt.load_state_arrays("e", {"rowwise_adagrad_sum": np.zeros(3)}, "rowwise_adagrad")
    # A state that no longer fits the tensor (recreated with another shape) is refused.
    with pytest.raises(ValueError, match="rows"):
        _step_row_zero_of_four(opt, "rowwise_adagrad")
    opt.drop("e")
    opt.drop("e")
    assert opt.kind("e") is None
    _step_row_zero_of_four(opt, "adam")
    assert opt.kind("e") == "adam"


def test_concurrent_tensors_get_independent_state():
    opt = SparseOptimizerState()
    cfg = OptimizerConfig(kind="adagrad", lr=0.1)
    tensors = {f"t{i}": np.zeros((100, 4), np.float32) for i in range(8)}

    def work(name):
        for _ in range(20):
            opt.apply(name, tensors[name], np.arange(100), np.ones((100, 4), np.float32), cfg)

    threads = [threading.Thread(target=work, args=(n,)) for n in tensors]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert opt.names() == sorted(tensors)
    for name in tensors:
        np.testing.assert_allclose(opt.state_arrays(name)["adagrad_sum"], 20.0)
        np.testing.assert_allclose(tensors[name][0], tensors["t0"][0])
