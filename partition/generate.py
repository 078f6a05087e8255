"""A seeded synthetic graph generator: power-law degrees, communities, label-correlated features.

Each node belongs to one of ``num_classes * communities_per_class`` communities, and its community's
class is the community modulo ``num_classes``. Every node draws a power-law "popularity" weight. An
edge's destination is drawn in proportion to popularity; its source, with probability ``homophily``,
from the destination's community (again by popularity), otherwise from the whole graph. So in- and
out-degrees are heavy-tailed and most edges stay inside a community, which METIS can find. A node's
features are its community's class center (a random direction of length ``feat_signal``) plus unit
Gaussian noise: a features-only model sees a weak signal, and a model that averages neighbors (a GNN)
a much stronger one.

A node's label is its community's class, except for a share ``label_noise`` of the nodes, whose label
is drawn uniformly at random: neither their features nor their neighbors tell it, as with the
mislabelled or ambiguous items of a real benchmark. Without it, a GNN on a dense graph (ogbn-products'
size: 51 edges per node) scores 0.999, and accuracy figures say nothing. With the default 0.1, a GNN
tops out near 0.9 (``1 - label_noise * (1 - 1 / num_classes)``; a two-layer neighbor-mean model reaches
0.80-0.87 on 4,000-200,000 nodes), and a features-only model stays far below (about 0.45 at 8-10
classes, 0.2 at 47). GraphSAGE on the ogbn-products-sized graph: test accuracy 0.900 after one epoch
(ceiling 0.902; 0.9999 without the noise). ``label_noise=0`` gives the earlier, easy graph (edges and
features are the same either way: the label draws use a stream of their own).

Everything is generated in fixed-size chunks with per-chunk seeds, so the same arguments give the
same graph, and a graph the size of ogbn-products (2.4M nodes, 124M edges, 100-d features) is
written to an ``.npz`` without holding it in memory: edges and features stream into the zip file;
only node-sized arrays and, in a temporary file, one edge array sit outside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphstore.partition.generate_npz import atomic_npz, write_edge_members
from graphstore.partition.generate_sampling import (
    EDGE_CHUNK,
    FEAT_CHUNK,
    CommunityTable,
    capped_pareto_popularity,
    class_centers,
    collect_edges,
    feature_chunks,
    relation_edge_chunks,
)


@dataclass(frozen=True)
class GeneratorConfig:
    """Parameters of :func:`generate_graph` / :func:`write_generated_graph`.

    Attributes:
        num_nodes: N.
        avg_degree: directed edges per node; the graph has ``round(N * avg_degree)`` edges.
        feat_dim: feature width.
        num_classes: number of labels.
        seed: the seed; same seed, same graph.
        communities_per_class: communities sharing each label.
        homophily: probability that an edge's source is drawn from its destination's community.
        power_law_exponent: exponent of the popularity (and so degree) distribution, > 2.
        feat_signal: length of each class center vector; the noise is unit Gaussian per dimension, so
            the features-only signal does not grow with ``feat_dim``.
        label_noise: share of nodes whose label is drawn uniformly at random instead of being their
            community's class (the task's irreducible error; 0 for the easy graph of earlier versions).
        train_frac, val_frac: fractions of nodes in ``train_mask`` / ``val_mask``; the rest is ``test_mask``.
    """

    num_nodes: int
    avg_degree: float = 10.0
    feat_dim: int = 32
    num_classes: int = 10
    seed: int = 0
    communities_per_class: int = 4
    homophily: float = 0.8
    power_law_exponent: float = 2.5
    feat_signal: float = 2.0
    label_noise: float = 0.1
    train_frac: float = 0.1
    val_frac: float = 0.1

    @property
    def num_edges(self) -> int:
        return int(round(self.num_nodes * self.avg_degree))

    def validate(self) -> None:
        """Raises ValueError naming the first invalid parameter."""
        if self.num_nodes < 2:
            raise ValueError(f"num_nodes must be >= 2, got {self.num_nodes}")
        if not self.avg_degree >= 0:
            raise ValueError(f"avg_degree must be >= 0, got {self.avg_degree}")
        if self.feat_dim < 0:
            raise ValueError(f"feat_dim must be >= 0, got {self.feat_dim}")
        if self.num_classes < 1:
            raise ValueError(f"num_classes must be >= 1, got {self.num_classes}")
        if self.communities_per_class < 1:
            raise ValueError(f"communities_per_class must be >= 1, got {self.communities_per_class}")
        if not 0.0 <= self.homophily <= 1.0:
            raise ValueError(f"homophily must be in [0, 1], got {self.homophily}")
        if not 0.0 <= self.label_noise <= 1.0:
            raise ValueError(f"label_noise must be in [0, 1], got {self.label_noise}")
        if not self.power_law_exponent > 2.0:
            raise ValueError(f"power_law_exponent must be > 2, got {self.power_law_exponent}")
        if self.train_frac < 0 or self.val_frac < 0 or self.train_frac + self.val_frac > 1:
            raise ValueError(
                f"train_frac={self.train_frac} and val_frac={self.val_frac} must be >= 0 and sum to at most 1"
            )
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")


@dataclass
class _NodeModel:
    table: CommunityTable  # communities and popularity of all nodes
    community_class: np.ndarray  # int64 [N], the class whose center a node's features are drawn around
    label: np.ndarray  # int64 [N], the community's class or, for a share label_noise, a random one
    centers: np.ndarray  # float32 [C, F]
    split: np.ndarray  # float64 [N] uniform draw deciding train / val / test


def _node_model(cfg: GeneratorConfig) -> _NodeModel:
    rng = np.random.default_rng([cfg.seed, 0])
    n = cfg.num_nodes
    num_communities = max(1, min(cfg.num_classes * cfg.communities_per_class, n))
    community = rng.integers(0, num_communities, n)
    label = community % cfg.num_classes
    cap_ratio = np.sqrt(max(cfg.num_edges, 1)) / max(cfg.avg_degree, 1e-9)
    popularity = capped_pareto_popularity(rng, n, cfg.power_law_exponent, cap_ratio)
    table = CommunityTable.build(community, popularity, num_communities)
    centers = class_centers(rng, cfg.num_classes, cfg.feat_dim, cfg.feat_signal)
    split = rng.random(n)
    label = label.astype(np.int64)
    return _NodeModel(
        table=table,
        community_class=label,
        label=_noisy_labels(label, cfg.label_noise, cfg.num_classes, cfg.seed),
        centers=centers,
        split=split,
    )


def _noisy_labels(label: np.ndarray, label_noise: float, num_classes: int, seed: int) -> np.ndarray:
    """``label`` with a share ``label_noise`` redrawn uniformly, from a stream of its own (seed, 3)."""
    if label_noise == 0:
        return label
    rng = np.random.default_rng([seed, 3])
    redraw = rng.random(label.shape[0]) < label_noise
    noisy = label.copy()
    noisy[redraw] = rng.integers(0, num_classes, int(redraw.sum()))
    return noisy


def _edge_chunks(cfg: GeneratorConfig, model: _NodeModel):
    """(src, dst) int64 chunks; chunk ``i`` is seeded by (seed, 1, i)."""
    return relation_edge_chunks(
        model.table, model.table, cfg.num_edges, cfg.homophily, (cfg.seed, 1), chunk=EDGE_CHUNK
    )


def _feat_chunks(cfg: GeneratorConfig, model: _NodeModel):
    """float32 feature row chunks; chunk ``i`` is seeded by (seed, 2, i)."""
    return feature_chunks(model.community_class, model.centers, (cfg.seed, 2), chunk=FEAT_CHUNK)


def _masks(cfg: GeneratorConfig, model: _NodeModel) -> dict[str, np.ndarray]:
    train = model.split < cfg.train_frac
    val = (model.split >= cfg.train_frac) & (model.split < cfg.train_frac + cfg.val_frac)
    return {"train_mask": train, "val_mask": val, "test_mask": ~(train | val)}


def generate_graph(cfg: GeneratorConfig) -> dict[str, np.ndarray]:
    """Generate a graph in memory (for small and medium sizes).

    Args:
        cfg: the generator parameters.

    Returns:
        ``src``, ``dst`` (int64 [E]), ``feat`` (float32 [N, F]), ``label`` (int64 [N]), ``community``
        (int64 [N]), ``train_mask``, ``val_mask``, ``test_mask`` (bool [N]). The same arrays
        :func:`write_generated_graph` writes.

    Raises:
        ValueError: an invalid parameter.
    """
    cfg.validate()
    model = _node_model(cfg)
    src, dst = collect_edges(_edge_chunks(cfg, model))
    feats = list(_feat_chunks(cfg, model))
    return {
        "src": src,
        "dst": dst,
        "feat": np.concatenate(feats) if feats else np.zeros((cfg.num_nodes, cfg.feat_dim), np.float32),
        "label": model.label,
        "community": model.table.community.astype(np.int64),
        **_masks(cfg, model),
    }


def write_generated_graph(cfg: GeneratorConfig, out_path: str, overwrite: bool = False) -> dict[str, tuple]:
    """Generate a graph and write it to an uncompressed ``.npz`` in chunks (any size that fits on disk).

    The file appears atomically (written under a temporary name, then renamed). Memory: node-sized
    arrays plus one chunk of edges and of features; the destination IDs wait in a temporary ``.npy``
    next to the output while the source IDs stream into the zip.

    Args:
        cfg: the generator parameters.
        out_path: the ``.npz`` to write.
        overwrite: replace an existing file.

    Returns:
        Member name -> shape.

    Raises:
        ValueError: an invalid parameter or an ``out_path`` not ending in ``.npz``.
        FileExistsError: ``out_path`` exists and not ``overwrite``.
    """
    cfg.validate()
    e, n, f = cfg.num_edges, cfg.num_nodes, cfg.feat_dim
    with atomic_npz(out_path, overwrite) as (writer, folder):
        model = _node_model(cfg)
        write_edge_members(writer, _edge_chunks(cfg, model), e, folder, ("src", "dst"), chunk=EDGE_CHUNK)
        writer.write("feat", np.float32, (n, f), _feat_chunks(cfg, model))
        writer.write("label", np.int64, (n,), [model.label])
        writer.write("community", np.int64, (n,), [model.table.community])
        for name, mask in _masks(cfg, model).items():
            writer.write(name, np.bool_, (n,), [mask])
    return {
        "src": (e,),
        "dst": (e,),
        "feat": (n, f),
        "label": (n,),
        "community": (n,),
        "train_mask": (n,),
        "val_mask": (n,),
        "test_mask": (n,),
    }
