"""The vectorized sampling functions on random CSR arrays: fanout rules, weights, reproducibility."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphstore.server import sampler
from tests.utils.sampling import expected_sample_counts


def _csr(rng, n: int, max_deg: int):
    deg = rng.integers(0, max_deg + 1, n)
    return np.concatenate([[0], np.cumsum(deg)]).astype(np.int64), deg


def test_expand_ranges_and_segment_index():
    np.testing.assert_array_equal(
        sampler.expand_ranges(np.array([5, 0, 9]), np.array([2, 0, 3])), [5, 6, 9, 10, 11]
    )
    np.testing.assert_array_equal(sampler.segment_index(np.array([2, 0, 3])), [0, 0, 2, 2, 2])
    assert sampler.expand_ranges(np.array([], np.int64), np.array([], np.int64)).size == 0


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    fanout=st.sampled_from([-1, 0, 1, 3, 10, 60]),
    replace=st.booleans(),
    weighted=st.booleans(),
    excluding=st.booleans(),
)
def test_fanout_rules_hold(seed, fanout, replace, weighted, excluding):
    rng = np.random.default_rng(seed)
    indptr, deg = _csr(rng, 50, 80)
    seeds = rng.integers(0, 50, 30)
    weights = None
    if weighted:
        weights = rng.random(indptr[-1]) * (rng.random(indptr[-1]) < 0.6)
    # Excluded positions (none unless ``excluding``): never drawn, the seeds sample among the rest.
    drawable = np.ones(indptr[-1], dtype=bool)
    if excluding:
        drawable = rng.random(indptr[-1]) > 0.3
        row_of = np.repeat(np.arange(50), deg)
        affected = np.isin(seeds, row_of[~drawable])
        positions, seed_index = sampler.sample_neighbors_avoiding(
            indptr,
            seeds,
            fanout,
            affected,
            lambda candidates: ~drawable[candidates],
            replace=replace,
            weights=weights,
            rng=np.random.default_rng(seed),
        )
        assert drawable[positions].all()
    else:
        positions, seed_index = sampler.sample_neighbors_csr(
            indptr, seeds, fanout, replace=replace, weights=weights, rng=np.random.default_rng(seed)
        )
    # Every sampled position lies inside its own seed's CSR segment.
    assert ((positions >= indptr[seeds][seed_index]) & (positions < indptr[seeds + 1][seed_index])).all()
    usable = drawable if weights is None else drawable & (weights > 0)
    avail = np.add.reduceat(np.append(usable, False).astype(np.int64), indptr[:-1])[seeds]
    avail = np.where(deg[seeds] > 0, avail, 0)
    if weighted:
        assert (weights[positions] > 0).all()
    counts = np.bincount(seed_index, minlength=len(seeds))
    np.testing.assert_array_equal(counts, expected_sample_counts(avail, fanout, replace))
    if not replace:
        keys = seed_index * (indptr[-1] + 1) + positions
        assert len(np.unique(keys)) == len(keys)  # distinct edges per seed
    if not excluding:
        again = sampler.sample_neighbors_csr(
            indptr, seeds, fanout, replace=replace, weights=weights, rng=np.random.default_rng(seed)
        )
        np.testing.assert_array_equal(positions, again[0])


@pytest.mark.parametrize("fanout", [3, 100])  # Floyd and the random-key sort
def test_uniform_without_replacement_is_uniform(fanout):
    indptr = np.array([0, 200], np.int64)
    num_seeds = 60_000 // fanout  # 300 draws per edge on average
    positions, _ = sampler.sample_uniform(
        indptr, np.zeros(num_seeds, np.int64), fanout, False, np.random.default_rng(0)
    )
    freq = np.bincount(positions, minlength=200) / (num_seeds * fanout / 200)
    assert abs(freq.mean() - 1) < 1e-9 and freq.min() > 0.75 and freq.max() < 1.25


def test_weighted_draws_follow_the_weights():
    indptr = np.array([0, 4], np.int64)
    weights = np.array([0.0, 1.0, 2.0, 5.0])
    positions, _ = sampler.sample_weighted(
        indptr, weights, np.zeros(40_000, np.int64), 1, True, np.random.default_rng(1)
    )
    freq = np.bincount(positions, minlength=4) / 40_000
    np.testing.assert_allclose(freq, weights / weights.sum(), atol=0.01)
    positions, _ = sampler.sample_weighted(
        indptr, weights, np.zeros(20_000, np.int64), 2, False, np.random.default_rng(2)
    )
    assert (positions != 0).all()


def test_invalid_fanout_and_weights_are_refused():
    indptr = np.array([0, 2], np.int64)
    with pytest.raises(ValueError, match="fanout must be -1"):
        sampler.sample_uniform(indptr, np.zeros(1, np.int64), -2, False, np.random.default_rng())
    with pytest.raises(ValueError, match="prob: edge weights must be finite and non-negative, found -1.0"):
        sampler.sample_weighted(
            indptr, np.array([1.0, -1.0]), np.zeros(1, np.int64), 1, False, np.random.default_rng()
        )
    with pytest.raises(ValueError, match="nan"):
        sampler.sample_weighted(
            indptr, np.array([1.0, np.nan]), np.zeros(1, np.int64), 1, False, np.random.default_rng()
        )
