"""The fanout rule and the seed derivation every sampler shares (graphstore.sampling_rules), and the
samplers that call them: each accepts and refuses the same fanouts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphstore.client.device_graph import kernels
from graphstore.client.per_type import etype_fanouts
from graphstore.client.samplers import NeighborSampler
from graphstore.sampling_rules import (
    MAX_FANOUT,
    batch_layer_seeds,
    check_fanout,
    check_layer_fanout,
    partition_seed,
    per_etype_fanouts,
)
from graphstore.server import sampler as server_sampler
from graphstore.types import GraphSchema

ACCEPTED = [0, 1, 25, -1, np.int64(10), np.int32(-1), np.uint8(3), MAX_FANOUT]
REFUSED = [True, False, np.bool_(True), -2, -100, 2**31, np.int64(2**40), 2.0, "5", None]
SCHEMA = GraphSchema(("a", "b"), (("a", "ab", "b"), ("b", "ba", "a")))


@pytest.mark.parametrize("value", ACCEPTED)
def test_accepted_fanouts_come_back_as_python_ints(value):
    out = check_fanout(value)
    assert type(out) is int and out == int(value)


@pytest.mark.parametrize("value", REFUSED)
def test_refused_fanouts_name_the_value(value):
    with pytest.raises(
        ValueError, match=r"fanout must be -1 \(all neighbors\) or an integer in \[0, 2\*\*31\)"
    ):
        check_fanout(value)


def test_a_layer_is_an_int_or_a_dict_of_them_per_edge_type():
    assert check_layer_fanout(np.int64(4)) == 4
    assert check_layer_fanout({"ab": np.int16(3), ("b", "ba", "a"): -1}) == {"ab": 3, ("b", "ba", "a"): -1}
    with pytest.raises(ValueError, match=r"fanouts\[1\]\['ba'\] must be -1"):
        check_layer_fanout({"ab": 2, "ba": True}, "fanouts[1]")
    with pytest.raises(ValueError, match="names no edge type"):
        check_layer_fanout({})


def test_per_edge_type_fanouts_from_one_int_or_one_per_type():
    assert per_etype_fanouts(np.int64(5), 3) == [5, 5, 5]
    assert per_etype_fanouts([0, -1, np.int32(7)], 3) == [0, -1, 7]
    with pytest.raises(ValueError, match="2 values given for 3 edge types"):
        per_etype_fanouts([1, 2], 3)
    with pytest.raises(ValueError, match="got True"):
        per_etype_fanouts(True, 2)
    with pytest.raises(ValueError, match="got -3"):
        per_etype_fanouts([1, -3], 2)


def _callers(value):
    """Every sampler that takes a fanout, called with ``value`` (each raises ValueError or returns)."""
    indptr = np.array([0, 2, 3], dtype=np.int64)
    seeds = np.array([0, 1], dtype=np.int64)
    return {
        "client NeighborSampler": lambda: NeighborSampler([value, 2]),
        "client NeighborSampler per type": lambda: NeighborSampler([{"ab": value, "ba": 1}]),
        "client per-type fanouts": lambda: etype_fanouts(SCHEMA, {"ab": value, "ba": 0}),
        "device kernel": lambda: kernels.sample_uniform(
            torch.from_numpy(indptr), torch.from_numpy(seeds), value
        ),
        "server kernel": lambda: server_sampler.sample_uniform(
            indptr, seeds, value, False, np.random.default_rng(0)
        ),
        "server per-type fanouts": lambda: per_etype_fanouts([value, 1], 2),
    }


@pytest.mark.parametrize("value", [-1, 0, 3, np.int64(2), np.int32(-1)])
def test_every_sampler_accepts_the_same_fanouts(value):
    for call in _callers(value).values():
        call()


@pytest.mark.parametrize("value", [True, -2, 2**31, 1.5])
def test_every_sampler_refuses_the_same_fanouts(value):
    for name, call in _callers(value).items():
        with pytest.raises(ValueError, match="must be -1"):
            call()
            pytest.fail(f"{name} accepted fanout {value!r}")


def test_batch_seeds_follow_the_seed_and_the_batch_only():
    ids = torch.tensor([5, 2, 9])
    seeds = batch_layer_seeds(7, ids, 3)
    assert len(seeds) == 3 and len(set(seeds)) == 3 and all(0 <= s < 2**63 for s in seeds)
    # the same batch as a tensor, an array or a list: the same seeds; another batch or seed: others
    assert batch_layer_seeds(7, ids.numpy(), 3) == seeds == batch_layer_seeds(7, [5, 2, 9], 3)
    assert batch_layer_seeds(7, torch.tensor([5, 2, 8]), 3) != seeds
    assert batch_layer_seeds(8, ids, 3) != seeds
    assert batch_layer_seeds(None, ids, 2) == [None, None]
    typed = batch_layer_seeds(7, {"a": ids, "b": torch.tensor([1])}, 2)
    assert typed == batch_layer_seeds(7, {"a": ids.numpy(), "b": np.array([1])}, 2)
    assert typed != batch_layer_seeds(7, {"b": ids, "a": torch.tensor([1])}, 2)  # the type is part of the key


def test_partition_seeds_differ_per_partition_and_stay_in_range():
    assert partition_seed(None, 3) is None
    assert partition_seed(11, 0) != partition_seed(11, 1)
    assert partition_seed(11, 1) == partition_seed(np.int64(11), 1)
    assert 0 <= partition_seed(2**70, 5) < 2**63
