"""Unsupervised GraphSAGE (link prediction), written the way DGL 2.x's distributed example is
(``examples/distributed/graphsage/node_classification_unsupervised.py``), with only its imports changed
to the compat namespace.

``DistEdgeDataLoader`` with a uniform negative sampler yields positive and negative pair graphs; the
model scores them with ``u_dot_v`` inside ``local_scope()`` and trains on a binary cross-entropy. Then
every node's embedding is computed layer by layer into a ``DistTensor`` and rank 0 evaluates it:

- link prediction: held-out edges (``--heldout``, partitioned node IDs) against as many random pairs,
  scored by the embeddings' dot product: the AUC;
- node classification: a logistic regression on the training nodes' embeddings, accuracy on the test
  nodes, next to the same regression on random embeddings of the same width (the baseline).

As DGL's example ends, the trainers meet at ``g._client.barrier()`` and rank 0 ``torch.save``-s the
embeddings' ``DistTensor`` (its name, shape and dtype, as DGL pickles it), loads it back with
``torch.load`` (a handle on the same rows) and scores the reloaded embeddings too (``*_reloaded``).

Rank 0 writes the figures to ``--out`` as JSON.
"""

import argparse
import contextlib
import json
import os
import time

import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F

import graphstore.compat.dgl as dgl
import graphstore.compat.dgl.function as fn
import graphstore.compat.dgl.nn.pytorch as dglnn


class DistSAGE(nn.Module):
    def __init__(self, in_feats, n_hidden, n_layers, activation, dropout):
        super().__init__()
        self.n_hidden = n_hidden
        self.layers = nn.ModuleList(
            dglnn.SAGEConv(in_feats if i == 0 else n_hidden, n_hidden, "mean") for i in range(n_layers)
        )
        self.dropout = nn.Dropout(dropout)
        self.activation = activation

    def forward(self, blocks, x):
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks, strict=True)):
            h = layer(block, h)
            if i != len(self.layers) - 1:
                h = self.dropout(self.activation(h))
        return h

    def inference(self, g, x, batch_size, device):
        nodes = dgl.distributed.node_split(np.arange(g.num_nodes()), g.get_partition_book(), force_even=True)
        for i, layer in enumerate(self.layers):
            y = dgl.distributed.DistTensor(
                (g.num_nodes(), self.n_hidden), th.float32, f"emb{i}", persistent=True
            )
            sampler = dgl.dataloading.MultiLayerFullNeighborSampler(1)
            dataloader = dgl.dataloading.DistNodeDataLoader(g, nodes, sampler, batch_size=batch_size)
            for input_nodes, output_nodes, blocks in dataloader:
                block = blocks[0].to(device)
                h = x[input_nodes].to(device)
                h = layer(block, (h, h[: block.num_dst_nodes()]))
                if i != len(self.layers) - 1:
                    h = self.activation(h)
                y[output_nodes] = h.cpu()
            x = y
            g.barrier()
        return y


class CrossEntropyLoss(nn.Module):
    def forward(self, block_outputs, pos_graph, neg_graph):
        with pos_graph.local_scope():
            pos_graph.ndata["h"] = block_outputs
            pos_graph.apply_edges(fn.u_dot_v("h", "h", "score"))
            pos_score = pos_graph.edata["score"]
        with neg_graph.local_scope():
            neg_graph.ndata["h"] = block_outputs
            neg_graph.apply_edges(fn.u_dot_v("h", "h", "score"))
            neg_score = neg_graph.edata["score"]
        score = th.cat([pos_score, neg_score])
        label = th.cat([th.ones_like(pos_score), th.zeros_like(neg_score)]).long()
        return F.binary_cross_entropy_with_logits(score, label.float())


def auc(pos, neg):
    """Probability that a positive pair scores above a negative one (ties count half)."""
    greater = (pos.unsqueeze(1) > neg.unsqueeze(0)).float().mean()
    equal = (pos.unsqueeze(1) == neg.unsqueeze(0)).float().mean()
    return float(greater + 0.5 * equal)


def logistic_regression_accuracy(emb, labels, train_nid, test_nid, seed=0):
    """Test accuracy of a full-batch logistic regression on standardized embeddings."""
    th.manual_seed(seed)
    emb = (emb - emb[train_nid].mean(0)) / emb[train_nid].std(0).clamp(min=1e-6)
    classifier = nn.Linear(emb.shape[1], int(labels.max()) + 1)
    optimizer = th.optim.Adam(classifier.parameters(), lr=0.01, weight_decay=1e-3)
    for _ in range(300):
        optimizer.zero_grad()
        F.cross_entropy(classifier(emb[train_nid]), labels[train_nid]).backward()
        optimizer.step()
    return float((classifier(emb[test_nid]).argmax(1) == labels[test_nid]).float().mean())


def evaluate(args, emb, g):
    labels = g.ndata["labels"][np.arange(g.num_nodes())].long()
    train_nid = th.nonzero(g.ndata["train_mask"][np.arange(g.num_nodes())], as_tuple=True)[0]
    test_nid = th.nonzero(g.ndata["test_mask"][np.arange(g.num_nodes())], as_tuple=True)[0]
    random_emb = th.randn(emb.shape, generator=th.Generator().manual_seed(1))
    result = {
        "nc_test_acc": logistic_regression_accuracy(emb, labels, train_nid, test_nid),
        "nc_test_acc_random_embeddings": logistic_regression_accuracy(
            random_emb, labels, train_nid, test_nid
        ),
    }
    if args.heldout:
        pos = th.from_numpy(np.load(args.heldout))
        neg = th.randint(0, g.num_nodes(), pos.shape, generator=th.Generator().manual_seed(2))
        score = lambda pairs, e: (e[pairs[:, 0]] * e[pairs[:, 1]]).sum(1)  # noqa: E731
        result["heldout_auc"] = auc(score(pos, emb), score(neg, emb))
        result["heldout_auc_random_embeddings"] = auc(score(pos, random_emb), score(neg, random_emb))
        result["heldout_edges"] = len(pos)
    return result


def run(args, device, g, train_eids, reverse_eids):
    sampler = dgl.dataloading.MultiLayerNeighborSampler([int(fanout) for fanout in args.fan_out.split(",")])
    dataloader = dgl.dataloading.DistEdgeDataLoader(
        g,
        train_eids,
        sampler,
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(args.num_negs),
        exclude="reverse_id",
        reverse_eids=reverse_eids,
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=False,
    )
    model = DistSAGE(g.ndata["features"].shape[1], args.num_hidden, args.num_layers, F.relu, args.dropout)
    model = model.to(device)
    if not args.standalone:
        model = th.nn.parallel.DistributedDataParallel(model)
    loss_fcn = CrossEntropyLoss()
    optimizer = th.optim.Adam(model.parameters(), lr=args.lr)
    losses = []
    for epoch in range(args.num_epochs):
        tic = time.time()
        with model.join() if not args.standalone else contextlib.nullcontext():
            for step, (input_nodes, pos_graph, neg_graph, blocks) in enumerate(dataloader):
                batch_inputs = g.ndata["features"][input_nodes].to(device)
                blocks = [block.to(device) for block in blocks]
                batch_pred = model(blocks, batch_inputs)
                loss = loss_fcn(batch_pred, pos_graph.to(device), neg_graph.to(device))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
                if step % args.log_every == 0:
                    print(f"[{g.rank()}] Epoch {epoch:05d} | Step {step:05d} | Loss {loss.item():.4f}")
        print(f"[{g.rank()}] Epoch Time(s): {time.time() - tic:.4f}")
    module = model if args.standalone else model.module
    module.eval()
    with th.no_grad():
        emb = module.inference(g, g.ndata["features"], args.batch_size_eval, device)
    return emb, losses


def main(args):
    if not args.standalone:
        dgl.distributed.initialize(args.ip_config)
        th.distributed.init_process_group(backend="gloo")
    th.manual_seed(args.seed)
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    print("rank:", g.rank())
    train_eids = dgl.distributed.edge_split(
        th.ones((g.num_edges(),), dtype=th.bool), g.get_partition_book(), force_even=True
    )
    reverse_eids = th.from_numpy(np.load(args.reverse_eids))
    device = th.device("cpu")
    emb, losses = run(args, device, g, train_eids, reverse_eids)
    if not args.standalone:
        g._client.barrier()
    if g.rank() == 0:
        # As DGL's example: save the embeddings (a DistTensor: its name, shape and dtype are written),
        # then load them back (a handle on the same rows) and score both.
        th.save(emb, args.save_emb)
        reloaded = th.load(args.save_emb, weights_only=False)
        result = evaluate(args, emb[np.arange(g.num_nodes())], g)
        again = evaluate(args, reloaded[np.arange(g.num_nodes())], g)
        result.update({f"{key}_reloaded": value for key, value in again.items() if "random" not in key})
        result.update(saved_bytes=os.path.getsize(args.save_emb), reloaded_type=type(reloaded).__name__)
        result.update(losses=losses, num_train_edges=len(train_eids))
        print(json.dumps({k: v for k, v in result.items() if k != "losses"}))
        if args.out:
            with open(args.out, "w") as handle:
                json.dump(result, handle)
    if not args.standalone:
        g.barrier()
        dgl.distributed.exit_client()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="GraphSAGE, unsupervised")
    parser.add_argument("--graph_name", type=str, help="graph name")
    parser.add_argument("--ip_config", type=str, help="The file for IP configuration")
    parser.add_argument("--part_config", type=str, help="The path to the partition config file")
    parser.add_argument("--reverse_eids", type=str, required=True, help="reverse edge IDs (.npy)")
    parser.add_argument("--heldout", type=str, default="", help="held-out edges for the AUC (.npy)")
    parser.add_argument("--num_epochs", type=int, default=5)
    parser.add_argument("--num_hidden", type=int, default=64)
    parser.add_argument("--num_layers", type=int, default=2)
    parser.add_argument("--fan_out", type=str, default="10,25")
    parser.add_argument("--batch_size", type=int, default=512)
    parser.add_argument("--batch_size_eval", type=int, default=100000)
    parser.add_argument("--num_negs", type=int, default=1)
    parser.add_argument("--log_every", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--dropout", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--standalone", action="store_true", help="run in the standalone mode")
    parser.add_argument("--out", type=str, default="", help="rank 0 writes its figures here (JSON)")
    parser.add_argument("--save_emb", type=str, default="emb.pt", help="where rank 0 saves the embeddings")
    main(parser.parse_args())
