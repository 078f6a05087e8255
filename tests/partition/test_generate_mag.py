"""The ogbn-mag-shaped generator: type proportions, typed arrays, reverse relations, the year split,
reproducibility, a label signal that the relations carry, and ``graphstore generate --schema mag``."""

import json

import numpy as np
import pytest
import torch

from graphstore.launcher.cli import main
from graphstore.partition import load_npz
from graphstore.partition.generate_mag import (
    OGBN_MAG_EDGE_COUNTS,
    OGBN_MAG_NODE_COUNTS,
    OGBN_MAG_NUM_NODES,
    MagConfig,
    generate_mag_graph,
    write_mag_graph,
)

FORWARD = [
    ("author", "writes", "paper"),
    ("paper", "cites", "paper"),
    ("author", "affiliated_with", "institution"),
    ("paper", "has_topic", "field_of_study"),
]
REVERSE = [
    ("paper", "rev_writes", "author"),
    ("paper", "rev_cites", "paper"),
    ("institution", "rev_affiliated_with", "author"),
    ("field_of_study", "rev_has_topic", "paper"),
]


def _edges(graph, etype):
    key = "edge/" + ":".join(etype)
    return graph[f"{key}/src"], graph[f"{key}/dst"]


def _edge_types(graph):
    return {tuple(k.split("/")[1].split(":")) for k in graph if k.startswith("edge/")}


@pytest.fixture(scope="module")
def mag():
    return generate_mag_graph(MagConfig(num_nodes=60_000, seed=0))


def test_type_and_edge_counts_follow_ogbn_mag():
    full = MagConfig(num_nodes=OGBN_MAG_NUM_NODES)
    assert full.node_counts() == OGBN_MAG_NODE_COUNTS
    assert full.edge_counts() == OGBN_MAG_EDGE_COUNTS
    counts = MagConfig(num_nodes=60_000).node_counts()
    assert sum(counts.values()) == 60_000
    for ntype, n in counts.items():
        assert abs(n - 60_000 * OGBN_MAG_NODE_COUNTS[ntype] / OGBN_MAG_NUM_NODES) <= 1
    for n in (4, 5, 9):
        small = MagConfig(num_nodes=n).node_counts()
        assert sum(small.values()) == n and min(small.values()) >= 1


def test_ids_in_range_and_array_shapes(mag):
    counts = {t: int(mag[f"num_nodes/{t}"]) for t in OGBN_MAG_NODE_COUNTS}
    assert all(mag[f"num_nodes/{t}"].shape == () for t in counts)
    assert sum(counts.values()) == 60_000
    edge_counts = MagConfig(num_nodes=60_000).edge_counts()
    for etype in FORWARD + REVERSE:
        src, dst = _edges(mag, etype)
        assert src.dtype == dst.dtype == np.int64
        forward = etype if etype in FORWARD else FORWARD[REVERSE.index(etype)]
        assert src.shape == dst.shape == (edge_counts[forward],)
        assert 0 <= src.min() and src.max() < counts[etype[0]], etype
        assert 0 <= dst.min() and dst.max() < counts[etype[2]], etype
    papers = counts["paper"]
    assert mag["node/paper/feat"].shape == (papers, 128) and mag["node/paper/feat"].dtype == np.float32
    assert mag["node/paper/label"].dtype == mag["node/paper/year"].dtype == np.int64
    assert set(np.unique(mag["node/paper/label"])) == set(range(64))
    assert not any(k.startswith("node/") and "/paper/" not in k for k in mag)  # only papers carry data


def test_reverse_relations_are_the_swapped_forward_edges(mag):
    assert _edge_types(mag) == set(FORWARD + REVERSE)
    for forward, reverse in zip(FORWARD, REVERSE, strict=True):
        src, dst = _edges(mag, forward)
        rev_src, rev_dst = _edges(mag, reverse)
        np.testing.assert_array_equal(rev_src, dst)
        np.testing.assert_array_equal(rev_dst, src)
    one_way = generate_mag_graph(MagConfig(num_nodes=3000, seed=4, reverse=False))
    assert _edge_types(one_way) == set(FORWARD)
    two_way = generate_mag_graph(MagConfig(num_nodes=3000, seed=4))
    for etype in FORWARD:  # the forward edges do not depend on the reverse flag
        np.testing.assert_array_equal(_edges(one_way, etype)[0], _edges(two_way, etype)[0])


def test_masks_split_papers_by_year(mag):
    year = mag["node/paper/year"]
    train, val, test = (mag[f"node/paper/{m}_mask"] for m in ("train", "val", "test"))
    assert train.dtype == val.dtype == test.dtype == np.bool_
    np.testing.assert_array_equal(train.astype(int) + val + test, np.ones_like(year))  # disjoint, covering
    assert np.all(year[train] <= 2017) and np.all(year[val] == 2018) and np.all(year[test] == 2019)
    assert year.min() >= 2010
    # ogbn-mag: 629,571 / 64,879 / 41,939 of 736,389 papers
    for mask, share in ((train, 0.855), (val, 0.088), (test, 0.057)):
        assert abs(mask.mean() - share) < 0.01


def test_degrees_are_heavy_tailed(mag):
    counts = {t: int(mag[f"num_nodes/{t}"]) for t in OGBN_MAG_NODE_COUNTS}
    for etype in FORWARD:
        for ids, ntype in zip(_edges(mag, etype), (etype[0], etype[2]), strict=True):
            deg = np.bincount(ids, minlength=counts[ntype])
            if etype == FORWARD[2] and ntype == "author":  # affiliations per author: Poisson, at most a few
                assert deg.max() <= 10 and abs(deg.mean() - 0.92) < 0.05
                continue
            assert np.median(deg) < deg.mean(), (etype, ntype)
            # hubs; the cap (expected degree <= sqrt(E)) bounds them tighter on the small types
            hub = 10 if ntype in ("paper", "author") else 3
            assert deg.max() > hub * deg.mean(), (etype, ntype)


def test_same_seed_same_bytes_and_file_equals_memory(tmp_path, monkeypatch):
    import graphstore.partition.generate_mag as gen

    monkeypatch.setattr(gen, "EDGE_CHUNK", 700)  # several chunks per relation and per feature array
    monkeypatch.setattr(gen, "FEAT_CHUNK", 300)
    cfg = MagConfig(num_nodes=4000, seed=11)
    first, second = tmp_path / "a.npz", tmp_path / "b.npz"
    shapes = write_mag_graph(cfg, str(first))
    write_mag_graph(cfg, str(second))
    assert first.read_bytes() == second.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npz", "b.npz"]  # temporaries removed
    expected = generate_mag_graph(cfg)
    loaded = load_npz(str(first))
    assert list(loaded) == list(expected) == list(shapes)
    for name, arr in expected.items():
        assert loaded[name].shape == shapes[name]
        np.testing.assert_array_equal(loaded[name], arr)
    other = generate_mag_graph(MagConfig(num_nodes=4000, seed=12))
    assert not np.array_equal(other["edge/paper:cites:paper/src"], expected["edge/paper:cites:paper/src"])
    with pytest.raises(FileExistsError, match="a.npz"):
        write_mag_graph(cfg, str(first))


def _mean_over(values, src, dst, num_dst):
    """Mean of ``values[src]`` per ``dst`` (zero where ``dst`` has no edge)."""
    out = torch.zeros((num_dst, values.shape[1]))
    out.index_add_(0, torch.from_numpy(np.asarray(dst)), values[torch.from_numpy(np.asarray(src))])
    degree = torch.bincount(torch.from_numpy(np.asarray(dst)), minlength=num_dst).clamp(min=1)
    return out / degree[:, None]


def _nearest_centroid_accuracy(blocks, label, train, test):
    """Nearest class centroid, each block scaled by its within-class spread (a shared-variance Gaussian)."""
    y, k = torch.from_numpy(label), int(label.max()) + 1
    train, test = torch.from_numpy(train), torch.from_numpy(test)
    count = torch.bincount(y[train], minlength=k).clamp(min=1)[:, None]
    scaled = []
    for x in blocks:
        centroids = torch.zeros((k, x.shape[1])).index_add_(0, y[train], x[train]) / count
        scaled.append(x / (x[train] - centroids[y[train]]).std())
    x = torch.cat(scaled, dim=1)
    centroids = torch.zeros((k, x.shape[1])).index_add_(0, y[train], x[train]) / count
    distance = (centroids**2).sum(1) - 2 * x[test] @ centroids.T
    return (distance.argmin(1) == y[test]).float().mean().item()


def test_relations_reveal_the_label_far_better_than_features(mag):
    counts = {t: int(mag[f"num_nodes/{t}"]) for t in OGBN_MAG_NODE_COUNTS}
    papers = counts["paper"]
    feat = torch.from_numpy(mag["node/paper/feat"])
    # what a 2-layer relation-aware model can read: neighbor means along each relation
    cites_src, cites_dst = _edges(mag, FORWARD[1])
    cites = _mean_over(
        feat, np.concatenate([cites_src, cites_dst]), np.concatenate([cites_dst, cites_src]), papers
    )
    topic_paper, topic = _edges(mag, FORWARD[3])
    topics = _mean_over(
        _mean_over(feat, topic_paper, topic, counts["field_of_study"]), topic, topic_paper, papers
    )
    author, author_paper = _edges(mag, FORWARD[0])
    author_mean = _mean_over(feat, author_paper, author, counts["author"])
    affiliated, institution = _edges(mag, FORWARD[2])
    institution_mean = _mean_over(author_mean, affiliated, institution, counts["institution"])
    author_institutions = _mean_over(institution_mean, institution, affiliated, counts["author"])
    institutions = _mean_over(author_institutions, author, author_paper, papers)
    authors = _mean_over(author_mean, author, author_paper, papers)
    label, train = mag["node/paper/label"], mag["node/paper/train_mask"]
    held_out = mag["node/paper/val_mask"] | mag["node/paper/test_mask"]
    features_only = _nearest_centroid_accuracy([feat], label, train, held_out)
    relation_aware = _nearest_centroid_accuracy(
        [feat, cites, topics, authors, institutions], label, train, held_out
    )
    topics_and_institutions = _nearest_centroid_accuracy([feat, topics, institutions], label, train, held_out)
    # measured: features only 0.35, + topics and institutions 0.69, + all relations 0.77; chance 1/64
    assert 0.2 < features_only < 0.5
    assert topics_and_institutions > features_only + 0.2
    assert features_only + 0.3 < relation_aware < 0.9


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"num_nodes": 3}, "num_nodes must be >= 4"),
        ({"num_nodes": 2.5}, "num_nodes must be an integer"),
        ({"seed": -1}, "seed must be an integer >= 0, got -1"),
        ({"homophily": 1.5}, "homophily"),
        ({"num_classes": 0}, "num_classes"),
        ({"feat_dim": 0}, "feat_dim"),
        ({"power_law_exponent": 2.0}, "power_law_exponent"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        generate_mag_graph(MagConfig(**{"num_nodes": 100, **kwargs}))


def test_cli_writes_the_graph_and_prints_one_json_line(tmp_path, capsys):
    path = tmp_path / "mag.npz"
    argv = ["generate", "--schema", "mag", "--num-nodes", "5000", "--seed", "3", "--out", str(path)]
    assert main(argv + ["--num-classes", "8", "--no-reverse"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["schema"] == "mag" and report["num_nodes"] == 5000
    assert report["num_nodes_per_type"] == MagConfig(num_nodes=5000).node_counts()
    assert set(report["num_edges_per_type"]) == {":".join(e) for e in FORWARD}
    assert report["num_edges"] == sum(MagConfig(num_nodes=5000).edge_counts().values())
    loaded = load_npz(str(path))
    assert report["arrays"] == {k: list(v.shape) for k, v in loaded.items()}
    assert report["bytes"] == path.stat().st_size
    assert loaded["node/paper/label"].max() == 7 and _edge_types(loaded) == set(FORWARD)
    expected = generate_mag_graph(MagConfig(num_nodes=5000, seed=3, num_classes=8, reverse=False))
    np.testing.assert_array_equal(
        loaded["edge/author:writes:paper/src"], expected["edge/author:writes:paper/src"]
    )


@pytest.mark.parametrize(
    "extra,match",
    [
        (["--schema", "bogus"], "--schema must be one of homogeneous, mag; got 'bogus'"),
        (["--schema", "mag", "--avg-degree", "5"], "--avg-degree does not apply to --schema mag"),
        (["--schema", "mag", "--train-frac", "0.5"], "--train-frac does not apply to --schema mag"),
        (["--schema", "mag", "--num-nodes", "2"], "num_nodes must be >= 4"),
        (["--schema", "mag", "--seed", "-3"], "seed must be an integer >= 0, got -3"),
        (["--no-reverse"], "--no-reverse applies only to --schema mag"),
    ],
)
def test_cli_bad_input_is_one_line_error(tmp_path, capsys, extra, match):
    out = tmp_path / "g.npz"
    code = main(["generate", "--num-nodes", "100", "--out", str(out), *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and match in err, err
    assert not out.exists()
