"""Typed node classification with an R-GCN, written the way DGL 2.x's distributed example is
(``examples/distributed/rgcn/node_classification.py``), importing only ``graphstore.compat.dgl``.

Papers are classified from their features and from the relations around them. Each relational layer is
``dgl.nn.HeteroGraphConv`` of ``dgl.nn.GraphConv(norm="right", weight=False, bias=False)`` per relation,
the relations' weights made by ``dgl.nn.WeightBasis`` and passed through ``mod_kwargs``, plus a self
loop. Node types without features get a learnable ``DistEmbedding`` row per node, trained with
``dgl.distributed.optim.SparseAdam``; paper features go through a linear projection. ``--model mlp`` is
the features-only baseline (paper features, no graph).

Changing its two import lines to ``import dgl`` / ``from dgl import DGLGraph, nn as dglnn`` runs it on
DGL (``bench/dgl/script_side_by_side.py`` does exactly that). Standalone (``DGL_DIST_MODE=standalone``,
one partition) or under ``graphstore launch``::

    graphstore generate --schema mag --num-nodes 20000 --out mag.npz
    graphstore partition --graph mag.npz --name mag --num-parts 2 --out data/mag
    graphstore launch --config cluster.yaml -- python examples/dgl/rgcn_node_classification.py \\
        --graph_name mag --ip_config ip_config.txt --part_config data/mag/mag.json

Rank 0 prints (and with ``--out`` writes) one JSON line: epoch times, validation and test accuracy.
"""

import argparse
import json
import os
import socket
import time

import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F

import graphstore.compat.dgl as dgl
from graphstore.compat.dgl import DGLGraph
from graphstore.compat.dgl import nn as dglnn


class RelGraphConvLayer(nn.Module):
    """One relational layer: per relation a right-normalized sum of neighbours times that relation's
    weight (from a basis), summed over relations, plus a self loop and a bias."""

    def __init__(self, in_feat, out_feat, rel_names, num_bases, activation=None, dropout=0.0):
        super().__init__()
        self.rel_names = rel_names
        self.conv = dglnn.HeteroGraphConv(
            {
                rel: dglnn.GraphConv(in_feat, out_feat, norm="right", weight=False, bias=False)
                for rel in rel_names
            }
        )
        self.basis = dglnn.WeightBasis((in_feat, out_feat), num_bases, len(rel_names))
        self.loop_weight = nn.Parameter(th.empty(in_feat, out_feat))
        nn.init.xavier_uniform_(self.loop_weight, gain=nn.init.calculate_gain("relu"))
        self.h_bias = nn.Parameter(th.zeros(out_feat))
        self.activation = activation
        self.dropout = nn.Dropout(dropout)

    def forward(self, g: DGLGraph, inputs):
        g = g.local_var()
        weight = self.basis()
        wdict = {
            rel: {"weight": w.squeeze(0)}
            for rel, w in zip(self.rel_names, th.split(weight, 1, dim=0), strict=True)
        }
        if g.is_block:
            inputs_dst = {k: v[: g.number_of_dst_nodes(k)] for k, v in inputs.items()}
        else:
            inputs_dst = inputs
        hs = self.conv(g, inputs, mod_kwargs=wdict)
        out = {}
        for ntype, h in hs.items():
            h = h + inputs_dst[ntype] @ self.loop_weight + self.h_bias
            if self.activation is not None:
                h = self.activation(h)
            out[ntype] = self.dropout(h)
        return out


class EntityClassify(nn.Module):
    def __init__(self, h_dim, out_dim, rel_names, num_bases, num_layers, dropout):
        super().__init__()
        self.layers = nn.ModuleList()
        for i in range(num_layers):
            last = i == num_layers - 1
            self.layers.append(
                RelGraphConvLayer(
                    h_dim,
                    out_dim if last else h_dim,
                    rel_names,
                    num_bases,
                    activation=None if last else F.relu,
                    dropout=0.0 if last else dropout,
                )
            )

    def forward(self, blocks, feats):
        h = feats
        for layer, block in zip(self.layers, blocks, strict=True):
            h = layer(block, h)
        return h


def init_emb(shape, dtype):
    arr = th.zeros(shape, dtype=dtype)
    nn.init.uniform_(arr, -1.0, 1.0)
    return arr


class DistEmbedLayer(nn.Module):
    """Input rows per node type: a projection of the features where a type has them, else a
    ``DistEmbedding`` row per node."""

    def __init__(self, g, embed_size, feat_name, embed_name="node_emb"):
        super().__init__()
        self.g = g
        self.feat_name = feat_name
        self.node_projs = nn.ModuleDict()
        self.node_embeds = {}
        for ntype in g.ntypes:
            if feat_name in g.nodes[ntype].data:
                self.node_projs[ntype] = nn.Linear(g.nodes[ntype].data[feat_name].shape[1], embed_size)
            else:
                self.node_embeds[ntype] = dgl.distributed.DistEmbedding(
                    g.num_nodes(ntype),
                    embed_size,
                    embed_name + "_" + ntype,
                    init_emb,
                    g.get_node_partition_policy(ntype),
                )

    def forward(self, node_ids):
        embeds = {}
        for ntype, ids in node_ids.items():
            if ntype in self.node_projs:
                embeds[ntype] = self.node_projs[ntype](self.g.nodes[ntype].data[self.feat_name][ids])
            else:
                embeds[ntype] = self.node_embeds[ntype](ids)
        return embeds


class MLP(nn.Module):
    def __init__(self, in_dim, h_dim, out_dim, dropout):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_dim, h_dim), nn.ReLU(), nn.Dropout(dropout), nn.Linear(h_dim, out_dim)
        )

    def forward(self, x):
        return self.net(x)


def predict(args, g, model, embed_layer, loader):
    """Predicted labels of every seed of ``loader``: ``(seeds, predictions)``."""
    seeds_all, preds = [], []
    with th.no_grad():
        for input_nodes, seeds, blocks in loader:
            seeds = seeds["paper"]
            if args.model == "mlp":
                logits = model(g.nodes["paper"].data[args.feat_name][seeds])
            else:
                logits = model(blocks, embed_layer(input_nodes))["paper"]
            seeds_all.append(seeds)
            preds.append(logits.argmax(dim=1))
    if not seeds_all:
        return th.empty(0, dtype=th.int64), th.empty(0, dtype=th.int64)
    return th.cat(seeds_all), th.cat(preds)


def evaluate(args, g, model, embed_layer, labels, loaders, all_nids):
    model.eval()
    embed_layer.eval()
    results = dgl.distributed.DistTensor(
        (g.num_nodes("paper"),),
        th.long,
        "rgcn_results",
        persistent=True,
        part_policy=g.get_node_partition_policy("paper"),
    )
    for loader in loaders:
        seeds, pred = predict(args, g, model, embed_layer, loader)
        if len(seeds):
            results[seeds] = pred
    g.barrier()
    accs = [float((results[nids] == labels[nids]).float().mean()) for nids in all_nids]
    g.barrier()
    model.train()
    embed_layer.train()
    return accs


def run(args, g, data):
    num_classes, train_nid, val_nid, test_nid, labels, all_val_nid, all_test_nid = data
    fanouts = [int(f) for f in args.fan_out.split(",")]
    sampler = dgl.dataloading.MultiLayerNeighborSampler(fanouts)
    dataloader = dgl.distributed.DistNodeDataLoader(
        g, {"paper": train_nid}, sampler, batch_size=args.batch_size, shuffle=True, drop_last=False
    )
    eval_loaders = [
        dgl.distributed.DistNodeDataLoader(
            g, {"paper": nids}, sampler, batch_size=args.eval_batch_size, shuffle=False, drop_last=False
        )
        for nids in (val_nid, test_nid)
    ]
    embed_layer = DistEmbedLayer(g, args.n_hidden, args.feat_name)
    if args.model == "mlp":
        in_dim = g.nodes["paper"].data[args.feat_name].shape[1]
        model = MLP(in_dim, args.n_hidden, num_classes, args.dropout)
    else:
        model = EntityClassify(
            args.n_hidden, num_classes, g.etypes, args.n_bases, args.n_layers, args.dropout
        )
    dense_params = list(model.parameters()) + list(embed_layer.node_projs.parameters())
    if not args.standalone:
        model = th.nn.parallel.DistributedDataParallel(model)
        if args.model != "mlp":
            embed_layer = th.nn.parallel.DistributedDataParallel(embed_layer)
    embeds = (
        embed_layer.module.node_embeds
        if not args.standalone and args.model != "mlp"
        else (embed_layer.node_embeds)
    )
    emb_optimizer = dgl.distributed.optim.SparseAdam(list(embeds.values()), lr=args.sparse_lr)
    optimizer = th.optim.Adam(dense_params, lr=args.lr)
    epoch_times = []
    for epoch in range(args.num_epochs):
        tic = time.time()
        for step, (input_nodes, seeds, blocks) in enumerate(dataloader):
            seeds = seeds["paper"]
            label = labels[seeds]
            if args.model == "mlp":
                logits = model(g.nodes["paper"].data[args.feat_name][seeds])
            else:
                logits = model(blocks, embed_layer(input_nodes))["paper"]
            loss = F.cross_entropy(logits, label)
            optimizer.zero_grad()
            emb_optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if args.model != "mlp":
                emb_optimizer.step()
            if step % args.log_every == 0:
                acc = (logits.argmax(1) == label).float().mean().item()
                print(
                    f"[{g.rank()}] Epoch {epoch:03d} | Step {step:04d} | Loss {loss.item():.4f} | "
                    f"Train acc {acc:.4f}"
                )
        epoch_times.append(time.time() - tic)
        print(f"[{g.rank()}] Epoch Time(s): {epoch_times[-1]:.4f}")
        g.barrier()
    val_acc, test_acc = evaluate(
        args, g, model, embed_layer, labels, eval_loaders, (all_val_nid, all_test_nid)
    )
    return {"epoch_times": epoch_times, "val_acc": val_acc, "test_acc": test_acc}


def main(args):
    dgl.distributed.initialize(args.ip_config)
    if args.standalone:
        # The sparse optimizer exchanges gradients through a process group, of one trainer here.
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        th.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    else:
        th.distributed.init_process_group(backend="gloo")
    th.manual_seed(args.seed)
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    pb = g.get_partition_book()
    paper = g.nodes["paper"].data
    train_nid = dgl.distributed.node_split(paper["train_mask"], pb, ntype="paper", force_even=True)
    val_nid = dgl.distributed.node_split(paper["val_mask"], pb, ntype="paper", force_even=True)
    test_nid = dgl.distributed.node_split(paper["test_mask"], pb, ntype="paper", force_even=True)
    all_papers = np.arange(g.num_nodes("paper"))
    labels = paper[args.label_name][all_papers].long()
    all_val_nid = th.nonzero(paper["val_mask"][all_papers], as_tuple=True)[0]
    all_test_nid = th.nonzero(paper["test_mask"][all_papers], as_tuple=True)[0]
    num_classes = int(labels.max()) + 1
    print(
        f"rank {g.rank()}: train {len(train_nid)}, val {len(val_nid)}, test {len(test_nid)}, "
        f"classes {num_classes}"
    )
    result = run(args, g, (num_classes, train_nid, val_nid, test_nid, labels, all_val_nid, all_test_nid))
    if g.rank() == 0:
        result.update(model=args.model, trainers=1 if args.standalone else th.distributed.get_world_size())
        print(json.dumps(result))
        if args.out:
            with open(args.out, "w") as handle:
                json.dump(result, handle)
    if not args.standalone:
        g._client.barrier()
        dgl.distributed.exit_client()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="RGCN")
    parser.add_argument("--graph_name", type=str, help="graph name")
    parser.add_argument("--ip_config", type=str, help="the file of IP configuration")
    parser.add_argument("--part_config", type=str, help="the partition config file")
    parser.add_argument("--model", choices=("rgcn", "mlp"), default="rgcn")
    parser.add_argument("--num_epochs", type=int, default=5)
    parser.add_argument("--n_hidden", type=int, default=64)
    parser.add_argument("--n_bases", type=int, default=2)
    parser.add_argument("--n_layers", type=int, default=2)
    parser.add_argument("--dropout", type=float, default=0.3)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--sparse_lr", type=float, default=0.05)
    parser.add_argument("--fan_out", type=str, default="10,10")
    parser.add_argument("--batch_size", type=int, default=256)
    parser.add_argument("--eval_batch_size", type=int, default=512)
    parser.add_argument("--feat_name", type=str, default="feat")
    parser.add_argument("--label_name", type=str, default="label")
    parser.add_argument("--log_every", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=str, default="")
    parser.add_argument("--standalone", action="store_true", help="run without servers (one partition)")
    args = parser.parse_args()
    if args.standalone:
        os.environ.setdefault("DGL_DIST_MODE", "standalone")
    main(args)
