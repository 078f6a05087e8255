"""Run config validation: every bad setting is refused with its name and value."""

from __future__ import annotations

import pytest

from graphstore.client.training import EmbeddingConfig, RGCNConfig, TrainConfig


def test_the_defaults_with_a_graph_name_are_valid():
    TrainConfig(graph_name="g").validate()
    EmbeddingConfig(graph_name="g").validate()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"graph_name": ""}, "graph_name is required"),
        ({"fanouts": []}, "fanouts must be a non-empty list"),
        ({"fanouts": [10, -2]}, r"fanouts .* got \[10, -2\]"),
        ({"model": "gat"}, "model must be one of .* got 'gat'"),
        ({"fanouts": [5], "layers": 2}, r"layers \(2\) must equal the number of fanouts \[5\]"),
        ({"eval_fanouts": [5]}, r"eval_fanouts \[5\] must have one entry per layer"),
        ({"amp": "fp8"}, "amp must be one of .* got 'fp8'"),
        ({"eval_mode": "exact"}, "eval_mode must be one of .* got 'exact'"),
        ({"device": "tpu"}, "device must be cpu, cuda, cuda:N or auto, got 'tpu'"),
        ({"feat_norm": "l2"}, "feat_norm must be none or row, got 'l2'"),
        ({"progress": "yes"}, "progress must be auto, on or off, got 'yes'"),
        ({"batch_size": 0}, "batch_size must be at least 1, got 0"),
        ({"epochs": 0}, "epochs must be at least 1, got 0"),
        ({"num_workers": 0}, "num_workers must be at least 1, got 0"),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\), got 1.0"),
        ({"lr": 0.0}, "lr must be positive, got 0.0"),
        ({"eval_every": -1}, "eval_every and prefetch must be >= 0, got -1, 2"),
        ({"prefetch": -1}, "eval_every and prefetch must be >= 0, got 1, -1"),
    ],
)
def test_an_invalid_setting_is_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(**{"graph_name": "g", **overrides}).validate()


def test_the_mlp_needs_no_fanout_per_layer():
    TrainConfig(graph_name="g", model="mlp", layers=3, fanouts=[10, 25]).validate()


@pytest.mark.parametrize("device", ["cpu", "cuda", "cuda:1", "auto"])
def test_every_documented_device_is_accepted(device):
    TrainConfig(graph_name="g", device=device).validate()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"model": "mlp"}, "GraphSAGE only, got model 'mlp'"),
        ({"eval_mode": "layerwise"}, "sampled inference, got 'layerwise'"),
        ({"emb_dim": 0}, "emb_dim, sparse_lr and init_scale must be positive, got 0"),
        ({"sparse_lr": -0.1}, "must be positive, got 64, -0.1"),
        ({"init_scale": 0.0}, "must be positive, got 64, 0.05, 0.0"),
        ({"batch_size": 0}, "batch_size must be at least 1"),  # the TrainConfig checks run too
    ],
)
def test_an_invalid_embedding_setting_is_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        EmbeddingConfig(**{"graph_name": "g", **overrides}).validate()


@pytest.mark.parametrize(
    ("eval_every", "epochs", "validated"),
    [(1, 4, [0, 1, 2]), (2, 5, [1, 3]), (2, 4, [1]), (0, 4, []), (5, 3, [])],
)
def test_validation_runs_every_eval_every_epochs_but_not_after_the_last(eval_every, epochs, validated):
    config = TrainConfig(graph_name="g", eval_every=eval_every, epochs=epochs)
    assert [e for e in range(epochs) if config.validates_after(e)] == validated


def test_sampler_fanouts_per_model():
    sage = TrainConfig(graph_name="g", fanouts=[10, 25])
    assert sage.training_fanouts() == [10, 25] and sage.inference_fanouts() == [10, 25]
    sage.eval_fanouts = [-1, -1]
    assert sage.training_fanouts() == [10, 25] and sage.inference_fanouts() == [-1, -1]
    mlp = TrainConfig(graph_name="g", model="mlp", eval_fanouts=[5, 5])
    assert mlp.training_fanouts() == [0] and mlp.inference_fanouts() == [0]


def test_the_rgcn_config_takes_its_models_and_names_bad_settings():
    RGCNConfig(graph_name="g").validate()
    RGCNConfig(graph_name="g", model="mlp", layers=3).validate()
    for overrides, message in [
        ({"model": "sage"}, r"model must be one of \('rgcn', 'mlp'\), got 'sage'"),
        ({"target_ntype": None}, "target_ntype is required"),
        ({"regularizer": "lowrank"}, "regularizer must be one of .* got 'lowrank'"),
        ({"num_bases": 0}, "num_bases, sparse_lr and init_scale must be positive, got 0"),
        ({"eval_mode": "layerwise"}, "sampled inference, got 'layerwise'"),
        ({"fanouts": [5], "layers": 2}, r"layers \(2\) must equal the number of fanouts"),
    ]:
        with pytest.raises(ValueError, match=message):
            RGCNConfig(**{"graph_name": "g", **overrides}).validate()
