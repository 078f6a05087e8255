"""A seeded synthetic graph generator: power-law degrees, communities, label-correlated features.

Each node belongs to one of ``num_classes * communities_per_class`` communities; its label is its
community modulo ``num_classes``. Every node draws a power-law "popularity" weight. An edge's
destination is drawn in proportion to popularity; its source, with probability ``homophily``, from
the destination's community (again by popularity), otherwise from the whole graph. So in- and
out-degrees are heavy-tailed and most edges stay inside a community, which METIS can find. A node's
features are its class center (a random direction of length ``feat_signal``) plus unit Gaussian
noise: a features-only model sees a weak signal, and a model that averages neighbors (a GNN) a much
stronger one.

Everything is generated in fixed-size chunks with per-chunk seeds, so the same arguments give the
same graph, and a graph the size of ogbn-products (2.4M nodes, 124M edges, 100-d features) is
written to an ``.npz`` without holding it in memory: edges and features stream into the zip file;
only node-sized arrays and, in a temporary file, one edge array sit outside it.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

EDGE_CHUNK = 1 << 22
FEAT_CHUNK = 1 << 17


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
    community: np.ndarray  # int64 [N]
    label: np.ndarray  # int64 [N]
    order: np.ndarray  # node IDs sorted by community
    cum_weight: np.ndarray  # float64 [N], cumulative popularity along ``order``
    community_start: np.ndarray  # first position in ``order`` of each community
    community_end: np.ndarray
    centers: np.ndarray  # float32 [C, F]
    split: np.ndarray  # float64 [N] uniform draw deciding train / val / test


def _node_model(cfg: GeneratorConfig) -> _NodeModel:
    rng = np.random.default_rng([cfg.seed, 0])
    n = cfg.num_nodes
    num_communities = max(1, min(cfg.num_classes * cfg.communities_per_class, n))
    community = rng.integers(0, num_communities, n)
    label = community % cfg.num_classes
    # Pareto popularity, capped so that no node's expected degree exceeds ~sqrt(E).
    popularity = (1.0 - rng.random(n)) ** (-1.0 / (cfg.power_law_exponent - 1.0))
    cap = max(1.0, np.sqrt(max(cfg.num_edges, 1)) / max(cfg.avg_degree, 1e-9) * popularity.mean())
    np.minimum(popularity, cap, out=popularity)
    order = np.argsort(community, kind="stable")
    cum_weight = np.cumsum(popularity[order])
    sizes = np.bincount(community, minlength=num_communities)
    community_end = np.cumsum(sizes)
    community_start = community_end - sizes
    centers = rng.standard_normal((cfg.num_classes, cfg.feat_dim))
    centers *= cfg.feat_signal / np.maximum(np.linalg.norm(centers, axis=1, keepdims=True), 1e-12)
    centers = centers.astype(np.float32)
    split = rng.random(n)
    return _NodeModel(
        community=community,
        label=label.astype(np.int64),
        order=order,
        cum_weight=cum_weight,
        community_start=community_start,
        community_end=community_end,
        centers=centers,
        split=split,
    )


def _draw_by_weight(
    model: _NodeModel, rng: np.random.Generator, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """Draw one node per entry from positions ``[lo, hi)`` of ``model.order``, by popularity."""
    cum = model.cum_weight
    base = np.where(lo > 0, cum[np.maximum(lo - 1, 0)], 0.0)
    r = base + rng.random(lo.size) * (cum[hi - 1] - base)
    # Binary search with sorted keys walks the table in order; random keys miss the cache at every
    # step and are ~100x slower on a table of millions of nodes.
    perm = np.argsort(r)
    pos = np.empty(r.size, dtype=np.int64)
    pos[perm] = np.searchsorted(cum, r[perm], side="right")
    np.clip(pos, lo, hi - 1, out=pos)
    return model.order[pos]


def _edge_chunks(cfg: GeneratorConfig, model: _NodeModel) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (src, dst) int64 chunks; chunk ``i`` is seeded by (seed, 1, i)."""
    n = cfg.num_nodes
    total = cfg.num_edges
    everyone_lo = np.zeros(1, dtype=np.int64)
    everyone_hi = np.full(1, n, dtype=np.int64)
    for index, start in enumerate(range(0, total, EDGE_CHUNK)):
        size = min(EDGE_CHUNK, total - start)
        rng = np.random.default_rng([cfg.seed, 1, index])
        dst = _draw_by_weight(model, rng, np.repeat(everyone_lo, size), np.repeat(everyone_hi, size))
        local = rng.random(size) < cfg.homophily
        comm = model.community[dst]
        lo = np.where(local, model.community_start[comm], 0)
        hi = np.where(local, model.community_end[comm], n)
        src = _draw_by_weight(model, rng, lo, hi)
        loops = src == dst
        if loops.any():
            src[loops] = _draw_by_weight(
                model, rng, np.zeros(int(loops.sum()), np.int64), np.full(int(loops.sum()), n)
            )
            still = src == dst
            src[still] = (src[still] + 1) % n
        yield src, dst


def _feat_chunks(cfg: GeneratorConfig, model: _NodeModel) -> Iterator[np.ndarray]:
    """Yield float32 feature row chunks; chunk ``i`` is seeded by (seed, 2, i)."""
    for index, start in enumerate(range(0, cfg.num_nodes, FEAT_CHUNK)):
        end = min(cfg.num_nodes, start + FEAT_CHUNK)
        rng = np.random.default_rng([cfg.seed, 2, index])
        rows = rng.standard_normal((end - start, cfg.feat_dim), dtype=np.float32)
        rows += model.centers[model.label[start:end]]
        yield rows


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
    src_parts, dst_parts = [], []
    for src, dst in _edge_chunks(cfg, model):
        src_parts.append(src)
        dst_parts.append(dst)
    empty = np.zeros(0, dtype=np.int64)
    feats = list(_feat_chunks(cfg, model))
    return {
        "src": np.concatenate(src_parts) if src_parts else empty,
        "dst": np.concatenate(dst_parts) if dst_parts else empty,
        "feat": np.concatenate(feats) if feats else np.zeros((cfg.num_nodes, cfg.feat_dim), np.float32),
        "label": model.label,
        "community": model.community.astype(np.int64),
        **_masks(cfg, model),
    }


class _NpzStream:
    """Writes ``.npy`` members into an uncompressed zip (an ``.npz``), each from a stream of chunks."""

    def __init__(self, path: str):
        self._zip = zipfile.ZipFile(path, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True)

    def write(self, name: str, dtype: np.dtype, shape: tuple[int, ...], chunks) -> None:
        header = {
            "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
            "fortran_order": False,
            "shape": shape,
        }
        with self._zip.open(f"{name}.npy", mode="w", force_zip64=True) as member:
            np.lib.format.write_array_header_2_0(member, header)
            written = 0
            for chunk in chunks:
                chunk = np.ascontiguousarray(chunk, dtype=dtype)
                member.write(memoryview(chunk).cast("B"))
                written += chunk.shape[0] if chunk.ndim else 1
        expected = shape[0] if shape else 1
        if written != expected:
            raise RuntimeError(f"npz member {name!r}: wrote {written} rows, expected {expected}")

    def close(self) -> None:
        self._zip.close()


def _sources_keeping_destinations(
    chunks: Iterator[tuple[np.ndarray, np.ndarray]], dst_store: np.ndarray
) -> Iterator[np.ndarray]:
    """Yield the source chunks while storing the destination chunks, in order, into ``dst_store``."""
    offset = 0
    for src, dst in chunks:
        dst_store[offset : offset + dst.size] = dst
        offset += dst.size
        yield src


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
    if not out_path.endswith(".npz"):
        raise ValueError(f"output path must end in .npz, got {out_path!r}")
    if os.path.exists(out_path) and not overwrite:
        raise FileExistsError(f"output file {out_path!r} exists; pass overwrite=True (--overwrite)")
    folder = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(folder, exist_ok=True)
    model = _node_model(cfg)
    e, n, f = cfg.num_edges, cfg.num_nodes, cfg.feat_dim
    fd, tmp_npz = tempfile.mkstemp(prefix=".gen-", suffix=".npz.tmp", dir=folder)
    os.close(fd)
    fd, tmp_dst = tempfile.mkstemp(prefix=".gen-dst-", suffix=".npy", dir=folder)
    os.close(fd)
    try:
        if e:
            dst_store = np.lib.format.open_memmap(tmp_dst, mode="w+", dtype=np.int64, shape=(e,))
        else:
            dst_store = np.zeros(0, dtype=np.int64)
        writer = _NpzStream(tmp_npz)
        try:
            writer.write(
                "src", np.int64, (e,), _sources_keeping_destinations(_edge_chunks(cfg, model), dst_store)
            )
            if isinstance(dst_store, np.memmap):
                dst_store.flush()
            dst_chunks = (dst_store[i : i + EDGE_CHUNK] for i in range(0, e, EDGE_CHUNK))
            writer.write("dst", np.int64, (e,), dst_chunks)
            writer.write("feat", np.float32, (n, f), _feat_chunks(cfg, model))
            writer.write("label", np.int64, (n,), [model.label])
            writer.write("community", np.int64, (n,), [model.community])
            for name, mask in _masks(cfg, model).items():
                writer.write(name, np.bool_, (n,), [mask])
        finally:
            writer.close()
        os.chmod(tmp_npz, 0o644)  # mkstemp's 0600 would hide the graph from other users
        os.replace(tmp_npz, out_path)
    except BaseException:
        if os.path.exists(tmp_npz):
            os.unlink(tmp_npz)
        raise
    finally:
        if os.path.exists(tmp_dst):
            os.unlink(tmp_dst)
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
