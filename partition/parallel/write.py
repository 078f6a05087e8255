"""Phase ``write`` of the parallel partitioner: each rank writes the folders of its partitions in the
partition format (docs/partition-format.md), and the config through the writer's one function.
"""

from __future__ import annotations

import os

import numpy as np

from graphstore.partition.chunked import ChunkedGraph
from graphstore.partition.format import EDGE_FEAT_DIR, NODE_FEAT_DIR, feature_file
from graphstore.partition.parallel.job import ParallelJob, RankScope
from graphstore.partition.parallel.relabel import ParallelLabels
from graphstore.partition.parallel.shuffle import RankShare
from graphstore.partition.relabel import csr_pieces
from graphstore.partition.writer import (
    convert_rows,
    partition_book,
    save_ids,
    write_npy,
    write_partition_config,
)
from graphstore.types import GraphSchema


def chunked_schema(graph: ChunkedGraph) -> GraphSchema:
    """The node and edge types of a chunked graph."""
    return GraphSchema(tuple(graph.ntypes), tuple(tuple(k.split(":")) for k in graph.etypes))


def write_parts(scope: RankScope, labels: ParallelLabels, share: RankShare, out_dir: str) -> list[dict]:
    """Write this rank's partitions (``partK/`` for ``k % size == rank``) into ``out_dir`` (collective).

    Returns:
        One ``{"path", "num_nodes", "num_edges", "num_out_edges"}`` entry per partition (every rank
        gets all of them).
    """
    col, job, graph = scope.col, scope.job, scope.graph
    schema = chunked_schema(graph)
    src_types, dst_types = graph.endpoint_types()
    num_e = len(graph.etypes)
    in_edges, out_edges, nodes = share.in_edges, share.out_edges, share.nodes
    in_part = labels.part_of_node(in_edges[:, 1])
    out_part = labels.part_of_node(out_edges[:, 0])
    node_part = labels.part_of_node(nodes[:, 0])
    # the partition of each in-edge of a type that has arrays, in the order of the arrays' rows
    type_part = {key: in_part[in_edges[:, 2] == graph.etypes.index(key)] for key, _ in share.edge_arrays}
    metas = []
    for k in range(job.num_parts):
        ns, ne = int(labels.node_bounds[k]), int(labels.node_bounds[k + 1])
        es, ee = int(labels.edge_bounds[k]), int(labels.edge_bounds[k + 1])
        mine = k % col.size == col.rank
        n_out = int(np.count_nonzero(out_part == k)) if mine else 0
        metas.append({"path": f"part{k}", "num_nodes": ne - ns, "num_edges": ee - es, "num_out_edges": n_out})
        if not mine:
            continue
        part_dir = os.path.join(out_dir, f"part{k}")
        os.makedirs(part_dir, exist_ok=True)
        counts = labels.ntype_counts[k]
        toff = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        ins = in_edges[in_part == k]
        in_pieces = csr_pieces(ins[:, 1] - ns, ins[:, 2], toff[dst_types], counts[dst_types], num_e)
        save_ids(os.path.join(part_dir, "in_indptr.npy"), np.concatenate(in_pieces))
        save_ids(os.path.join(part_dir, "in_src.npy"), ins[:, 0])
        outs = out_edges[out_part == k]
        out_pieces = csr_pieces(outs[:, 0] - ns, outs[:, 3], toff[src_types], counts[src_types], num_e)
        save_ids(os.path.join(part_dir, "out_indptr.npy"), np.concatenate(out_pieces))
        save_ids(os.path.join(part_dir, "out_dst.npy"), outs[:, 1])
        save_ids(os.path.join(part_dir, "out_eid.npy"), outs[:, 2])
        save_ids(os.path.join(part_dir, "orig_nid.npy"), nodes[node_part == k, 1])
        save_ids(os.path.join(part_dir, "orig_eid.npy"), ins[:, 3])
        for (ntype_name, name), (ids, rows) in share.node_arrays.items():
            spec = graph.node_data[ntype_name][name]
            path = feature_file(part_dir, NODE_FEAT_DIR, schema, ntype_name, name)
            _write_rows(path, rows[(ids >= ns) & (ids < ne)], spec["dtype"])
        for (key, name), rows in share.edge_arrays.items():
            path = feature_file(part_dir, EDGE_FEAT_DIR, schema, key, name)
            _write_rows(path, rows[type_part[key] == k], graph.edge_data[key][name]["dtype"])
    for meta in metas:
        meta["num_out_edges"] = int(col.comm.allreduce(meta["num_out_edges"]))
    return metas


def _write_rows(path: str, rows: np.ndarray, dtype_name: str) -> None:
    data = convert_rows(rows, dtype_name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_npy(path, data.dtype, data.shape, [data])


def write_config(
    out_dir: str,
    job: ParallelJob,
    graph: ChunkedGraph,
    labels: ParallelLabels,
    parts: list[dict],
    stats: dict,
) -> dict:
    """Write ``graph_name.json`` into ``out_dir`` (one rank's call; see
    :func:`~graphstore.partition.writer.write_partition_config`).

    Returns:
        The config as written.
    """

    def schemes(data: dict[str, dict[str, dict]]) -> dict[str, dict[str, dict]]:
        return {
            t: {n: {"dtype": s["dtype"], "shape": list(s["shape"])} for n, s in arrays.items()}
            for t, arrays in data.items()
        }

    ranks = [
        {
            "rank": r["rank"],
            "host": r["host"],
            "netns": r["netns"],
            "seconds": r["seconds"],
            "cpu_seconds": r["cpu_seconds"],
            "peak_rss_gib": {k: round(v / 2**30, 3) for k, v in r["peak_rss_bytes"].items()},
            "run_peak_rss_gib": round(r["run_peak_rss_bytes"] / 2**30, 3),
        }
        for r in stats["ranks"]
    ]
    return write_partition_config(
        out_dir,
        graph_name=job.graph_name,
        part_method=job.part_method,
        book=partition_book(labels, chunked_schema(graph)),
        nodes_per_type=graph.nodes_per_type,
        edges_per_type=graph.edges_per_type,
        node_feats=schemes(graph.node_data),
        edge_feats=schemes(graph.edge_data),
        parts=parts,
        extra={
            "balance": {"ntypes": job.balance_ntypes, "edges": bool(job.balance_edges)},
            "stats": {
                "edge_cut": stats["edge_cut"],
                "train_nodes": stats["part_train_nodes"],
                "seed": job.seed,
                "num_ranks": stats["num_ranks"],
                "ranks": ranks,
            },
        },
    )
