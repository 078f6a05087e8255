"""PyTorch Geometric training over a graphstore DistGraph: PyG's own loaders and layers, graphstore's stores.

The batches come from PyG's ``NodeLoader`` / ``LinkLoader`` over ``graphstore.compat.pyg``'s
``FeatureStore``, ``GraphStore`` and ``NeighborSampler`` (sampling on the partition servers); the model
is PyG's (``torch_geometric.nn.GraphSAGE``, ``to_hetero`` on a typed graph). The same command runs
standalone (every partition loaded in-process) or under ``graphstore launch`` (servers + trainers, DDP,
each trainer seeded with its ``node_split`` of the training nodes)::

    python examples/train_pyg.py --graph-name cora --part-config data/cora/cora.json
    graphstore launch --config configs/local-2part.yaml -- \\
        python examples/train_pyg.py --graph-name cora --part-config data/cora/cora.json

Tasks (``--task``):

- ``node``: node classification; on a typed graph (``--target-ntype paper``) a ``to_hetero`` GraphSAGE
  whose featureless node types get a learned ``torch.nn.Embedding`` row per node; ``--model mlp``: PyG's
  ``MLP`` on the target nodes' own features (the baseline a GNN must beat).
- ``link``: link prediction on a graph with one edge type: ``--holdout`` of the edges (both directions)
  are never sampled; the model (GraphSAGE + dot product) trains on the others with PyG's binary negative
  sampling and is scored by ROC AUC on the held-out edges against as many random pairs.

The last line printed is ``test accuracy: X.XXXX`` (node) or ``test auc: X.XXXX`` (link).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch_geometric.loader import LinkLoader, NodeLoader
from torch_geometric.nn import MLP, GraphSAGE, to_hetero
from torch_geometric.sampler import NegativeSampling

from graphstore.client import exit_client, node_split
from graphstore.client.training import (
    all_reduce_sum,
    feature_width,
    init_process_group,
    mask_nodes,
    open_graph,
    prepare_features,
    rank_and_world,
    set_threads,
)
from graphstore.compat.pyg import FeatureStore, GraphStore, NeighborSampler


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--graph-name", required=True)
    parser.add_argument("--part-config", help="NAME.json; required standalone")
    parser.add_argument("--task", default="node", choices=["node", "link"])
    parser.add_argument("--model", default="sage", choices=["sage", "mlp"])
    parser.add_argument("--target-ntype", help="typed graphs: the node type classified")
    parser.add_argument(
        "--fanouts", default="10,10", help="neighbors per hop, seeds' hop first (PyG's order)"
    )
    parser.add_argument("--eval-fanouts", default="-1,-1", help="neighbors per hop at evaluation")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--weight-decay", type=float, default=5e-4)
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument(
        "--feat-norm", default="row", choices=["none", "row"], help="row: L1-normalize features"
    )
    parser.add_argument("--holdout", type=float, default=0.1, help="link task: share of edges held out")
    parser.add_argument("--eval-max-nodes", type=int, default=None, help="evaluate at most this many nodes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-threads", type=int, default=None)
    args = parser.parse_args(argv)
    args.fanouts = [int(v) for v in args.fanouts.split(",")]
    args.eval_fanouts = [int(v) for v in args.eval_fanouts.split(",")]
    return args


class TypedInput(nn.Module):
    """Per node type: a linear projection of its features, or a learned embedding row per node."""

    def __init__(self, g, featured: dict[str, int], hidden: int):
        super().__init__()
        self.project = nn.ModuleDict({t: nn.Linear(width, hidden) for t, width in featured.items()})
        self.embed = nn.ModuleDict(
            {t: nn.Embedding(g.num_nodes(t), hidden) for t in g.ntypes if t not in featured}
        )
        for table in self.embed.values():
            nn.init.uniform_(table.weight, -0.1, 0.1)

    def forward(self, batch, norm: str) -> dict[str, torch.Tensor]:
        out = {}
        for ntype in batch.node_types:
            if ntype in self.project:
                out[ntype] = self.project[ntype](prepare_features(batch[ntype].x, norm))
            else:
                out[ntype] = self.embed[ntype](batch[ntype].n_id)
        return out


class HeteroSAGE(nn.Module):
    """``TypedInput`` then a ``to_hetero`` GraphSAGE; logits of the target type's seed nodes."""

    def __init__(
        self, g, batch, featured: dict[str, int], hidden: int, classes: int, layers: int, dropout: float
    ):
        super().__init__()
        self.input = TypedInput(g, featured, hidden)
        sage = GraphSAGE(hidden, hidden, layers, classes, dropout=dropout)
        self.gnn = to_hetero(sage, batch.metadata(), aggr="sum")

    def forward(self, batch, norm: str, target: str) -> torch.Tensor:
        out = self.gnn(self.input(batch, norm), batch.edge_index_dict)
        return out[target][: batch[target].batch_size]


def shard(nodes: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """This rank's share of the evaluated nodes."""
    return nodes[rank::world]


# ----- node classification ---------------------------------------------------------------------------


def run_node(args, g, rank: int, world: int, distributed: bool) -> float:
    typed = not g.is_homogeneous
    target = args.target_ntype
    if typed and target is None:
        raise ValueError(f"--target-ntype is required on a typed graph (node types: {g.ntypes})")
    fs, gs = FeatureStore(g), GraphStore(g)
    labels = g.nodes[target].data["label"][torch.arange(g.num_nodes(target))].reshape(-1)
    classes = int(labels.max()) + 1
    split_type = target if typed else "_N"
    train = node_split(
        g.nodes[target].data["train_mask"], g.get_partition_book(), ntype=split_type, force_even=True
    )
    test = (
        mask_nodes(g, "test_mask", args.eval_max_nodes, args.seed, target)
        if "test_mask" in g.nodes[target].data
        else torch.empty(0, dtype=torch.int64)
    )
    fanouts = args.fanouts if args.model == "sage" else [0]
    sampler = NeighborSampler(g, fanouts, seed=None)

    def loader(nodes, sampler, shuffle):
        input_nodes = (target, nodes) if typed else nodes
        return NodeLoader(
            (fs, gs),
            node_sampler=sampler,
            input_nodes=input_nodes,
            batch_size=args.batch_size,
            shuffle=shuffle,
        )

    train_loader = loader(train, sampler, True)
    featured = {}
    if typed:
        for ntype in g.ntypes:
            if "feat" in g.nodes[ntype].data:
                featured[ntype] = feature_width(g.nodes[ntype].data["feat"])
        first = next(iter(train_loader))
    in_feats = featured.get(target) if typed else feature_width(g.ndata["feat"])
    if args.model == "mlp":
        model = MLP([in_feats, args.hidden, classes], dropout=args.dropout)
    elif typed:
        model = HeteroSAGE(g, first, featured, args.hidden, classes, len(fanouts), args.dropout)
        with torch.no_grad():
            model(first, args.feat_norm, target)  # materializes to_hetero's lazy layers
    else:
        model = GraphSAGE(in_feats, args.hidden, len(fanouts), classes, dropout=args.dropout)
    if distributed:  # a batch may lack an edge type: its to_hetero weights then get no gradient
        model = nn.parallel.DistributedDataParallel(model, find_unused_parameters=typed)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)

    def logits(batch):
        if args.model == "mlp":
            store = batch[target] if typed else batch
            return model(prepare_features(store.x[: store.batch_size], args.feat_norm))
        if typed:
            return model(batch, args.feat_norm, target)
        out = model(prepare_features(batch.x, args.feat_norm), batch.edge_index)
        return out[: batch.batch_size]

    def seed_labels(batch):
        store = batch[target] if typed else batch
        return store.y[: store.batch_size].reshape(-1).long()

    for epoch in range(args.epochs):
        tick, total_loss, batches = time.perf_counter(), 0.0, 0
        model.train()
        for batch in train_loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(logits(batch), seed_labels(batch))
            loss.backward()
            optimizer.step()
            total_loss, batches = total_loss + loss.item(), batches + 1
        if rank == 0 and (epoch % 10 == 0 or epoch == args.epochs - 1):
            print(
                f"epoch {epoch}: loss {total_loss / max(1, batches):.4f}, {batches} batches, "
                f"{time.perf_counter() - tick:.2f} s",
                flush=True,
            )

    model.eval()
    eval_fanouts = args.eval_fanouts if args.model == "sage" else [0]
    correct = total = 0
    with torch.no_grad():
        for batch in loader(shard(test, rank, world), NeighborSampler(g, eval_fanouts), False):
            correct += int((logits(batch).argmax(-1) == seed_labels(batch)).sum())
            total += int(seed_labels(batch).numel())
    correct, total = all_reduce_sum([correct, total], torch.device("cpu"))
    return correct / max(1.0, total)


# ----- link prediction -----------------------------------------------------------------------------


def reverse_ids(src: torch.Tensor, dst: torch.Tensor, num_nodes: int, eids: torch.Tensor) -> torch.Tensor:
    """The IDs of the reverse edges (v, u) of ``eids`` that exist in the graph."""
    keys = src * num_nodes + dst
    order = torch.argsort(keys)
    wanted = dst[eids] * num_nodes + src[eids]
    pos = torch.searchsorted(keys[order], wanted).clamp(max=keys.numel() - 1)
    found = keys[order][pos] == wanted
    return order[pos][found]


def roc_auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """ROC AUC by ranks (Mann-Whitney U; ties get their average rank)."""
    order = torch.argsort(scores)
    ranks = torch.empty_like(scores, dtype=torch.float64)
    ranks[order] = torch.arange(1, scores.numel() + 1, dtype=torch.float64)
    sorted_scores = scores[order]
    _, inverse, counts = torch.unique_consecutive(sorted_scores, return_inverse=True, return_counts=True)
    mean_rank = torch.zeros(counts.numel(), dtype=torch.float64).index_add_(0, inverse, ranks[order]) / counts
    ranks[order] = mean_rank[inverse]
    pos = labels.bool()
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / max(1, n_pos * n_neg))


def run_link(args, g, rank: int, world: int, distributed: bool) -> float:
    if not g.is_homogeneous:
        raise ValueError("--task link runs on a graph with one node and edge type")
    fs, gs = FeatureStore(g), GraphStore(g)
    src, dst = gs.get_edge_index(edge_type=None, layout="coo")
    num_nodes, num_edges = g.num_nodes(), src.numel()
    # The same split on every trainer: a seeded permutation of the edges.
    perm = torch.randperm(num_edges, generator=torch.Generator().manual_seed(args.seed))
    held = perm[: int(args.holdout * num_edges)]
    excluded = torch.unique(torch.cat([held, reverse_ids(src, dst, num_nodes, held)]))
    keep = torch.ones(num_edges, dtype=torch.bool)
    keep[excluded] = False
    train_edges = torch.nonzero(keep, as_tuple=True)[0]
    train_edges = shard(
        train_edges[torch.randperm(train_edges.numel(), generator=torch.Generator().manual_seed(args.seed))],
        rank,
        world,
    )
    sampler = NeighborSampler(g, args.fanouts, exclude_edges=excluded)
    train_loader = LinkLoader(
        (fs, gs),
        link_sampler=sampler,
        # (edge type, index): PyG's form for remote stores; None is a homogeneous graph's edge type
        edge_label_index=(None, torch.stack([src[train_edges], dst[train_edges]])),
        neg_sampling=NegativeSampling("binary", amount=1),
        batch_size=args.batch_size,
        shuffle=True,
    )
    in_feats = feature_width(g.ndata["feat"])
    model = GraphSAGE(in_feats, args.hidden, len(args.fanouts), args.hidden, dropout=args.dropout)
    if distributed:
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    def scores(batch):
        h = model(prepare_features(batch.x, args.feat_norm), batch.edge_index)
        return (h[batch.edge_label_index[0]] * h[batch.edge_label_index[1]]).sum(-1)

    for epoch in range(args.epochs):
        tick, total_loss, batches = time.perf_counter(), 0.0, 0
        model.train()
        for batch in train_loader:
            optimizer.zero_grad()
            loss = F.binary_cross_entropy_with_logits(scores(batch), batch.edge_label.float())
            loss.backward()
            optimizer.step()
            total_loss, batches = total_loss + loss.item(), batches + 1
        if rank == 0:
            print(
                f"epoch {epoch}: loss {total_loss / max(1, batches):.4f}, {batches} batches, "
                f"{time.perf_counter() - tick:.2f} s",
                flush=True,
            )

    # Held-out edges (one direction each) against as many uniformly drawn pairs.
    generator = torch.Generator().manual_seed(args.seed + 1)
    neg = torch.randint(0, num_nodes, (2, held.numel()), generator=generator)
    pairs = torch.cat([torch.stack([src[held], dst[held]]), neg], dim=1)
    labels = torch.cat([torch.ones(held.numel()), torch.zeros(held.numel())])
    pairs, labels = pairs[:, rank::world], labels[rank::world]
    eval_loader = LinkLoader(
        (fs, gs),
        link_sampler=NeighborSampler(g, args.eval_fanouts, exclude_edges=excluded),
        edge_label_index=(None, pairs),
        edge_label=labels,
        batch_size=args.batch_size,
    )
    model.eval()
    all_scores, all_labels = [], []
    with torch.no_grad():
        for batch in eval_loader:
            all_scores.append(scores(batch))
            all_labels.append(batch.edge_label)
    local = torch.stack([torch.cat(all_scores), torch.cat(all_labels).float()])
    if distributed:
        gathered = [None] * world
        dist.all_gather_object(gathered, local)
        local = torch.cat(gathered, dim=1)
    return roc_auc(local[0].double(), local[1])


def main(argv=None) -> int:
    args = parse_args(argv)
    set_threads(args.num_threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    distributed = init_process_group(torch.device("cpu"))
    g = open_graph(args.graph_name, args.part_config)
    rank, world = rank_and_world()
    started = time.perf_counter()
    if rank == 0:
        print(
            f"graph {args.graph_name}: {g.num_nodes():,} nodes, {g.num_edges():,} edges, types {g.ntypes}; "
            f"{world} trainer(s), task {args.task}, model {args.model}",
            flush=True,
        )
    try:
        if args.task == "node":
            value = run_node(args, g, rank, world, distributed)
            line = f"test accuracy: {value:.4f}"
        else:
            value = run_link(args, g, rank, world, distributed)
            line = f"test auc: {value:.4f}"
        if rank == 0:
            print(f"time: {time.perf_counter() - started:.1f} s", flush=True)
            print(line, flush=True)
    finally:
        if distributed:
            dist.barrier()
        exit_client()
        if distributed:
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
