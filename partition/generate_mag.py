"""A seeded synthetic graph shaped like ogbn-mag: papers, authors, institutions and fields of study.

Node and edge counts follow ogbn-mag's proportions scaled to ``num_nodes`` (at 1,939,743 nodes:
736,389 papers, 1,134,649 authors, 8,740 institutions, 59,965 fields of study; 7.1M ``writes``,
5.4M ``cites``, 1.0M ``affiliated_with``, 7.5M ``has_topic`` edges). Every node of every type has a
latent class in ``[0, num_classes)`` and a power-law popularity; a paper's label is its latent class.
Each relation is drawn as in the homogeneous generator: destination by popularity, source with
probability ``homophily`` from the destination's class (else from anyone), again by popularity (an
author's affiliations are the exception: Poisson, mean 0.92, not heavy-tailed). So a paper's authors,
the institutions of its authors, its topics and the papers it cites and is cited by lean to its
class, and its 128-d features are its class center (length ``feat_signal``) plus unit Gaussian noise:
a model that reads the relations (an RGCN) beats a features-only model by far.

Papers have a ``year`` (2010-2019); the split is by year as in ogbn-mag: ``train_mask`` up to 2017,
``val_mask`` 2018, ``test_mask`` 2019 (about 85.5% / 8.8% / 5.7% of papers). Unless ``reverse`` is
off, every relation also appears reversed as ``rev_<etype>`` (``cites`` too, as DGL's RGCN examples do,
so that a paper hears from the papers citing it): the same edges, source and destination swapped.

The output follows the typed input convention (:mod:`graphstore.partition.typed_input`) and is
written in chunks, like the homogeneous generator.
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
from graphstore.partition.typed_input import CanonicalEtype, edge_key, node_key, num_nodes_key

OGBN_MAG_NODE_COUNTS = {"paper": 736_389, "author": 1_134_649, "institution": 8_740, "field_of_study": 59_965}
OGBN_MAG_EDGE_COUNTS: dict[CanonicalEtype, int] = {
    ("author", "writes", "paper"): 7_145_660,
    ("paper", "cites", "paper"): 5_416_271,
    ("author", "affiliated_with", "institution"): 1_043_998,
    ("paper", "has_topic", "field_of_study"): 7_505_078,
}
OGBN_MAG_NUM_NODES = sum(OGBN_MAG_NODE_COUNTS.values())
# An author has a few affiliations, not hundreds: these sources are drawn without popularity, so
# affiliations per author are Poisson (mean 0.92) while authors per institution stay heavy-tailed.
_UNIFORM_SOURCES = {("author", "affiliated_with", "institution")}
_MIN_CAP_RATIO = 10.0

TRAIN_LAST_YEAR, VAL_YEAR, TEST_YEAR = 2017, 2018, 2019
_FIRST_YEAR = 2010
# ogbn-mag's papers per split (train <= 2017, val 2018, test 2019); training years grow linearly
_SPLIT_PAPERS = (629_571, 64_879, 41_939)


def reverse_etype(canonical_etype: CanonicalEtype) -> CanonicalEtype:
    """``(src, etype, dst)`` -> ``(dst, rev_<etype>, src)``."""
    src, etype, dst = canonical_etype
    return (dst, f"rev_{etype}", src)


def _year_probabilities() -> tuple[np.ndarray, np.ndarray]:
    train_years = np.arange(_FIRST_YEAR, TRAIN_LAST_YEAR + 1)
    growth = np.arange(1, train_years.size + 1, dtype=np.float64)
    train, val, test = (count / sum(_SPLIT_PAPERS) for count in _SPLIT_PAPERS)
    years = np.append(train_years, [VAL_YEAR, TEST_YEAR])
    return years, np.append(train * growth / growth.sum(), [val, test])


@dataclass(frozen=True)
class MagConfig:
    """Parameters of :func:`generate_mag_graph` / :func:`write_mag_graph`.

    Attributes:
        num_nodes: total nodes N over the four types (>= 4: every type gets at least one).
        seed: the seed; same seed, same graph (and the same file bytes).
        reverse: add the reverse of every relation (``rev_<etype>``).
        feat_dim: width of the papers' ``feat``.
        num_classes: number of paper labels. 64 by default rather than ogbn-mag's 349, so that every
            class has a few hundred training papers already at N = 60,000 and accuracy measures the
            model, not how well a class can be estimated from a handful of examples.
        homophily: probability that an edge's source is drawn from its destination's class. At 0.3 with
            ``feat_signal`` 2, at N = 60,000, a nearest-centroid classifier reaches about 35% on the
            paper features alone and 77% with their neighbor means along the relations (chance: 1.6%).
        feat_signal: length of each class center; the noise is unit Gaussian per dimension.
        power_law_exponent: exponent of the popularity (and so degree) distribution, > 2.
    """

    num_nodes: int
    seed: int = 0
    reverse: bool = True
    feat_dim: int = 128
    num_classes: int = 64
    homophily: float = 0.3
    feat_signal: float = 2.0
    power_law_exponent: float = 2.5

    def validate(self) -> None:
        """Raises ValueError naming the first invalid parameter."""
        if isinstance(self.num_nodes, bool) or not isinstance(self.num_nodes, (int, np.integer)):
            raise ValueError(f"num_nodes must be an integer, got {self.num_nodes!r}")
        num_types = len(OGBN_MAG_NODE_COUNTS)
        if self.num_nodes < num_types:
            raise ValueError(f"num_nodes must be >= {num_types} (one node per type), got {self.num_nodes}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValueError(f"seed must be an integer >= 0, got {self.seed!r}")
        if self.feat_dim < 1:
            raise ValueError(f"feat_dim must be >= 1, got {self.feat_dim}")
        if self.num_classes < 1:
            raise ValueError(f"num_classes must be >= 1, got {self.num_classes}")
        if not 0.0 <= self.homophily <= 1.0:
            raise ValueError(f"homophily must be in [0, 1], got {self.homophily}")
        if not self.feat_signal >= 0:
            raise ValueError(f"feat_signal must be >= 0, got {self.feat_signal}")
        if not self.power_law_exponent > 2.0:
            raise ValueError(f"power_law_exponent must be > 2, got {self.power_law_exponent}")

    def node_counts(self) -> dict[str, int]:
        """Nodes per type: ogbn-mag's proportions of ``num_nodes`` (largest remainders), each >= 1.

        At ``num_nodes`` = 1,939,743 these are ogbn-mag's counts exactly.
        """
        types = list(OGBN_MAG_NODE_COUNTS)
        shares = np.array([OGBN_MAG_NODE_COUNTS[t] for t in types], dtype=np.int64)
        exact = self.num_nodes * shares / OGBN_MAG_NUM_NODES
        counts = np.floor(exact).astype(np.int64)
        by_remainder = np.argsort(-(exact - counts), kind="stable")
        counts[by_remainder[: self.num_nodes - int(counts.sum())]] += 1
        for empty in np.flatnonzero(counts == 0):  # small N: borrow from the largest type
            counts[empty] = 1
            counts[np.argmax(counts)] -= 1
        return {t: int(c) for t, c in zip(types, counts, strict=True)}

    def edge_counts(self) -> dict[CanonicalEtype, int]:
        """Edges per forward relation: ogbn-mag's edges per node times ``num_nodes``, rounded."""
        return {
            etype: int(round(self.num_nodes * count / OGBN_MAG_NUM_NODES))
            for etype, count in OGBN_MAG_EDGE_COUNTS.items()
        }

    def canonical_etypes(self) -> list[CanonicalEtype]:
        """The forward relations, then (with ``reverse``) their reverses, in file order."""
        forward = list(OGBN_MAG_EDGE_COUNTS)
        return forward + [reverse_etype(e) for e in forward] if self.reverse else forward


@dataclass
class _MagModel:
    tables: dict[str, CommunityTable]  # latent class and popularity of every node, per type
    uniform_tables: dict[str, CommunityTable]  # the same classes, every node weighing 1
    centers: np.ndarray  # float32 [num_classes, feat_dim]
    year: np.ndarray  # int64 [papers]

    @property
    def label(self) -> np.ndarray:
        return self.tables["paper"].community


def _mag_model(cfg: MagConfig) -> _MagModel:
    rng = np.random.default_rng([cfg.seed, 0])
    counts, edges = cfg.node_counts(), cfg.edge_counts()
    tables = {}
    for ntype, n in counts.items():
        # keep every node's expected degree below sqrt(E) in each relation it takes part in, but let a
        # type with few, busy nodes (institutions, fields at small N) still have hubs of 10x the mean
        cap_ratio = min(
            (n / np.sqrt(e) for (src, _, dst), e in edges.items() if ntype in (src, dst) and e > 0),
            default=1.0,
        )
        cap_ratio = max(cap_ratio, _MIN_CAP_RATIO)
        community = rng.integers(0, cfg.num_classes, n)
        popularity = capped_pareto_popularity(rng, n, cfg.power_law_exponent, cap_ratio)
        tables[ntype] = CommunityTable.build(community, popularity, cfg.num_classes)
    uniform_tables = {
        src: CommunityTable.build(tables[src].community, np.ones(counts[src]), cfg.num_classes)
        for src, _, _ in _UNIFORM_SOURCES
    }
    centers = class_centers(rng, cfg.num_classes, cfg.feat_dim, cfg.feat_signal)
    years, probabilities = _year_probabilities()
    year = rng.choice(years, size=counts["paper"], p=probabilities).astype(np.int64)
    return _MagModel(tables=tables, uniform_tables=uniform_tables, centers=centers, year=year)


def _relation_chunks(cfg: MagConfig, model: _MagModel, index: int, etype: CanonicalEtype, num_edges: int):
    """The ``index``-th relation's ``(src, dst)`` chunks, seeded by (seed, 1, index, chunk)."""
    src, _, dst = etype
    src_table = (model.uniform_tables if etype in _UNIFORM_SOURCES else model.tables)[src]
    return relation_edge_chunks(
        src_table, model.tables[dst], num_edges, cfg.homophily, (cfg.seed, 1, index), EDGE_CHUNK
    )


def _paper_arrays(model: _MagModel) -> dict[str, np.ndarray]:
    """The paper arrays besides ``feat``: label, year and the year split."""
    year = model.year
    return {
        "label": model.label.astype(np.int64),
        "year": year,
        "train_mask": year <= TRAIN_LAST_YEAR,
        "val_mask": year == VAL_YEAR,
        "test_mask": year == TEST_YEAR,
    }


def _feat_chunks(cfg: MagConfig, model: _MagModel):
    return feature_chunks(model.label, model.centers, (cfg.seed, 2), FEAT_CHUNK)


def generate_mag_graph(cfg: MagConfig) -> dict[str, np.ndarray]:
    """Generate the graph in memory (for small and medium sizes).

    Args:
        cfg: the generator parameters.

    Returns:
        Arrays by typed member name (see the module docstring): the same arrays
        :func:`write_mag_graph` writes.

    Raises:
        ValueError: an invalid parameter.
    """
    cfg.validate()
    model = _mag_model(cfg)
    arrays = {num_nodes_key(t): np.asarray(n, dtype=np.int64) for t, n in cfg.node_counts().items()}
    for index, (etype, num_edges) in enumerate(cfg.edge_counts().items()):
        src, dst = collect_edges(_relation_chunks(cfg, model, index, etype, num_edges))
        arrays[edge_key(etype, "src")], arrays[edge_key(etype, "dst")] = src, dst
        if cfg.reverse:
            rev = reverse_etype(etype)
            arrays[edge_key(rev, "src")], arrays[edge_key(rev, "dst")] = dst, src
    arrays[node_key("paper", "feat")] = np.concatenate(list(_feat_chunks(cfg, model)))
    arrays.update({node_key("paper", name): arr for name, arr in _paper_arrays(model).items()})
    return arrays


def write_mag_graph(cfg: MagConfig, out_path: str, overwrite: bool = False) -> dict[str, tuple]:
    """Generate the graph and write it to an uncompressed ``.npz`` in chunks.

    The file appears atomically. Memory: the per-type node tables plus one chunk of edges and of
    features; edge IDs still to be written wait in temporary ``.npy`` files next to the output.

    Args:
        cfg: the generator parameters.
        out_path: the ``.npz`` to write.
        overwrite: replace an existing file.

    Returns:
        Member name -> shape, in file order.

    Raises:
        ValueError: an invalid parameter or an ``out_path`` not ending in ``.npz``.
        FileExistsError: ``out_path`` exists and not ``overwrite``.
    """
    cfg.validate()
    counts = cfg.node_counts()
    shapes: dict[str, tuple] = {}
    with atomic_npz(out_path, overwrite) as (writer, folder):
        model = _mag_model(cfg)
        for ntype, n in counts.items():
            writer.write(num_nodes_key(ntype), np.int64, (), [np.asarray(n, dtype=np.int64)])
            shapes[num_nodes_key(ntype)] = ()
        for index, (etype, num_edges) in enumerate(cfg.edge_counts().items()):
            names = (edge_key(etype, "src"), edge_key(etype, "dst"))
            reverse_names = None
            if cfg.reverse:
                rev = reverse_etype(etype)
                reverse_names = (edge_key(rev, "src"), edge_key(rev, "dst"))
            chunks = _relation_chunks(cfg, model, index, etype, num_edges)
            write_edge_members(writer, chunks, num_edges, folder, names, reverse_names, chunk=EDGE_CHUNK)
            shapes.update({name: (num_edges,) for name in names + (reverse_names or ())})
        num_papers = counts["paper"]
        writer.write(
            node_key("paper", "feat"), np.float32, (num_papers, cfg.feat_dim), _feat_chunks(cfg, model)
        )
        shapes[node_key("paper", "feat")] = (num_papers, cfg.feat_dim)
        for name, arr in _paper_arrays(model).items():
            writer.write(node_key("paper", name), arr.dtype, arr.shape, [arr])
            shapes[node_key("paper", name)] = arr.shape
    return shapes
