"""graphstore's PyG NeighborSampler under PyG's own NodeLoader / LinkLoader: every sampled edge exists
with its type and ID, features match the stored rows, fanouts and PyG's hop layout hold, a typed
to_hetero model trains, and (where PyG's in-memory sampler installs) the batches match PyG's own
NeighborLoader in distribution."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torch_geometric.typing
from torch_geometric.data import Data
from torch_geometric.loader import LinkLoader, NeighborLoader, NodeLoader
from torch_geometric.nn import GraphSAGE, to_hetero
from torch_geometric.sampler import NegativeSampling

from graphstore.compat.pyg import FeatureStore, GraphStore, NeighborSampler, stores


def check_hops(n_id, row, col, e_id, num_sampled_nodes, num_sampled_edges, fanouts, src, dst):
    """One edge type: edges exist with their IDs; per hop, the hop's edges end at the previous hop's new
    nodes, each of which gets min(in-degree, fanout) edges; the hop's new nodes are its edges' sources."""
    assert np.array_equal(n_id[row], src[e_id]) and np.array_equal(n_id[col], dst[e_id])
    assert np.unique(e_id).size == e_id.size
    nodes_at = np.cumsum([0, *num_sampled_nodes])
    edges_at = np.cumsum([0, *num_sampled_edges])
    assert nodes_at[-1] == n_id.size and edges_at[-1] == e_id.size
    degree = np.bincount(dst, minlength=int(max(dst.max(), n_id.max())) + 1)
    for hop, fanout in enumerate(fanouts):
        hop_rows = row[edges_at[hop] : edges_at[hop + 1]]
        hop_cols = col[edges_at[hop] : edges_at[hop + 1]]
        first, end = nodes_at[hop], nodes_at[hop + 1]
        assert ((hop_cols >= first) & (hop_cols < end)).all()
        counts = np.bincount(hop_cols - first, minlength=end - first)
        assert np.array_equal(counts, np.minimum(degree[n_id[first:end]], fanout)), hop
        assert set(range(nodes_at[hop + 1], nodes_at[hop + 2])) <= set(hop_rows.tolist())


def test_node_loader_batches_hold_sampled_edges_and_stored_rows(homo_graph):
    g, new = homo_graph
    train = torch.from_numpy(np.flatnonzero(new["train_mask"]))
    loader = NodeLoader(
        stores(g), node_sampler=NeighborSampler(g, [4, 3]), input_nodes=train, batch_size=64, shuffle=True
    )
    seen = []
    for batch in loader:
        n_id = batch.n_id.numpy()
        assert torch.equal(batch.n_id[: batch.batch_size], train[batch.input_id])
        assert torch.equal(batch.x, torch.from_numpy(new["feat"][n_id]))
        assert np.array_equal(batch.y.numpy(), new["label"][n_id])
        row, col = batch.edge_index.numpy()
        check_hops(
            n_id,
            row,
            col,
            batch.e_id.numpy(),
            batch.num_sampled_nodes,
            batch.num_sampled_edges,
            [4, 3],
            new["src"],
            new["dst"],
        )
        seen.append(batch.input_id)
    assert torch.equal(torch.cat(seen).sort().values, torch.arange(train.numel()))


def test_typed_batches_keep_edge_types_and_ids(typed_graph):
    g, new = typed_graph
    papers = torch.arange(0, g.num_nodes("paper"), 3)
    fanouts = {("author", "writes", "paper"): [3, 2], ("paper", "cites", "paper"): [2, 2]}
    sampler = NeighborSampler(g, fanouts)
    loader = NodeLoader(stores(g), node_sampler=sampler, input_nodes=("paper", papers), batch_size=16)
    batches = 0
    for batch in loader:
        batches += 1
        assert set(batch.node_types) == set(g.ntypes)
        assert torch.equal(batch["paper"].n_id[: batch["paper"].batch_size], papers[batch["paper"].input_id])
        assert torch.equal(
            batch["paper"].x, torch.from_numpy(new["nodes"]["paper"]["feat"][batch["paper"].n_id.numpy()])
        )
        for canonical, (src, dst) in new["edges"].items():
            store = batch[canonical]
            row, col = store.edge_index.numpy()
            e_id = store.e_id.numpy()
            src_ids, dst_ids = batch[canonical[0]].n_id.numpy(), batch[canonical[2]].n_id.numpy()
            assert np.array_equal(src_ids[row], src[e_id]) and np.array_equal(dst_ids[col], dst[e_id])
            if canonical not in fanouts:
                assert e_id.size == 0, canonical
        # Hop 1 samples in-edges of the seeds only: min(in-degree, fanout) per seed and edge type.
        for canonical, hop_fanouts in fanouts.items():
            col = batch[canonical].edge_index[1].numpy()[: batch[canonical].num_sampled_edges[0]]
            seeds = batch["paper"].n_id.numpy()[: batch["paper"].batch_size]
            degree = np.bincount(new["edges"][canonical][1], minlength=g.num_nodes("paper"))
            counts = np.bincount(col, minlength=seeds.size)
            assert np.array_equal(counts, np.minimum(degree[seeds], hop_fanouts[0]))
    assert batches == -(-papers.numel() // 16)


def test_link_loader_labels_the_given_pairs_and_negatives(homo_graph):
    g, new = homo_graph
    eids = torch.arange(0, 200, 7)
    pairs = torch.stack(
        [torch.from_numpy(new["src"][eids.numpy()]), torch.from_numpy(new["dst"][eids.numpy()])]
    )
    loader = LinkLoader(
        stores(g),
        link_sampler=NeighborSampler(g, [3, 2]),
        edge_label_index=(None, pairs),
        neg_sampling=NegativeSampling("binary", amount=2),
        batch_size=10,
    )
    for batch in loader:
        num_pos = batch.input_id.numel()
        labelled = batch.n_id[batch.edge_label_index]
        assert torch.equal(labelled[:, :num_pos], pairs[:, batch.input_id])
        assert torch.equal(batch.edge_label, torch.cat([torch.ones(num_pos), torch.zeros(2 * num_pos)]))
        assert torch.equal(batch.x, torch.from_numpy(new["feat"][batch.n_id.numpy()]))
        row, col = batch.edge_index.numpy()
        e_id = batch.e_id.numpy()
        assert np.array_equal(batch.n_id.numpy()[row], new["src"][e_id])


def test_typed_link_loader_labels_pairs_of_an_edge_type(typed_graph):
    g, new = typed_graph
    writes = ("author", "writes", "paper")
    src, dst = new["edges"][writes]
    pairs = torch.stack([torch.from_numpy(src[:40]), torch.from_numpy(dst[:40])])
    loader = LinkLoader(
        stores(g),
        link_sampler=NeighborSampler(g, [2, 2]),
        edge_label_index=(writes, pairs),
        neg_sampling=NegativeSampling("binary"),
        batch_size=16,
    )
    for batch in loader:
        store = batch[writes]
        num_pos = store.input_id.numel()
        authors = batch["author"].n_id[store.edge_label_index[0]]
        papers = batch["paper"].n_id[store.edge_label_index[1]]
        assert torch.equal(authors[:num_pos], pairs[0, store.input_id])
        assert torch.equal(papers[:num_pos], pairs[1, store.input_id])
        assert torch.equal(store.edge_label, torch.cat([torch.ones(num_pos), torch.zeros(num_pos)]))


def test_options_refused_or_honoured(homo_graph):
    g, _ = homo_graph
    with pytest.raises(ValueError, match="disjoint"):
        NeighborSampler(g, [2], disjoint=True)
    with pytest.raises(ValueError, match="induced"):
        NeighborSampler(g, [2], subgraph_type="induced")
    for refused in (-3, True, 2**31, 2.0):  # the fanout rule of graphstore.sampling_rules
        with pytest.raises(ValueError, match=r"num_neighbors .* must be -1"):
            NeighborSampler(g, [2, refused])
    assert NeighborSampler(g, [np.int64(2), -1]).num_hops == 2
    seeds = torch.tensor([1, 2, 3, 50])
    fs, gs = FeatureStore(g), GraphStore(g)

    def first(sampler):
        return next(iter(NodeLoader((fs, gs), node_sampler=sampler, input_nodes=seeds, batch_size=4)))

    one, two = first(NeighborSampler(g, [3, 3], seed=5)), first(NeighborSampler(g, [3, 3], seed=5))
    assert torch.equal(one.n_id, two.n_id) and torch.equal(one.e_id, two.e_id)
    both = first(NeighborSampler(g, [3, 3], seed=5, subgraph_type="bidirectional"))
    assert torch.equal(both.n_id, one.n_id)
    pairs = set(map(tuple, both.edge_index.t().tolist()))
    assert all((c, r) in pairs for r, c in one.edge_index.t().tolist())
    replaced = first(NeighborSampler(g, [6], replace=True))
    degree = g.in_degrees(seeds)
    counts = np.bincount(replaced.edge_index[1].numpy(), minlength=4)
    assert np.array_equal(counts, np.where(degree.numpy() > 0, 6, 0))
    with pytest.raises(ValueError, match="typed graph"):
        NodeLoader((fs, gs), node_sampler=NeighborSampler(g, [2]), input_nodes=("_N", seeds), batch_size=4)(
            [0, 1]
        )
    excluded = first(NeighborSampler(g, [-1], exclude_edges=one.e_id))
    assert not set(excluded.e_id.tolist()) & set(one.e_id.tolist())


def test_to_hetero_model_trains_on_typed_batches(typed_graph):
    g, _ = typed_graph
    torch.manual_seed(0)
    sampler = NeighborSampler(g, [5, 5], seed=0)
    train = torch.from_numpy(np.flatnonzero(g.nodes["paper"].data["train_mask"][torch.arange(120)].numpy()))
    batch = next(
        iter(NodeLoader(stores(g), node_sampler=sampler, input_nodes=("paper", train), batch_size=64))
    )
    embed = torch.nn.ModuleDict({t: torch.nn.Embedding(g.num_nodes(t), 6) for t in g.ntypes if t != "paper"})
    model = to_hetero(GraphSAGE(6, 16, 2, 4), batch.metadata(), aggr="sum")
    optimizer = torch.optim.Adam([*model.parameters(), *embed.parameters()], lr=0.02)
    size = batch["paper"].batch_size
    losses = []
    for _ in range(30):
        x = {t: batch[t].x if t == "paper" else embed[t](batch[t].n_id) for t in batch.node_types}
        out = model(x, batch.edge_index_dict)["paper"][:size]
        loss = F.cross_entropy(out, batch["paper"].y[:size].long())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    assert losses[-1] < 0.5 * losses[0]


def per_seed_counts(row, col, num_seeds: int, bins: np.ndarray, repeats: int, sample) -> tuple:
    """Mean per degree bin of each seed's 2-hop tree: distinct nodes reached in hop 2, edges."""
    nodes, edges = np.zeros(5), np.zeros(5)
    for _ in range(repeats):
        row, col = sample()
        for s in range(num_seeds):
            hop1 = row[col == s]
            edges[bins[s]] += hop1.size + np.isin(col, hop1).sum()
            nodes[bins[s]] += np.unique(row[np.isin(col, hop1)]).size
    return nodes / repeats, edges / repeats


def reference_pyg_sample(src, dst, seeds, fanouts, rng):
    """PyG's directional neighbour sampling written out in numpy (its documented algorithm): each hop
    draws min(in-degree, fanout) distinct in-edges of every node the previous hop added; returns the
    local (row, col) of the sampled edges."""
    order = np.argsort(dst, kind="stable")
    starts = np.searchsorted(dst[order], np.arange(dst.max() + 2))
    local = {int(n): i for i, n in enumerate(seeds)}
    frontier, rows, cols = list(seeds), [], []
    for fanout in fanouts:
        added = []
        for node in frontier:
            edges = order[starts[node] : starts[node + 1]]
            if edges.size > fanout:
                edges = rng.choice(edges, fanout, replace=False)
            for neighbour in src[edges]:
                if int(neighbour) not in local:
                    local[int(neighbour)] = len(local)
                    added.append(int(neighbour))
                rows.append(local[int(neighbour)])
                cols.append(local[int(node)])
        frontier = added
    return np.asarray(rows), np.asarray(cols)


def test_batches_match_pygs_algorithm_in_distribution(homo_graph):
    """Degree-binned per-seed counts of 2-hop trees against PyG's algorithm run on the in-memory graph
    (runs where PyG's compiled samplers do not install)."""
    g, new = homo_graph
    seeds = torch.arange(0, 600, 5)
    degree = np.bincount(new["dst"], minlength=600)[seeds.numpy()]
    bins = np.digitize(degree, [2, 5, 10, 20])
    loader = NodeLoader(stores(g), node_sampler=NeighborSampler(g, [5, 5]), input_nodes=seeds, batch_size=120)

    def ours():
        return next(iter(loader)).edge_index.numpy()

    rng = np.random.default_rng(0)
    reference = per_seed_counts(
        None, None, seeds.numel(), bins, 20,
        lambda: reference_pyg_sample(new["src"], new["dst"], seeds.numpy(), [5, 5], rng),
    )  # fmt: skip
    mine = per_seed_counts(None, None, seeds.numel(), bins, 20, ours)
    for a, b in zip(mine, reference, strict=True):
        assert np.allclose(a, b, rtol=0.1, atol=2.0), (a, b)


@pytest.mark.skipif(
    not (torch_geometric.typing.WITH_PYG_LIB or torch_geometric.typing.WITH_TORCH_SPARSE),
    reason="PyG's in-memory NeighborLoader needs pyg-lib or torch-sparse (not installed)",
)
def test_same_batches_as_pygs_neighbor_loader_in_distribution(homo_graph):
    g, new = homo_graph
    data = Data(
        x=torch.from_numpy(new["feat"]),
        edge_index=torch.stack([torch.from_numpy(new["src"]), torch.from_numpy(new["dst"])]),
        num_nodes=600,
    )
    seeds = torch.arange(0, 600, 5)
    degree = np.bincount(new["dst"], minlength=600)[seeds.numpy()]
    bins = np.digitize(degree, [2, 5, 10, 20])

    def binned(loader):
        nodes, edges = np.zeros(5), np.zeros(5)
        for _ in range(20):
            batch = next(iter(loader))
            row, col = batch.edge_index.numpy()
            # per seed: distinct 2-hop nodes reached through it, edges of its 2-hop tree
            for s in range(seeds.numel()):
                hop1 = row[col == s]
                edges[bins[s]] += hop1.size + np.isin(col, hop1).sum()
                nodes[bins[s]] += np.unique(row[np.isin(col, hop1)]).size
        return nodes / 20, edges / 20

    ours = binned(
        NodeLoader(stores(g), node_sampler=NeighborSampler(g, [5, 5]), input_nodes=seeds, batch_size=120)
    )
    pyg = binned(NeighborLoader(data, num_neighbors=[5, 5], input_nodes=seeds, batch_size=120))
    for mine, theirs in zip(ours, pyg, strict=True):
        assert np.allclose(mine, theirs, rtol=0.1, atol=2.0), (mine, theirs)
