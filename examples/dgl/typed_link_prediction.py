"""Link prediction on one edge type of a typed graph, written the way DGL 2.x's distributed examples are,
importing only ``graphstore.compat.dgl``.

The edges ``author -writes-> paper`` of a ``graphstore generate --schema mag`` graph are split into
training and held-out edges; ``dgl.distributed.DistEdgeDataLoader`` over ``{etype: train_eids}`` with a
uniform negative sampler yields a positive and a negative pair graph per batch and typed blocks. The
model is two ``HeteroGraphConv`` layers of ``SAGEConv`` per relation over ``HeteroLinear`` paper
features and ``HeteroEmbedding`` rows of the featureless types; pairs are scored with ``u_dot_v`` on
that edge type. Rank 0 reports the AUC of held-out edges against as many negative pairs, before and
after training.

    graphstore launch --config cluster.yaml -- python examples/dgl/typed_link_prediction.py \\
        --graph_name mag --ip_config ip_config.txt --part_config data/mag/mag.json
"""

import argparse
import json
import os
import socket
import time

import torch as th
import torch.nn as nn
import torch.nn.functional as F

import graphstore.compat.dgl as dgl
import graphstore.compat.dgl.function as fn
from graphstore.compat.dgl import nn as dglnn


class HeteroSAGE(nn.Module):
    def __init__(self, g, feat_name, hidden, num_layers):
        super().__init__()
        widths = {t: g.nodes[t].data[feat_name].shape[1] for t in g.ntypes if feat_name in g.nodes[t].data}
        self.feat_name = feat_name
        self.proj = dglnn.HeteroLinear(widths, hidden)
        self.embed = dglnn.HeteroEmbedding({t: g.num_nodes(t) for t in g.ntypes if t not in widths}, hidden)
        self.layers = nn.ModuleList(
            dglnn.HeteroGraphConv(
                {rel: dglnn.SAGEConv(hidden, hidden, "mean") for rel in g.etypes}, aggregate="sum"
            )
            for _ in range(num_layers)
        )

    def inputs(self, g, input_nodes):
        feats = {
            t: g.nodes[t].data[self.feat_name][ids]
            for t, ids in input_nodes.items()
            if t in self.proj.linears
        }
        h = self.proj(feats)
        h.update(self.embed({t: ids for t, ids in input_nodes.items() if t not in self.proj.linears}))
        return h

    def forward(self, g, input_nodes, blocks):
        h = self.inputs(g, input_nodes)
        for i, (layer, block) in enumerate(zip(self.layers, blocks, strict=True)):
            h = layer(block, h)
            if i != len(self.layers) - 1:
                h = {t: F.relu(x) for t, x in h.items()}
        return h


def score(pair_graph, h, etype):
    """``u_dot_v`` of the pairs' representations (unit length, so that the scores start small)."""
    with pair_graph.local_scope():
        pair_graph.ndata["h"] = {t: F.normalize(x, dim=-1) * 4 for t, x in h.items()}
        pair_graph.apply_edges(fn.u_dot_v("h", "h", "score"), etype=etype)
        return pair_graph.edges[etype].data["score"].reshape(-1)


def auc(pos, neg):
    """Probability that a positive pair scores above a negative one (ties count half)."""
    greater = (pos.unsqueeze(1) > neg.unsqueeze(0)).float().mean()
    equal = (pos.unsqueeze(1) == neg.unsqueeze(0)).float().mean()
    return float(greater + 0.5 * equal)


def heldout_auc(g, model, loader, etype):
    pos_all, neg_all = [], []
    with th.no_grad():
        for input_nodes, pos_graph, neg_graph, blocks in loader:
            h = model(g, input_nodes, blocks)
            pos_all.append(score(pos_graph, h, etype))
            neg_all.append(score(neg_graph, h, etype))
    return auc(th.cat(pos_all), th.cat(neg_all))


def main(args):
    dgl.distributed.initialize(args.ip_config)
    if args.standalone:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        th.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    else:
        th.distributed.init_process_group(backend="gloo")
    th.manual_seed(args.seed)
    g = dgl.distributed.DistGraph(args.graph_name, part_config=args.part_config)
    etype = g.to_canonical_etype(args.etype)
    num_edges = g.num_edges(etype)
    heldout = th.zeros(num_edges, dtype=th.bool)
    heldout[
        th.randperm(num_edges, generator=th.Generator().manual_seed(1))[: int(num_edges * args.heldout)]
    ] = True
    pb = g.get_partition_book()
    train_eids = dgl.distributed.edge_split(~heldout, pb, etype=etype, force_even=True)
    test_eids = dgl.distributed.edge_split(heldout, pb, etype=etype, force_even=True)
    sampler = dgl.dataloading.MultiLayerNeighborSampler([int(f) for f in args.fan_out.split(",")])
    train_loader = dgl.distributed.DistEdgeDataLoader(
        g,
        {etype: train_eids},
        sampler,
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(args.num_negs),
        exclude="self",
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=False,
    )
    test_loader = dgl.distributed.DistEdgeDataLoader(
        g,
        {etype: test_eids},
        sampler,
        negative_sampler=dgl.dataloading.negative_sampler.Uniform(1),
        batch_size=args.batch_size,
        shuffle=False,
        drop_last=False,
    )
    model = HeteroSAGE(g, args.feat_name, args.n_hidden, len(args.fan_out.split(",")))
    model.eval()
    auc_before = heldout_auc(g, model, test_loader, etype)
    model.train()
    ddp = (
        model
        if args.standalone
        else th.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
    )
    optimizer = th.optim.Adam(model.parameters(), lr=args.lr)
    losses, epoch_times = [], []
    for epoch in range(args.num_epochs):
        tic = time.time()
        for step, (input_nodes, pos_graph, neg_graph, blocks) in enumerate(train_loader):
            h = ddp(g, input_nodes, blocks)
            pos, neg = score(pos_graph, h, etype), score(neg_graph, h, etype)
            loss = F.binary_cross_entropy_with_logits(
                th.cat([pos, neg]), th.cat([th.ones_like(pos), th.zeros_like(neg)])
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if step % args.log_every == 0:
                print(f"[{g.rank()}] Epoch {epoch:03d} | Step {step:04d} | Loss {loss.item():.4f}")
        epoch_times.append(time.time() - tic)
        print(f"[{g.rank()}] Epoch Time(s): {epoch_times[-1]:.4f}")
    model.eval()
    auc_after = heldout_auc(g, model, test_loader, etype)
    g._client.barrier()
    if g.rank() == 0:
        result = {
            "etype": list(etype),
            "heldout_auc": auc_after,
            "heldout_auc_untrained": auc_before,
            "first_loss": losses[0],
            "last_loss": losses[-1],
            "epoch_times": epoch_times,
            "trainers": th.distributed.get_world_size(),
        }
        print(json.dumps(result))
        if args.out:
            with open(args.out, "w") as handle:
                json.dump(result, handle)
    if not args.standalone:
        dgl.distributed.exit_client()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="typed link prediction")
    parser.add_argument("--graph_name", type=str)
    parser.add_argument("--ip_config", type=str)
    parser.add_argument("--part_config", type=str)
    parser.add_argument("--etype", type=str, default="writes")
    parser.add_argument("--feat_name", type=str, default="feat")
    parser.add_argument("--heldout", type=float, default=0.1)
    parser.add_argument("--num_epochs", type=int, default=3)
    parser.add_argument("--n_hidden", type=int, default=32)
    parser.add_argument("--fan_out", type=str, default="5,5")
    parser.add_argument("--batch_size", type=int, default=512)
    parser.add_argument("--num_negs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--log_every", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=str, default="")
    parser.add_argument("--standalone", action="store_true")
    args = parser.parse_args()
    if args.standalone:
        os.environ.setdefault("DGL_DIST_MODE", "standalone")
    main(args)
