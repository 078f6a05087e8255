"""Distributed GraphSAGE node classification, written the way DGL 2.x's distributed example is
(``examples/distributed/graphsage/node_classification.py``), with only its imports changed to the
compat namespace.

``initialize(ip_config)`` -> ``init_process_group`` -> ``DistGraph`` -> ``node_split`` ->
``NeighborSampler`` + ``DistNodeDataLoader`` -> ``SAGEConv`` under DDP -> layer-wise inference of every
node into a ``DistTensor`` -> accuracy over all trainers. ``--standalone`` runs without servers.
Rank 0 writes the figures to ``--out`` as JSON.
"""

import argparse
import contextlib
import json
import socket
import time

import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F

import graphstore.compat.dgl as dgl
import graphstore.compat.dgl.nn.pytorch as dglnn


class DistSAGE(nn.Module):
    def __init__(self, in_feats, n_hidden, n_classes, n_layers, activation, dropout):
        super().__init__()
        self.n_layers = n_layers
        self.n_hidden = n_hidden
        self.n_classes = n_classes
        self.layers = nn.ModuleList()
        self.layers.append(dglnn.SAGEConv(in_feats, n_hidden, "mean"))
        for _ in range(1, n_layers - 1):
            self.layers.append(dglnn.SAGEConv(n_hidden, n_hidden, "mean"))
        self.layers.append(dglnn.SAGEConv(n_hidden, n_classes, "mean"))
        self.dropout = nn.Dropout(dropout)
        self.activation = activation

    def forward(self, blocks, x):
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks, strict=True)):
            h = layer(block, h)
            if i != len(self.layers) - 1:
                h = self.activation(h)
                h = self.dropout(h)
        return h

    def inference(self, g, x, batch_size, device):
        """Every node's output, one layer at a time over all neighbors."""
        nodes = dgl.distributed.node_split(np.arange(g.num_nodes()), g.get_partition_book(), force_even=True)
        y = dgl.distributed.DistTensor((g.num_nodes(), self.n_hidden), th.float32, "h", persistent=True)
        for i, layer in enumerate(self.layers):
            if i == len(self.layers) - 1:
                y = dgl.distributed.DistTensor(
                    (g.num_nodes(), self.n_classes), th.float32, "h_last", persistent=True
                )
            sampler = dgl.dataloading.NeighborSampler([-1])
            dataloader = dgl.dataloading.DistNodeDataLoader(
                g, nodes, sampler, batch_size=batch_size, shuffle=False, drop_last=False
            )
            for input_nodes, output_nodes, blocks in dataloader:
                block = blocks[0].to(device)
                h = x[input_nodes].to(device)
                h_dst = h[: block.number_of_dst_nodes()]
                h = layer(block, (h, h_dst))
                if i != len(self.layers) - 1:
                    h = self.activation(h)
                y[output_nodes] = h.cpu()
            x = y
            g.barrier()
        return y


def compute_acc(pred, labels):
    return (th.argmax(pred, dim=1) == labels).float().sum() / len(pred)


def evaluate(model, g, inputs, labels, val_nid, test_nid, batch_size, device):
    model.eval()
    with th.no_grad():
        pred = model.inference(g, inputs, batch_size, device)
    model.train()
    return compute_acc(pred[val_nid], labels[val_nid]), compute_acc(pred[test_nid], labels[test_nid])


def run(args, device, data):
    train_nid, val_nid, test_nid, in_feats, n_classes, g = data
    sampler = dgl.dataloading.NeighborSampler([int(fanout) for fanout in args.fan_out.split(",")])
    dataloader = dgl.dataloading.DistNodeDataLoader(
        g, train_nid, sampler, batch_size=args.batch_size, shuffle=True, drop_last=False
    )
    model = DistSAGE(in_feats, args.num_hidden, n_classes, args.num_layers, F.relu, args.dropout).to(device)
    if not args.standalone:
        model = th.nn.parallel.DistributedDataParallel(model)
    loss_fcn = nn.CrossEntropyLoss().to(device)
    optimizer = th.optim.Adam(model.parameters(), lr=args.lr)

    losses = []
    for epoch in range(args.num_epochs):
        tic = time.time()
        with model.join() if not args.standalone else contextlib.nullcontext():
            for step, (input_nodes, seeds, blocks) in enumerate(dataloader):
                batch_inputs = g.ndata["features"][input_nodes]
                batch_labels = g.ndata["labels"][seeds].long()
                blocks = [block.to(device) for block in blocks]
                batch_pred = model(blocks, batch_inputs.to(device))
                loss = loss_fcn(batch_pred, batch_labels.to(device))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
                if step % args.log_every == 0:
                    print(f"Part {g.rank()} | Epoch {epoch:05d} | Step {step:05d} | Loss {loss.item():.4f}")
        print(f"Part {g.rank()}, Epoch Time(s): {time.time() - tic:.4f}")

    module = model if args.standalone else model.module
    val_acc, test_acc = evaluate(
        module, g, g.ndata["features"], g.ndata["labels"], val_nid, test_nid, args.batch_size_eval, device
    )
    print(f"Part {g.rank()}, Val Acc {val_acc:.4f}, Test Acc {test_acc:.4f}")
    return {"val_acc": float(val_acc), "test_acc": float(test_acc), "losses": losses}


def main(args):
    print(socket.gethostname())
    if not args.standalone:
        dgl.distributed.initialize(args.ip_config, use_graphbolt=False)
        th.distributed.init_process_group(backend="gloo")
    th.manual_seed(args.seed)
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    print("rank:", g.rank())

    pb = g.get_partition_book()
    train_nid = dgl.distributed.node_split(g.ndata["train_mask"], pb, force_even=True)
    # As in DGL's example, every trainer evaluates every validation and test node.
    val_nid = th.nonzero(g.ndata["val_mask"][np.arange(g.num_nodes())], as_tuple=True)[0]
    test_nid = th.nonzero(g.ndata["test_mask"][np.arange(g.num_nodes())], as_tuple=True)[0]
    local_nid = pb.partid2nids(pb.partid).numpy()
    num_local = len(np.intersect1d(train_nid.numpy(), local_nid))
    print(
        f"part {g.rank()}, train: {len(train_nid)} (local: {num_local}), "
        f"val: {len(val_nid)}, test: {len(test_nid)}"
    )
    device = th.device("cpu")
    labels = g.ndata["labels"][np.arange(g.num_nodes())]
    n_classes = len(th.unique(labels[th.logical_not(th.isnan(labels.float()))]))
    in_feats = g.ndata["features"].shape[1]
    print(f"Number of classes: {n_classes}")

    result = run(args, device, (train_nid, val_nid, test_nid, in_feats, n_classes, g))
    if g.rank() == 0 and args.out:
        with open(args.out, "w") as handle:
            json.dump({**result, "num_train": len(train_nid), "world_size": _world(args)}, handle)
    if not args.standalone:
        g.barrier()
        dgl.distributed.exit_client()


def _world(args):
    return 1 if args.standalone else th.distributed.get_world_size()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="GCN")
    parser.add_argument("--graph_name", type=str, help="graph name")
    parser.add_argument("--ip_config", type=str, help="The file for IP configuration")
    parser.add_argument("--part_config", type=str, help="The path to the partition config file")
    parser.add_argument("--n_classes", type=int, default=0, help="the number of classes")
    parser.add_argument("--num_epochs", type=int, default=20)
    parser.add_argument("--num_hidden", type=int, default=16)
    parser.add_argument("--num_layers", type=int, default=2)
    parser.add_argument("--fan_out", type=str, default="10,25")
    parser.add_argument("--batch_size", type=int, default=1000)
    parser.add_argument("--batch_size_eval", type=int, default=100000)
    parser.add_argument("--log_every", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--standalone", action="store_true", help="run in the standalone mode")
    parser.add_argument("--out", type=str, default="", help="rank 0 writes its figures here (JSON)")
    main(parser.parse_args())
