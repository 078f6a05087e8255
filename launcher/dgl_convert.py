"""Converting a partitioning written by DGL's ``partition_graph`` into graphstore's format, keeping DGL's
assignment and every node and edge ID (``graphstore convert --from-dgl parts/NAME.json --out DIR``).

What is read, and how (see :mod:`graphstore.partition.dgl_format` for the file layouts):

- ``NAME.json``: read here (ranges of every type per partition, type IDs, file paths);
- ``partK/node_feat.dgl`` / ``edge_feat.dgl``: read here (DGL's tensor files; booleans come back as
  uint8, as DGL stores them; bfloat16 arrays as float32);
- ``partK/graph.dgl``: DGL's own graph serialization, read with DGL's ``dgl.load_graphs`` in a child
  interpreter: this one when DGL imports here, else ``dgl_python`` (e.g. a venv with DGL 2.1 and its
  torch). Only the partition's inner edges are taken from it (global source,
  destination and edge IDs); the halo is rebuilt by graphstore.

The output's IDs are DGL's partitioned IDs (per type as DGL numbers them), so data saved against the DGL
partitioning (embeddings by node ID, DGL's ``return_mapping``) keeps its meaning. Every partition owns the
same node and edge ranges as in DGL; the conversion checks it (DGL assigns each edge to its destination's
partition, as graphstore does). The whole graph passes through memory once, as in ``graphstore
partition``.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from collections import defaultdict

import numpy as np

from graphstore.dtypes import bfloat16_bits_to_float32
from graphstore.partition import PartitionResult, load_partition_book, partition_graph
from graphstore.partition.dgl_format import dgl_partition_book, read_dgl_config, read_dgl_tensors
from graphstore.partition.typed_input import edge_key, graph_from_typed_arrays, node_key, num_nodes_key

logger = logging.getLogger(__name__)

# Run under DGL: the inner edges of one partition's graph.dgl as global (src, dst, eid), saved as .npz.
READ_GRAPH = r"""
import sys
import numpy as np
import dgl

g = dgl.load_graphs(sys.argv[1])[0][0]
inner = g.edata["inner_edge"].bool()
src, dst = g.edges()
nid = g.ndata[dgl.NID]
np.savez(
    sys.argv[2],
    src=nid[src[inner]].numpy(),
    dst=nid[dst[inner]].numpy(),
    eid=g.edata[dgl.EID][inner].numpy(),
)
"""


def _dgl_importable() -> bool:
    try:
        import dgl  # noqa: F401
    except Exception:  # noqa: BLE001 - any failure means "not usable here"
        return False
    return True


def read_inner_edges(graph_path: str, dgl_python: str | None = None) -> dict[str, np.ndarray]:
    """The inner edges of one DGL partition graph file: ``{"src", "dst", "eid"}`` as global homogeneous
    IDs (int64).

    Args:
        graph_path: the partition's ``graph.dgl``.
        dgl_python: an interpreter with DGL (default: this one, when DGL imports here).

    Raises:
        FileNotFoundError: a missing file.
        RuntimeError: no way to run DGL, or DGL failing to read the file.
    """
    if not os.path.isfile(graph_path):
        raise FileNotFoundError(f"DGL partition graph {graph_path!r} not found")
    python = dgl_python or (sys.executable if _dgl_importable() else None)
    if python is None:
        raise RuntimeError(
            "reading DGL's graph.dgl needs DGL: install it beside graphstore, or pass --dgl-python with an "
            "interpreter that has it (e.g. a venv with dgl 2.1 and torch 2.2)"
        )
    with tempfile.TemporaryDirectory(prefix="graphstore-dgl-convert-") as tmp:
        out = os.path.join(tmp, "edges.npz")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.setdefault("DGLBACKEND", "pytorch")
        result = subprocess.run(
            [python, "-c", READ_GRAPH, graph_path, out], capture_output=True, text=True, env=env
        )
        if result.returncode != 0:
            raise RuntimeError(f"DGL could not read {graph_path!r}:\n{result.stderr[-2000:]}")
        with np.load(out) as data:
            return {name: data[name].astype(np.int64) for name in ("src", "dst", "eid")}


def _as_input_array(array: np.ndarray, dtype_name: str) -> np.ndarray:
    return bfloat16_bits_to_float32(array) if dtype_name == "bfloat16" else np.array(array)


def convert_dgl_partitioning(
    config_path: str,
    out_path: str,
    dgl_python: str | None = None,
    graph_name: str | None = None,
    overwrite: bool = False,
) -> PartitionResult:
    """Convert a DGL partitioning into graphstore's format (see the module docstring).

    Args:
        config_path: DGL's ``NAME.json``.
        out_path: the output folder (absent or empty unless ``overwrite``).
        dgl_python: an interpreter with DGL for reading ``graph.dgl`` (None: this one, with DGL).
        graph_name: the converted graph's name (default: DGL's).
        overwrite: replace a non-empty output folder.

    Returns:
        The :class:`~graphstore.partition.PartitionResult` of the written partitioning.

    Raises:
        FileNotFoundError, graphstore.errors.ConfigError, TypeError: unreadable DGL files.
        ValueError: a partitioning graphstore cannot hold with DGL's IDs (an edge owned by another
            partition than its destination's, missing or repeated edge IDs).
        RuntimeError: DGL is needed and not available.
    """
    config = read_dgl_config(config_path)
    book = dgl_partition_book(config, 0)
    schema = book.schema
    num_parts = config["num_parts"]
    src, dst, eid, node_rows, edge_rows = [], [], [], defaultdict(list), defaultdict(list)
    for k, paths in enumerate(config["parts"]):
        edges = read_inner_edges(paths["part_graph"], dgl_python)
        owners = np.asarray(book.nid2partid(edges["dst"]))
        if owners.size and not (owners == k).all():
            raise ValueError(
                f"partition {k} of {config_path!r} owns edges whose destination is in another partition; "
                "graphstore assigns every edge to its destination's partition"
            )
        src.append(edges["src"])
        dst.append(edges["dst"])
        eid.append(edges["eid"])
        for key, (array, dtype_name) in read_dgl_tensors(paths["node_feats"]).items():
            ntype, _, name = key.rpartition("/")
            node_rows[(ntype or schema.ntypes[0], name)].append(_as_input_array(array, dtype_name))
        for key, (array, dtype_name) in read_dgl_tensors(paths["edge_feats"]).items():
            etype, _, name = key.rpartition("/")
            canonical = schema.to_canonical_etype(etype or None)
            edge_rows[(canonical, name)].append(_as_input_array(array, dtype_name))
    src, dst, eid = np.concatenate(src), np.concatenate(dst), np.concatenate(eid)
    if eid.size != config["num_edges"] or not np.array_equal(np.sort(eid), np.arange(config["num_edges"])):
        raise ValueError(
            f"{config_path!r}: the partitions' inner edges do not hold every edge ID "
            f"0..{config['num_edges'] - 1} once"
        )
    arrays: dict[str, np.ndarray] = {}
    for ntype in schema.ntypes:
        arrays[num_nodes_key(ntype)] = np.asarray(book.num_nodes(ntype), dtype=np.int64)
    for (ntype, name), pieces in node_rows.items():
        arrays[node_key(ntype, name)] = np.concatenate(pieces)
    etype_ids, per_type_eid = (np.asarray(a) for a in book.map_to_per_etype(eid))
    _, src_per_type = (np.asarray(a) for a in book.map_to_per_ntype(src))
    _, dst_per_type = (np.asarray(a) for a in book.map_to_per_ntype(dst))
    for e, canonical in enumerate(schema.canonical_etypes):
        mine = np.flatnonzero(etype_ids == e)
        order = mine[np.argsort(per_type_eid[mine], kind="stable")]  # per-type edge ID order
        arrays[edge_key(canonical, "src")] = src_per_type[order]
        arrays[edge_key(canonical, "dst")] = dst_per_type[order]
    for (canonical, name), pieces in edge_rows.items():
        arrays[edge_key(canonical, name)] = np.concatenate(pieces)
    graph = graph_from_typed_arrays(arrays)
    assignment = np.concatenate(
        [np.asarray(book.nid2partid(np.arange(book.num_nodes(t), dtype=np.int64), t)) for t in schema.ntypes]
    )
    method = config["part_method"] if config["part_method"] in ("metis", "random") else "random"
    result = partition_graph(
        graph,
        graph_name or config["graph_name"],
        num_parts,
        out_path,
        part_method=method,
        overwrite=overwrite,
        assignment=assignment,
        keep_edge_ids=True,
    )
    converted = load_partition_book(result.config_path)
    if converted.node_map() != book.node_map() or converted.edge_map() != book.edge_map():
        raise ValueError(
            f"converting {config_path!r} changed the ID ranges (DGL {book.node_map()} / {book.edge_map()}, "
            f"converted {converted.node_map()} / {converted.edge_map()})"
        )
    logger.info(
        "converted %s: %d partitions, %d nodes, %d edges", config_path, num_parts, graph.num_nodes, eid.size
    )
    return result


__all__ = ["convert_dgl_partitioning", "read_inner_edges"]
