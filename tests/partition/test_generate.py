"""The synthetic generator: seeded, power-law, community-structured, and learnable (GNN beats MLP)."""

import numpy as np
import pytest
import torch

from graphstore.partition import load_npz
from graphstore.partition.generate import GeneratorConfig, generate_graph, write_generated_graph


def test_same_seed_same_graph_other_seed_other_graph():
    cfg = GeneratorConfig(num_nodes=2000, avg_degree=6, feat_dim=8, seed=3)
    a, b = generate_graph(cfg), generate_graph(cfg)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
    c = generate_graph(GeneratorConfig(num_nodes=2000, avg_degree=6, feat_dim=8, seed=4))
    assert not np.array_equal(a["src"], c["src"])


def test_shapes_and_ranges():
    cfg = GeneratorConfig(num_nodes=3000, avg_degree=7.5, feat_dim=5, num_classes=6, seed=1)
    g = generate_graph(cfg)
    assert g["src"].shape == g["dst"].shape == (22500,)
    assert g["src"].dtype == np.int64 and g["feat"].dtype == np.float32 and g["feat"].shape == (3000, 5)
    assert g["src"].min() >= 0 and g["src"].max() < 3000 and g["dst"].max() < 3000
    assert not np.any(g["src"] == g["dst"])  # no self loops
    assert set(np.unique(g["label"])) == set(range(6))
    masks = g["train_mask"].astype(int) + g["val_mask"] + g["test_mask"]
    assert np.all(masks == 1)  # disjoint and covering
    assert 0.07 < g["train_mask"].mean() < 0.13


def test_degrees_are_heavy_tailed_and_edges_homophilous():
    cfg = GeneratorConfig(num_nodes=20000, avg_degree=10, feat_dim=1, seed=2, homophily=0.8)
    g = generate_graph(cfg)
    in_deg = np.bincount(g["dst"], minlength=cfg.num_nodes)
    out_deg = np.bincount(g["src"], minlength=cfg.num_nodes)
    for deg in (in_deg, out_deg):
        assert deg.max() > 15 * deg.mean()  # a power law has hubs; a uniform graph would top out near 2-3x
        assert np.median(deg) < deg.mean()
    same = g["community"][g["src"]] == g["community"][g["dst"]]
    assert 0.75 < same.mean() < 0.85


def _accuracy(x, y, train, test, epochs=150):
    torch.manual_seed(0)
    x, y = torch.from_numpy(x), torch.from_numpy(y)
    model = torch.nn.Linear(x.shape[1], int(y.max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    train, test = torch.from_numpy(train), torch.from_numpy(test)
    for _ in range(epochs):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[train]), y[train]).backward()
        opt.step()
    return (model(x[test]).argmax(1) == y[test]).float().mean().item()


def _mlp_and_gnn_accuracy(cfg: GeneratorConfig) -> tuple[float, float]:
    """Test accuracy of a linear model on the features, and on features plus in-neighbor means."""
    g = generate_graph(cfg)
    feat = g["feat"]
    # one round of mean aggregation over in-neighbors (an SGC / GraphSAGE-mean layer)
    agg = np.zeros_like(feat)
    np.add.at(agg, g["dst"], feat[g["src"]])
    agg /= np.maximum(np.bincount(g["dst"], minlength=cfg.num_nodes), 1)[:, None]
    mlp = _accuracy(feat, g["label"], g["train_mask"], g["test_mask"])
    gnn = _accuracy(np.concatenate([feat, agg], axis=1), g["label"], g["train_mask"], g["test_mask"])
    return mlp, gnn


def test_gnn_beats_features_only_model():
    # without label noise: the neighbors reveal what the features only hint at
    cfg = GeneratorConfig(num_nodes=4000, avg_degree=10, feat_dim=32, num_classes=8, seed=1, label_noise=0.0)
    mlp, gnn = _mlp_and_gnn_accuracy(cfg)
    # measured: MLP ~0.55, GNN ~0.88; chance is 0.125
    assert 0.3 < mlp < 0.8
    assert gnn > mlp + 0.15


def test_default_label_noise_keeps_a_dense_graph_from_being_solved():
    # 40 in-edges per node: without noise the neighbor mean gives the label away
    dense = {"num_nodes": 6000, "avg_degree": 40, "feat_dim": 32, "num_classes": 8, "seed": 1}
    easy_mlp, easy_gnn = _mlp_and_gnn_accuracy(GeneratorConfig(**dense, label_noise=0.0))
    mlp, gnn = _mlp_and_gnn_accuracy(GeneratorConfig(**dense))
    # measured: 0.64 / 0.985 without noise, 0.58 / 0.78 with the default 0.1 (ceiling 1 - 0.1 * 7/8)
    assert easy_gnn > 0.95
    assert gnn < 0.9 and mlp < 0.7
    assert gnn > mlp + 0.15


def test_label_noise_changes_labels_only():
    base = {"num_nodes": 20000, "avg_degree": 5, "feat_dim": 4, "num_classes": 10, "seed": 5}
    clean = generate_graph(GeneratorConfig(**base, label_noise=0.0))
    noisy = generate_graph(GeneratorConfig(**base, label_noise=0.3))
    for name in ("src", "dst", "feat", "community", "train_mask", "test_mask"):
        np.testing.assert_array_equal(clean[name], noisy[name])
    np.testing.assert_array_equal(clean["label"], clean["community"] % 10)
    changed = (noisy["label"] != clean["label"]).mean()
    assert abs(changed - 0.3 * 0.9) < 0.02  # a redrawn label keeps its class one time in ten


def test_written_npz_equals_in_memory_graph(tmp_path, monkeypatch):
    import graphstore.partition.generate as gen

    # small chunks so the streaming path writes several chunks per array
    monkeypatch.setattr(gen, "EDGE_CHUNK", 1000)
    monkeypatch.setattr(gen, "FEAT_CHUNK", 300)
    cfg = GeneratorConfig(num_nodes=1500, avg_degree=4, feat_dim=3, seed=9)
    path = tmp_path / "g.npz"
    shapes = write_generated_graph(cfg, str(path))
    expected = generate_graph(cfg)
    loaded = load_npz(str(path))
    assert set(loaded) == set(expected) == set(shapes)
    for name in expected:
        np.testing.assert_array_equal(loaded[name], expected[name])
    with np.load(path) as plain:  # a standard npz for numpy too
        np.testing.assert_array_equal(plain["feat"], expected["feat"])
    assert [p.name for p in tmp_path.iterdir()] == ["g.npz"]  # temporaries removed
    with pytest.raises(FileExistsError, match="g.npz"):
        write_generated_graph(cfg, str(path))
    write_generated_graph(cfg, str(path), overwrite=True)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"num_nodes": 1}, "num_nodes must be >= 2"),
        ({"avg_degree": -1}, "avg_degree"),
        ({"homophily": 1.5}, "homophily"),
        ({"label_noise": -0.1}, "label_noise"),
        ({"power_law_exponent": 1.5}, "power_law_exponent"),
        ({"train_frac": 0.8, "val_frac": 0.5}, "train_frac=0.8"),
        ({"num_classes": 0}, "num_classes"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        generate_graph(GeneratorConfig(**{"num_nodes": 100, **kwargs}))


def test_output_must_be_npz(tmp_path):
    with pytest.raises(ValueError, match="must end in .npz"):
        write_generated_graph(GeneratorConfig(num_nodes=10), str(tmp_path / "g.txt"))
