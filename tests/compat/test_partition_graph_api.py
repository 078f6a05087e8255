"""``dgl.distributed.partition_graph`` of the compat namespace: DGL's keyword arguments, DGL's
``return_mapping`` shapes (tensors, or dicts per type), and a clear error for each option value
graphstore does not implement."""

from __future__ import annotations

import numpy as np
import pytest
import torch as th

import graphstore.compat.dgl as dgl
from tests.utils.dgl_like import DGLLikeGraph


def _homogeneous(num_nodes=60, num_edges=240):
    gen = th.Generator().manual_seed(0)
    g = DGLLikeGraph(
        {
            ("_N", "_E", "_N"): (
                th.randint(0, num_nodes, (num_edges,), generator=gen),
                th.randint(0, num_nodes, (num_edges,), generator=gen),
            )
        },
        {"_N": num_nodes},
    )
    g.ndata["feat"] = th.randn(num_nodes, 3, generator=gen)
    g.ndata["train_mask"] = th.rand(num_nodes, generator=gen) < 0.5
    return g


def test_return_mapping_is_dgls_tensors_and_the_files_load(tmp_path):
    g = _homogeneous()
    assert dgl.distributed.partition_graph(g, "plain", 2, str(tmp_path / "a")) is None
    nids, eids = dgl.distributed.partition_graph(
        g,
        "mapped",
        2,
        str(tmp_path / "b"),
        num_hops=1,
        part_method="metis",
        balance_ntypes=g.ndata["train_mask"],
        balance_edges=True,
        return_mapping=True,
        num_trainers_per_machine=1,
        objtype="cut",
        graph_formats=["csc"],
        use_graphbolt=False,
    )
    assert nids.dtype == eids.dtype == th.int64
    assert sorted(nids.tolist()) == list(range(60)) and sorted(eids.tolist()) == list(range(240))
    part, node_feats, _, gpb, name, _, _ = dgl.distributed.load_partition(
        str(tmp_path / "b" / "mapped.json"), 1
    )
    local = gpb.partid2nids(1)
    th.testing.assert_close(node_feats["_N/feat"], g.ndata["feat"][nids[local]])
    assert name == "mapped" and bool((part.ndata["part_id"][part.ndata["inner_node"] == 1] == 1).all())


def test_return_mapping_of_a_typed_graph_is_per_type(tmp_path):
    gen = th.Generator().manual_seed(1)
    g = DGLLikeGraph(
        {
            ("user", "buys", "item"): (
                th.randint(0, 20, (50,), generator=gen),
                th.randint(0, 10, (50,), generator=gen),
            ),
            ("item", "bought-by", "user"): (
                th.randint(0, 10, (30,), generator=gen),
                th.randint(0, 20, (30,), generator=gen),
            ),
        },
        {"user": 20, "item": 10},
    )
    g.nodes["user"].data["train_mask"] = th.rand(20, generator=gen) < 0.5
    nids, eids = dgl.distributed.partition_graph(
        g,
        "typed",
        2,
        str(tmp_path / "t"),
        balance_ntypes={"user": g.nodes["user"].data["train_mask"]},
        return_mapping=True,
    )
    assert sorted(nids) == ["item", "user"] and sorted(nids["user"].tolist()) == list(range(20))
    assert set(eids) == {("user", "buys", "item"), ("item", "bought-by", "user")}
    assert sorted(eids[("user", "buys", "item")].tolist()) == list(range(50))
    _, _, ntypes, etypes = dgl.distributed.load_partition_book(str(tmp_path / "t" / "typed.json"), 0)
    assert set(ntypes) == {"user", "item"} and set(etypes) == set(eids)


@pytest.mark.parametrize(
    "option, error, match",
    [
        ({"num_trainers_per_machine": 0}, ValueError, "num_trainers_per_machine=0"),
        ({"objtype": "vol"}, NotImplementedError, "objtype='vol'"),
        ({"graph_formats": ["dense"]}, ValueError, "graph_formats"),
        ({"reshuffle": True}, TypeError, "reshuffle"),
    ],
)
def test_options_graphstore_does_not_implement_raise(tmp_path, option, error, match):
    with pytest.raises(error, match=match):
        dgl.distributed.partition_graph(_homogeneous(), "g", 2, str(tmp_path / "x"), **option)
    assert not (tmp_path / "x" / "g.json").exists()


def test_balance_ntypes_by_type_names_an_existing_type(tmp_path):
    with pytest.raises(ValueError, match="node type 'nope'"):
        dgl.distributed.partition_graph(
            _homogeneous(), "g", 2, str(tmp_path / "x"), balance_ntypes={"nope": np.ones(60, bool)}
        )


def test_num_trainers_per_machine_writes_trainer_ids_that_node_split_follows(tmp_path, monkeypatch):
    """DGL's scripts: partition with N trainers per machine, then node_split(node_trainer_ids=...)."""
    monkeypatch.setenv("WORLD_SIZE", "4")  # 2 trainers on each of the 2 partitions' hosts
    g = _homogeneous(num_nodes=200, num_edges=800)
    dgl.distributed.partition_graph(g, "t", 2, str(tmp_path / "t"), num_trainers_per_machine=2)
    config = str(tmp_path / "t" / "t.json")
    book = dgl.distributed.load_partition_book(config, 0)[0]
    trainer_ids = []
    for part_id in range(2):
        _, node_feats, *_ = dgl.distributed.load_partition(config, part_id)
        ids = th.as_tensor(np.asarray(node_feats["_N/trainer_id"]))
        # part_id * 2 + local trainer, each partition's nodes in 2 contiguous, even runs
        assert set(ids.tolist()) == {2 * part_id, 2 * part_id + 1}
        assert (ids[1:] >= ids[:-1]).all() and abs(int((ids == 2 * part_id).sum()) * 2 - ids.numel()) <= 1
        trainer_ids.append(ids)
    trainer_ids = th.cat(trainer_ids)
    mask = th.ones(200, dtype=th.bool)
    splits = [
        dgl.distributed.node_split(mask, book, rank=rank, node_trainer_ids=trainer_ids) for rank in range(4)
    ]
    assert sorted(th.cat(splits).tolist()) == list(range(200))  # disjoint, and the union is the input
    assert max(s.numel() for s in splits) - min(s.numel() for s in splits) <= 1
    for rank, nodes in enumerate(splits):
        assert (trainer_ids[nodes] == rank).float().mean() > 0.9  # each trainer gets its own nodes
    # Without force_even the trainer IDs are ignored, as in DGL.
    loose = dgl.distributed.node_split(mask, book, rank=0, force_even=False, node_trainer_ids=trainer_ids)
    assert th.equal(loose, dgl.distributed.node_split(mask, book, rank=0, force_even=False))
