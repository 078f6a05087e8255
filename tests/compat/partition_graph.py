"""Partition a graph for the compat examples, written the way DGL's distributed partition script is
(``dgl.distributed.partition_graph(g, graph_name, num_parts, out_path, balance_ntypes=..., ...)``) with
only its imports changed.

The input is an ``.npz`` with ``src``, ``dst``, ``feat``, ``label`` and the three masks (Cora's
format). As DGL's dataset loaders do, the features are row-normalized and named ``features`` /
``labels``. For link prediction, ``--heldout-fraction`` keeps a share of the undirected edges out of
the partitioned graph and writes them (in the partitioned node IDs) to ``OUT/heldout.npy``; the ID of
each partitioned edge's reverse goes to ``OUT/reverse_eids.npy`` (what ``exclude='reverse_id'`` needs).
"""

import argparse
import os
import time

import numpy as np
import torch as th

import graphstore.compat.dgl as dgl


def load_graph(path):
    data = np.load(path)
    features = th.from_numpy(data["feat"].astype(np.float32))
    features = features / features.sum(1, keepdim=True).clamp(min=1)
    graph = {
        "src": data["src"],
        "dst": data["dst"],
        "features": features,
        "labels": th.from_numpy(data["label"]),
    }
    for mask in ("train_mask", "val_mask", "test_mask"):
        graph[mask] = th.from_numpy(data[mask])
    return graph


def hold_out_edges(graph, fraction, seed):
    """Remove ``fraction`` of the undirected edges (both directions); returns the held-out pairs."""
    src, dst = np.asarray(graph["src"]), np.asarray(graph["dst"])
    pairs = np.unique(np.stack([np.minimum(src, dst), np.maximum(src, dst)], 1)[src != dst], axis=0)
    rng = np.random.default_rng(seed)
    heldout = pairs[rng.random(len(pairs)) < fraction]
    num_nodes = len(graph["labels"])
    removed = np.isin(
        np.minimum(src, dst) * num_nodes + np.maximum(src, dst), heldout[:, 0] * num_nodes + heldout[:, 1]
    )
    graph["src"], graph["dst"] = src[~removed], dst[~removed]
    return heldout


def to_bidirected(graph):
    """Every edge in both directions, once (``dgl.to_bidirected``)."""
    src, dst = np.asarray(graph["src"]), np.asarray(graph["dst"])
    pairs = np.unique(np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])], 1), axis=0)
    graph["src"], graph["dst"] = pairs[:, 0], pairs[:, 1]


def reverse_edge_ids(src, dst, num_nodes):
    """For every edge, the ID of the edge going the other way."""
    key = src.astype(np.int64) * num_nodes + dst
    order = np.argsort(key)
    wanted = dst.astype(np.int64) * num_nodes + src
    position = np.minimum(np.searchsorted(key[order], wanted), len(key) - 1)
    if not np.array_equal(key[order][position], wanted):
        raise ValueError("some edges have no reverse edge; pass --to_bidirected")
    return order[position]


def main():
    parser = argparse.ArgumentParser(description="Partition a graph")
    parser.add_argument("--dataset", required=True, help="the graph's .npz")
    parser.add_argument("--graph_name", required=True)
    parser.add_argument("--num_parts", type=int, default=2)
    parser.add_argument("--part_method", default="metis")
    parser.add_argument("--balance_train", action="store_true", help="balance the training nodes")
    parser.add_argument("--balance_edges", action="store_true")
    parser.add_argument("--to_bidirected", action="store_true", help="add every edge's reverse")
    parser.add_argument("--heldout_fraction", type=float, default=0.0)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()

    start = time.time()
    g = load_graph(args.dataset)
    num_nodes = len(g["labels"])
    if args.to_bidirected:
        to_bidirected(g)
    heldout = hold_out_edges(g, args.heldout_fraction, seed=0) if args.heldout_fraction > 0 else None
    reverse = reverse_edge_ids(g["src"], g["dst"], num_nodes)
    print(f"load {args.dataset} takes {time.time() - start:.3f} seconds")
    print(f"|V|={num_nodes}, |E|={len(g['src'])}")
    orig_nids, orig_eids = dgl.distributed.partition_graph(
        g,
        args.graph_name,
        args.num_parts,
        args.output,
        part_method=args.part_method,
        balance_ntypes=g["train_mask"] if args.balance_train else None,
        balance_edges=args.balance_edges,
        return_mapping=True,
    )
    new_nid = th.empty_like(orig_nids)
    new_nid[orig_nids] = th.arange(len(orig_nids))
    new_eid = th.empty_like(orig_eids)
    new_eid[orig_eids] = th.arange(len(orig_eids))
    np.save(os.path.join(args.output, "reverse_eids.npy"), new_eid[th.from_numpy(reverse)][orig_eids].numpy())
    if heldout is not None:
        np.save(os.path.join(args.output, "heldout.npy"), new_nid[th.from_numpy(heldout)].numpy())
    print(f"partitioned into {args.num_parts} parts in {time.time() - start:.3f} seconds: {args.output}")


if __name__ == "__main__":
    main()
