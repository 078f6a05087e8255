"""A distributed GraphSAGE trainer written the way DGL's distributed examples are, whose only change for
graphstore is its imports (``graphstore.compat.dgl`` in place of ``dgl``).

The flow is DGL's: ``dgl.distributed.initialize(ip_config)`` -> ``torch.distributed.init_process_group``
-> ``DistGraph(graph_name, part_config=...)`` -> ``node_split(g.ndata['train_mask'], pb,
force_even=True)`` -> ``NeighborSampler`` + ``DistNodeDataLoader`` -> ``blocks[0].srcdata[dgl.NID]`` ->
``SAGEConv`` layers under DistributedDataParallel with ``model.join()`` -> layer-wise inference of every
node into persistent DistTensors, with ``g.barrier()`` between layers.

The end-to-end test runs it under ``graphstore launch`` and reads ``OUT/result-RANK.json``.
"""

import argparse
import json
import os
import time

import numpy as np
import torch as th
import torch.distributed
import torch.nn as nn
import torch.nn.functional as F

import graphstore.compat.dgl as dgl
from graphstore.compat.dgl.nn.pytorch import SAGEConv


class DistSAGE(nn.Module):
    """GraphSAGE over sampled blocks, plus exact layer-wise inference over the whole graph."""

    def __init__(self, in_feats, n_hidden, n_classes, n_layers, dropout):
        super().__init__()
        self.n_hidden = n_hidden
        self.n_classes = n_classes
        widths = [in_feats] + [n_hidden] * (n_layers - 1) + [n_classes]
        self.layers = nn.ModuleList(SAGEConv(widths[i], widths[i + 1], "mean") for i in range(n_layers))
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, x):
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks, strict=True)):
            h = layer(block, h)
            if i != len(self.layers) - 1:
                h = self.dropout(F.relu(h))
        return h

    def inference(self, g, x, batch_size, device):
        """Every node's output, one layer at a time; each trainer computes its share of the nodes."""
        nodes = dgl.distributed.node_split(np.arange(g.num_nodes()), g.get_partition_book(), force_even=True)
        for i, layer in enumerate(self.layers):
            last = i == len(self.layers) - 1
            width = self.n_classes if last else self.n_hidden
            y = dgl.distributed.DistTensor(
                (g.num_nodes(), width), th.float32, "h_last" if last else f"h{i}", persistent=True
            )
            sampler = dgl.dataloading.MultiLayerFullNeighborSampler(1)
            loader = dgl.dataloading.DistNodeDataLoader(
                g, nodes, sampler, batch_size=batch_size, shuffle=False, drop_last=False
            )
            for input_nodes, output_nodes, blocks in loader:
                block = blocks[0].to(device)
                h = x[input_nodes].to(device)
                h_dst = h[: block.number_of_dst_nodes()]
                h = layer(block, (h, h_dst))
                if not last:
                    h = F.relu(h)
                y[output_nodes] = h.cpu()
            x = y
            g.barrier()
        return y, nodes


def accuracy_counts(logits, labels):
    return int((th.argmax(logits, dim=1) == labels).sum()), int(labels.shape[0])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--graph-name", required=True)
    parser.add_argument("--ip-config", required=True)
    parser.add_argument("--part-config", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--fanouts", default="10,10")
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()

    dgl.distributed.initialize(args.ip_config)
    th.distributed.init_process_group(backend="gloo")
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    rank = g.rank()
    pb = g.get_partition_book()
    train_nid = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True)
    val_nid = dgl.distributed.node_split(g.ndata["val_mask"], pb, force_even=True)
    test_nid = dgl.distributed.node_split(g.ndata["test_mask"], pb, force_even=True)
    device = th.device("cpu")

    labels_all = g.ndata["label"][np.arange(g.num_nodes())]
    n_classes = int(labels_all.max()) + 1
    in_feats = g.ndata["feat"].shape[1]

    sampler = dgl.dataloading.NeighborSampler([int(f) for f in args.fanouts.split(",")])
    dataloader = dgl.dataloading.DistNodeDataLoader(
        g, train_nid, sampler, batch_size=args.batch_size, shuffle=True, drop_last=False
    )
    model = DistSAGE(in_feats, args.hidden, n_classes, 2, 0.5).to(device)
    model = th.nn.parallel.DistributedDataParallel(model)
    optimizer = th.optim.Adam(model.parameters(), lr=args.lr)

    losses = []
    ids_consistent = True
    batches = 0
    for epoch in range(args.epochs):
        tic = time.time()
        with model.join():
            for input_nodes, seeds, blocks in dataloader:
                ids_consistent &= bool(th.equal(blocks[0].srcdata[dgl.NID], input_nodes))
                ids_consistent &= bool(th.equal(blocks[-1].dstdata[dgl.NID], seeds))
                batch_inputs = g.ndata["feat"][input_nodes].float()
                batch_labels = g.ndata["label"][seeds].long()
                batch_pred = model(blocks, batch_inputs)
                loss = F.cross_entropy(batch_pred, batch_labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(float(loss))
                batches += 1
        print(f"rank {rank} epoch {epoch}: loss {losses[-1]:.4f}, {time.time() - tic:.2f} s", flush=True)

    model.eval()
    with th.no_grad():
        pred, inferred_nodes = model.module.inference(g, g.ndata["feat"], 256, device)
    counts = []
    for nids in (val_nid, test_nid):
        counts.extend(accuracy_counts(pred[nids], labels_all[nids]))
    local_rows = pred[inferred_nodes]
    counts.append(int((local_rows.abs().sum(dim=1) > 0).sum()))
    counts.append(int(inferred_nodes.shape[0]))
    totals = th.tensor(counts, dtype=th.int64)
    th.distributed.all_reduce(totals)
    val_acc = float(totals[0]) / max(int(totals[1]), 1)
    test_acc = float(totals[2]) / max(int(totals[3]), 1)
    result = {
        "rank": rank,
        "world_size": th.distributed.get_world_size(),
        "train_nid": train_nid.tolist(),
        "batches": batches,
        "losses": losses,
        "ids_consistent": ids_consistent,
        "val_acc": val_acc,
        "test_acc": test_acc,
        "inferred_rows_filled": int(totals[4]),
        "inferred_rows": int(totals[5]),
        "num_nodes": g.num_nodes(),
        "num_classes": n_classes,
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"result-{rank}.json"), "w") as handle:
        json.dump(result, handle)
    print(f"rank {rank}: val acc {val_acc:.4f}, test acc {test_acc:.4f}", flush=True)
    g.barrier()
    dgl.distributed.exit_client()


if __name__ == "__main__":
    main()
