"""The vectorized building blocks: symmetrization, relabeling, bfloat16 rounding, METIS, balance repair."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from graphstore.dtypes import float32_to_bfloat16_bits
from graphstore.partition.assignment import edge_cut_fraction, random_assignment
from graphstore.partition.balance_repair import neighbor_gain, repair_balance
from graphstore.partition.metis import metis_kway
from graphstore.partition.relabel import relabel
from graphstore.partition.symmetric_csr import symmetrize
from tests.utils.graphs import load_cora


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 30), chunk=st.sampled_from([1, 3, 7, 1 << 20]), data=st.data())
def test_symmetrize_is_the_simple_undirected_graph(n, chunk, data):
    edges = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=80))
    src = np.array([e[0] for e in edges], dtype=np.int64)
    dst = np.array([e[1] for e in edges], dtype=np.int64)
    csr = symmetrize(src, dst, n, chunk=chunk)  # streamed in chunks of any size: the same graph
    expected = sorted({(a, b) for a, b in edges if a != b} | {(b, a) for a, b in edges if a != b})
    rows = np.repeat(np.arange(n), np.diff(csr.indptr))
    assert list(zip(rows.tolist(), csr.indices.tolist(), strict=True)) == expected


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 25), parts=st.integers(1, 5), data=st.data())
def test_relabel_contiguous_ranges_and_sorted_in_edges(n, parts, data):
    parts = min(parts, n)
    part = np.array(data.draw(st.lists(st.integers(0, parts - 1), min_size=n, max_size=n)), dtype=np.int64)
    edges = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=60))
    src = np.array([e[0] for e in edges], dtype=np.int64)
    dst = np.array([e[1] for e in edges], dtype=np.int64)
    r = relabel(part, src, dst, parts)
    np.testing.assert_array_equal(np.diff(r.node_bounds), np.bincount(part, minlength=parts))
    # new node i lives in the partition whose range holds i, and keeps its original's partition
    new_part = np.searchsorted(r.node_bounds, np.arange(n), side="right") - 1
    np.testing.assert_array_equal(part[r.orig_nid], new_part)
    # within a partition, nodes keep their original order
    for k in range(parts):
        assert np.all(np.diff(r.orig_nid[r.node_bounds[k] : r.node_bounds[k + 1]]) > 0)
    # new edge j is original edge orig_eid[j] with relabeled endpoints, sorted by destination
    new_of_orig = np.argsort(r.orig_nid)
    np.testing.assert_array_equal(r.new_src, new_of_orig[src[r.orig_eid]])
    np.testing.assert_array_equal(r.new_dst, new_of_orig[dst[r.orig_eid]])
    assert np.all(np.diff(r.new_dst) >= 0)
    # each edge is owned by its destination's partition
    edge_part = np.searchsorted(r.edge_bounds, np.arange(len(edges)), side="right") - 1
    np.testing.assert_array_equal(edge_part, new_part[r.new_dst] if len(edges) else edge_part)
    # out_eid lists the edges by (partition of the source, source)
    assert np.all(np.diff(r.new_src[r.out_eid]) >= 0)
    np.testing.assert_array_equal(np.sort(r.out_eid), np.arange(len(edges)))
    np.testing.assert_array_equal(np.diff(r.out_bounds), np.bincount(part[src], minlength=parts))


def test_bfloat16_bits_match_torch_rounding():
    rng = np.random.default_rng(0)
    special = np.array(
        [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-40, 3.4e38, 1.00390625, 1.01171875, 65504.0],
        dtype=np.float32,
    )
    # ties to even on both sides, and random values over many magnitudes
    ties = np.array([0x3F808000, 0x3F818000, 0x3F80C000], dtype=np.uint32).view(np.float32)
    values = np.concatenate(
        [special, ties, rng.standard_normal(10000).astype(np.float32) * 10.0 ** rng.integers(-30, 30, 10000)]
    )
    bits = float32_to_bfloat16_bits(values)
    expected = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    finite = ~np.isnan(values)
    np.testing.assert_array_equal(bits[finite], expected[finite])
    back = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16).float().numpy()
    assert np.isnan(back[~finite]).all()
    # 2-d input keeps its shape
    assert float32_to_bfloat16_bits(values[:12].reshape(3, 4)).shape == (3, 4)


def test_metis_multi_constraint_and_repair_on_cora():
    graph = load_cora()
    csr = symmetrize(graph["src"], graph["dst"], 2708)
    train = graph["train_mask"].astype(np.int64)
    weights = np.stack([train, 1 - train], axis=1)
    part, _ = metis_kway(csr, 4, weights, seed=0, imbalance=[1.02, 1.03])
    assert part.shape == (2708,) and set(np.unique(part)) == {0, 1, 2, 3}
    fixed = repair_balance(csr, part, weights, 4, tolerance=0.02)
    counts = np.bincount(fixed[train == 1], minlength=4)
    assert counts.max() - counts.min() <= 1
    assert edge_cut_fraction(graph["src"], graph["dst"], fixed) < 0.12


def test_repair_balance_fixes_a_lopsided_assignment():
    graph = load_cora()
    csr = symmetrize(graph["src"], graph["dst"], 2708)
    train = graph["train_mask"].astype(np.int64)[:, None]
    part = np.zeros(2708, dtype=np.int64)
    part[1354:] = 1
    part[np.flatnonzero(train[:, 0])] = 0  # all training nodes in part 0
    fixed = repair_balance(csr, part, train, 2, tolerance=0.02)
    counts = np.bincount(fixed[train[:, 0] == 1], minlength=2)
    assert abs(counts[0] - counts[1]) <= 2
    # only training nodes moved
    assert np.array_equal(fixed[train[:, 0] == 0], part[train[:, 0] == 0])


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 12), data=st.data())
def test_neighbor_gain_counts_neighbors_per_partition_both_ways(n, data):
    """The gain the serial and the MPI repair share: per node, neighbors in the receiving partition
    minus neighbors in the leaving one; the per-node and per-position forms agree."""
    edges = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=40))
    src = np.array([e[0] for e in edges], dtype=np.int64)
    dst = np.array([e[1] for e in edges], dtype=np.int64)
    csr = symmetrize(src, dst, n)
    part = np.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), dtype=np.int64)
    nodes = np.array(sorted(data.draw(st.sets(st.integers(0, n - 1)))), dtype=np.int64)
    expected = [
        sum(int(part[v] == 2) - int(part[v] == 0) for v in csr.indices[csr.indptr[u] : csr.indptr[u + 1]])
        for u in nodes
    ]
    by_node = neighbor_gain(csr.indptr, nodes, part, 0, 2, indices=csr.indices)
    by_position = neighbor_gain(csr.indptr, nodes, part[csr.indices], 0, 2)
    assert by_node.dtype == np.int64 and by_node.tolist() == expected == by_position.tolist()


def test_random_assignment_is_even_and_seeded():
    a = random_assignment(1003, 4, seed=1)
    assert sorted(np.bincount(a).tolist()) == [250, 251, 251, 251]
    np.testing.assert_array_equal(a, random_assignment(1003, 4, seed=1))
    assert not np.array_equal(a, random_assignment(1003, 4, seed=2))


@pytest.mark.parametrize("chunk", [3, 1 << 20])
def test_edge_cut_fraction(chunk):
    src = np.array([0, 1, 2, 3, 0])
    dst = np.array([1, 2, 3, 0, 0])
    part = np.array([0, 0, 1, 1])
    assert edge_cut_fraction(src, dst, part, chunk=chunk) == pytest.approx(2 / 5)


def test_pymetis_fallback_path_balances_too():
    # the path taken when METIS cannot be called through ctypes: pymetis + balance repair
    from graphstore.partition.metis import _pymetis_fallback

    graph = load_cora()
    csr = symmetrize(graph["src"], graph["dst"], 2708)
    train = graph["train_mask"].astype(np.int64)
    part, _ = _pymetis_fallback(csr, 4, np.stack([train, 1 - train], axis=1), seed=0)
    counts = np.bincount(part[train == 1], minlength=4)
    assert counts.max() - counts.min() <= 2
    assert edge_cut_fraction(graph["src"], graph["dst"], part) < 0.15
