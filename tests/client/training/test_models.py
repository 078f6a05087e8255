"""The model factory: the model the config names, with the config's sizes, over sampled blocks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from graphstore.client import NID, GraphSAGE, SampledSubgraph, to_block
from graphstore.client.training import MLP, TrainConfig, build_model, unwrap_model, wrap_model

NUM_NODES = 200


def sampled_blocks(num_seeds: int, fanouts: list[int], seed: int = 0) -> list:
    """Blocks of a random sample around ``num_seeds`` seeds, input layer first."""
    rng = np.random.default_rng(seed)
    dst = rng.choice(NUM_NODES, num_seeds, replace=False)
    blocks = []
    for fanout in reversed(fanouts):
        counts = rng.integers(1, fanout + 1, len(dst))
        edge_dst = np.repeat(dst, counts)
        edge_src = rng.integers(0, NUM_NODES, len(edge_dst))
        block = to_block(SampledSubgraph(edge_src, edge_dst, np.arange(len(edge_dst)), NUM_NODES), dst)
        blocks.insert(0, block)
        dst = block.srcdata[NID].numpy()
    return blocks


def test_sage_is_graphsage_with_the_configured_sizes():
    config = TrainConfig(graph_name="g", fanouts=[3, 4, 5], layers=3, hidden=24, aggregator="gcn")
    model = build_model(config, in_feats=12, n_classes=5)
    assert isinstance(model, GraphSAGE)
    assert len(model.layers) == 3
    assert model.layers[0].fc_neigh.in_features == 12
    assert [layer.fc_neigh.out_features for layer in model.layers] == [24, 24, 5]
    assert all(layer._aggre_type == "gcn" for layer in model.layers)


@pytest.mark.parametrize("model_name", ["sage", "mlp"])
def test_the_output_has_a_row_per_seed_and_a_column_per_class(model_name):
    config = TrainConfig(graph_name="g", model=model_name, fanouts=[3, 4], hidden=16)
    model = build_model(config, in_feats=8, n_classes=6).eval()
    blocks = sampled_blocks(num_seeds=10, fanouts=config.training_fanouts() if model_name == "sage" else [1])
    x = torch.randn(blocks[0].num_src_nodes(), 8)
    assert model(blocks, x).shape == (10, 6)


def test_the_mlp_reads_only_the_seeds_own_features():
    config = TrainConfig(graph_name="g", model="mlp", layers=3, hidden=16)
    model = build_model(config, in_feats=8, n_classes=4).eval()
    assert isinstance(model, MLP)
    assert [layer.out_features for layer in model.layers] == [16, 16, 4]
    blocks = sampled_blocks(num_seeds=5, fanouts=[3])
    x = torch.randn(blocks[0].num_src_nodes(), 8)
    changed = x.clone()
    changed[5:] += 100.0  # every row but the seeds'
    assert torch.equal(model(blocks, x), model(blocks, changed))
    changed[0] += 1.0
    assert not torch.equal(model(blocks, x), model(blocks, changed))


def test_an_unknown_model_is_named():
    config = TrainConfig(graph_name="g", model="gat")
    with pytest.raises(ValueError, match="got 'gat'"):
        build_model(config, in_feats=8, n_classes=4)


def test_an_mlp_without_layers_is_refused():
    with pytest.raises(ValueError, match="layers must be at least 1, got 0"):
        MLP(8, 16, 4, layers=0, dropout=0.0)


def test_without_a_process_group_the_model_is_only_moved_to_its_device():
    model = nn.Linear(3, 2)
    wrapped = wrap_model(model, torch.device("cpu"), distributed=False)
    assert wrapped is model and unwrap_model(wrapped) is model
