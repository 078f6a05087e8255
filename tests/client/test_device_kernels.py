"""The device sampling and relabeling kernels (torch), run on the CPU: the same counts per seed as the
servers' numpy sampler, distinct in-row picks, uniform and weight-proportional draws, exclusion, the
relabeling order of ``compact_ids``, and the device ID space against the partition book's."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from graphstore.client.device_graph import kernels
from graphstore.client.device_graph.id_space import DeviceIdSpace
from graphstore.client.local_ids import compact_ids
from graphstore.partition.book import RangePartitionBook
from graphstore.server import sampler as numpy_sampler
from graphstore.types import GraphSchema
from tests.utils.sampling import expected_sample_counts


def random_csr(num_rows: int, max_degree: int, seed: int = 0) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    degrees = rng.integers(0, max_degree + 1, num_rows)
    degrees[:3] = (0, 1, max_degree)
    indptr = np.concatenate(([0], np.cumsum(degrees)))
    return torch.from_numpy(indptr)


def generator(seed: int = 0) -> torch.Generator:
    g = torch.Generator()
    g.manual_seed(seed)
    return g


@pytest.mark.parametrize("fanout", [-1, 0, 1, 3, 7, 30])
@pytest.mark.parametrize("replace", [False, True])
def test_uniform_counts_positions_and_layout_follow_the_servers_rules(fanout, replace):
    indptr = random_csr(400, 20)
    rows = torch.from_numpy(np.random.default_rng(1).integers(0, 400, 900))  # repeats sampled each time
    positions, seed_index = kernels.sample_uniform(indptr, rows, fanout, replace, generator())
    degrees = (indptr[rows + 1] - indptr[rows]).numpy()
    counts = np.bincount(seed_index.numpy(), minlength=rows.numel())
    np.testing.assert_array_equal(counts, expected_sample_counts(degrees, fanout, replace))
    # the numpy sampler of the servers gives the same counts
    _, server_index = numpy_sampler.sample_uniform(
        indptr.numpy(), rows.numpy(), fanout, replace, np.random.default_rng(0)
    )
    np.testing.assert_array_equal(counts, np.bincount(server_index, minlength=rows.numel()))
    assert torch.all(seed_index[1:] >= seed_index[:-1])  # seeds in order, each seed's edges together
    starts, ends = indptr[rows][seed_index], indptr[rows + 1][seed_index]
    assert torch.all((positions >= starts) & (positions < ends))
    if not replace:
        keys = seed_index * (1 << 32) + positions
        assert torch.unique(keys).numel() == keys.numel()  # distinct edges per seed


def test_uniform_without_replacement_draws_every_subset_equally_often():
    indptr = torch.tensor([0, 5])
    rows = torch.zeros(60000, dtype=torch.int64)
    positions, seed_index = kernels.sample_uniform(indptr, rows, 2, False, generator(3))
    pairs = positions.reshape(-1, 2).sort(dim=1).values.numpy()
    counts = {pair: 0 for pair in itertools.combinations(range(5), 2)}
    for a, b in pairs:
        counts[(int(a), int(b))] += 1
    frequencies = np.array(list(counts.values())) / pairs.shape[0]
    np.testing.assert_allclose(frequencies, 0.1, atol=0.01)


def test_floyd_picks_are_distinct_and_in_range():
    high = torch.tensor([3, 10, 1000, 2**40])
    picks = kernels.floyd_distinct(high, 3, generator(2))
    assert picks.shape == (4, 3)
    for row, bound in zip(picks, high, strict=True):
        assert row.unique().numel() == 3 and bool((row >= 0).all() and (row < bound).all())


def test_weighted_draws_are_proportional_and_never_zero_weight():
    indptr = torch.tensor([0, 4, 6])
    weights = torch.tensor([1.0, 0.0, 3.0, 6.0, 0.0, 0.0])
    rows = torch.zeros(40000, dtype=torch.int64)
    positions, _ = kernels.sample_weighted(indptr, weights, rows, 1, True, generator(4))
    frequencies = np.bincount(positions.numpy(), minlength=4) / rows.numel()
    np.testing.assert_allclose(frequencies, [0.1, 0.0, 0.3, 0.6], atol=0.01)
    # without replacement: min(fanout, positive edges) distinct edges; a row of zero weights gets none
    positions, seed_index = kernels.sample_weighted(
        indptr, weights, torch.tensor([0, 1, 0]), 2, False, generator(5)
    )
    assert np.bincount(seed_index.numpy(), minlength=3).tolist() == [2, 0, 2]
    assert set(positions.tolist()) <= {0, 2, 3}
    first = positions[seed_index == 0]
    assert first.unique().numel() == 2
    # heavier edges are kept more often
    positions, _ = kernels.sample_weighted(indptr, weights, rows, 1, False, generator(6))
    frequencies = np.bincount(positions.numpy(), minlength=4) / rows.numel()
    np.testing.assert_allclose(frequencies, [0.1, 0.0, 0.3, 0.6], atol=0.01)
    with pytest.raises(ValueError, match="prob: edge weights must be finite and non-negative"):
        kernels.sample_weighted(indptr, torch.tensor([1.0, -1.0, 1, 1, 1, 1]), rows[:1], 1)


def test_excluded_positions_are_never_drawn_and_their_rows_still_get_their_fanout():
    indptr = random_csr(200, 12, seed=7)
    rows = torch.arange(200)
    excluded = torch.from_numpy(np.random.default_rng(8).choice(int(indptr[-1]), 300, replace=False))
    positions, seed_index = kernels.sample_rows_avoiding(indptr, rows, 4, excluded, generator=generator(9))
    assert not torch.isin(positions, excluded).any()
    owner = torch.searchsorted(indptr, excluded, right=True) - 1
    remaining = (indptr[1:] - indptr[:-1]) - torch.bincount(owner, minlength=200)
    counts = torch.bincount(seed_index, minlength=200)
    assert torch.equal(counts, torch.minimum(remaining, torch.tensor(4)))
    starts, ends = indptr[rows][seed_index], indptr[rows + 1][seed_index]
    assert torch.all((positions >= starts) & (positions < ends))


def test_relabeling_equals_compact_ids():
    rng = np.random.default_rng(10)
    heads = rng.choice(5000, 300, replace=False)
    others = rng.integers(0, 5000, 4000)
    unique_ids, local = kernels.relabel_with_heads(torch.from_numpy(heads), torch.from_numpy(others))
    expected_unique, (expected_local,) = compact_ids(heads, [others], 5000)
    np.testing.assert_array_equal(unique_ids.numpy(), expected_unique)
    np.testing.assert_array_equal(local.numpy(), expected_local)
    with pytest.raises(ValueError, match="dst_nodes must be unique; 1 duplicates"):
        kernels.relabel_with_heads(torch.tensor([3, 4, 3]), torch.tensor([5]), check_heads=True)


def test_device_id_space_matches_the_book():
    schema = GraphSchema(("a", "b", "c"), (("a", "r", "b"), ("b", "s", "c")))
    ntype_counts = np.array([[3, 0, 2], [4, 5, 1], [0, 2, 6]])
    bounds = np.concatenate(([0], np.cumsum(ntype_counts.sum(axis=1))))
    etype_counts = np.array([[2, 1], [0, 3], [4, 0]])
    edge_bounds = np.concatenate(([0], np.cumsum(etype_counts.sum(axis=1))))
    book = RangePartitionBook(
        bounds, edge_bounds, schema=schema, ntype_counts=ntype_counts, etype_counts=etype_counts
    )
    space = DeviceIdSpace(book.node_ranges, torch.device("cpu"))
    homo = torch.arange(book.num_nodes())
    types, per_type = space.to_per_type(homo)
    want_types, want_per_type = book.map_to_per_ntype(homo.numpy())
    np.testing.assert_array_equal(types.numpy(), want_types)
    np.testing.assert_array_equal(per_type.numpy(), want_per_type)
    for type_id, ntype in enumerate(schema.ntypes):
        ids = torch.arange(book.num_nodes(ntype))
        np.testing.assert_array_equal(
            space.to_homo(ids, type_id).numpy(), book.map_to_homo_nid(ids.numpy(), ntype)
        )
