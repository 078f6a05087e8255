"""``graphstore convert --from-dgl``: a graph partitioned by DGL 2.1 (run in its own venv; skipped
without it), converted, served by ``graphstore server`` and read through a client: every node and edge
keeps DGL's ID, its data is the original graph's row under DGL's ``return_mapping``, and sampling and
``find_edges`` give the original graph's edges. A typed graph is checked in standalone mode."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from graphstore.client import api
from graphstore.client.constants import EID
from graphstore.client.dist_graph import DistGraph
from graphstore.client.sampling import find_edges, sample_neighbors
from graphstore.launcher.cli import main
from graphstore.launcher.local_servers import start_servers
from graphstore.partition import load_partition_book
from tests.utils.dgl_reference import require_dgl, run_dgl

PARTITION_WITH_DGL = r"""
import sys, numpy as np, torch as th, dgl
data = np.load(sys.argv[1]); out = sys.argv[2]; typed = sys.argv[3] == "1"
src, dst = th.from_numpy(data["src"]), th.from_numpy(data["dst"])
if typed:
    g = dgl.heterograph({("user", "follows", "user"): (src % 200, dst % 200),
                         ("user", "buys", "item"): (src % 200, dst % 150)}, {"user": 200, "item": 150})
    g.nodes["user"].data["feat"] = th.from_numpy(data["feat"][:200])
    g.edges["buys"].data["w"] = th.from_numpy(data["w"])
else:
    g = dgl.graph((src, dst), num_nodes=400)
    g.ndata["feat"] = th.from_numpy(data["feat"]); g.ndata["label"] = th.from_numpy(data["label"])
    g.ndata["train_mask"] = th.from_numpy(data["train_mask"]); g.edata["w"] = th.from_numpy(data["w"])
nids, eids = dgl.distributed.partition_graph(g, "dglg", 2, out, part_method="metis", return_mapping=True)
if typed:
    np.savez(out + "/maps.npz", user=nids["user"].numpy(), item=nids["item"].numpy(),
             buys=eids[("user", "buys", "item")].numpy(), follows=eids[("user", "follows", "user")].numpy())
else:
    np.savez(out + "/maps.npz", nids=nids.numpy(), eids=eids.numpy())
"""


@pytest.fixture(scope="module")
def graph_arrays(tmp_path_factory):
    require_dgl()
    rng = np.random.default_rng(11)
    arrays = {
        "src": rng.integers(0, 400, 3000),
        "dst": rng.integers(0, 400, 3000),
        "feat": rng.standard_normal((400, 8)).astype(np.float32),
        "label": rng.integers(0, 5, 400),
        "train_mask": rng.random(400) < 0.3,
        "w": rng.standard_normal(3000).astype(np.float32),
    }
    path = tmp_path_factory.mktemp("dgl-input") / "g.npz"
    np.savez(path, **arrays)
    return path, arrays


def _convert(tmp_path, graph_path, typed: bool):
    dgl_dir = tmp_path / "dgl"
    run_dgl(PARTITION_WITH_DGL, str(graph_path), str(dgl_dir), "1" if typed else "0")
    code = main(
        [
            "convert",
            "--from-dgl",
            str(dgl_dir / "dglg.json"),
            "--out",
            str(tmp_path / "gs"),
            "--dgl-python",
            require_dgl(),
        ]
    )
    assert code == 0
    config = str(tmp_path / "gs" / "dglg.json")
    dgl_book = load_partition_book(str(dgl_dir / "dglg.json"))
    ours = load_partition_book(config)
    assert ours.node_map() == dgl_book.node_map() and ours.edge_map() == dgl_book.edge_map()
    return config, dict(np.load(dgl_dir / "maps.npz"))


def test_a_dgl_partitioning_converted_and_served_reads_as_the_original(tmp_path, graph_arrays):
    graph_path, a = graph_arrays
    config, maps = _convert(tmp_path, graph_path, typed=False)
    nids, eids = maps["nids"], maps["eids"]  # DGL's new ID -> original ID
    group = start_servers(config, 2, log_dir=tmp_path / "logs")
    try:
        servers = []
        for part_id, address in enumerate(group.addresses):
            host, port = address.rsplit(":", 1)
            servers.append({"host": host, "port": int(port), "part_id": part_id})
        api.exit_client()
        api.initialize({"graph_name": "dglg", "part_config": config, "servers": servers, "local_read": "off"})
        g = DistGraph("dglg")
        every_node, every_edge = torch.arange(400), torch.arange(3000)
        np.testing.assert_array_equal(g.ndata["feat"][every_node].numpy(), a["feat"][nids])
        np.testing.assert_array_equal(g.ndata["label"][every_node].numpy(), a["label"][nids])
        np.testing.assert_array_equal(g.ndata["train_mask"][every_node].numpy(), a["train_mask"][nids])
        np.testing.assert_array_equal(g.edata["w"][every_edge].numpy(), a["w"][eids])
        src, dst = find_edges(g, every_edge)
        np.testing.assert_array_equal(nids[src.numpy()], a["src"][eids])
        np.testing.assert_array_equal(nids[dst.numpy()], a["dst"][eids])
        frontier = sample_neighbors(g, every_node, -1)  # every in-edge of every node
        s, d = frontier.edges()
        ids = frontier.edata[EID].numpy()
        assert np.array_equal(np.sort(ids), np.arange(3000))
        np.testing.assert_array_equal(nids[s.numpy()], a["src"][eids[ids]])
        np.testing.assert_array_equal(nids[d.numpy()], a["dst"][eids[ids]])
    finally:
        api.exit_client()
        group.stop()


def test_a_typed_dgl_partitioning_converts_with_its_per_type_ids(tmp_path, graph_arrays):
    graph_path, a = graph_arrays
    config, maps = _convert(tmp_path, graph_path, typed=True)
    g = DistGraph("dglg", part_config=config)
    try:
        users = torch.arange(200)
        np.testing.assert_array_equal(
            g.nodes["user"].data["feat"][users].numpy(), a["feat"][:200][maps["user"]]
        )
        buys = maps["buys"]
        np.testing.assert_array_equal(g.edges["buys"].data["w"][torch.arange(3000)].numpy(), a["w"][buys])
        canonical = ("user", "buys", "item")
        src_user, dst_item = find_edges(g, {canonical: torch.arange(3000)})[canonical]
        np.testing.assert_array_equal(maps["user"][src_user.numpy()], a["src"][buys] % 200)
        np.testing.assert_array_equal(maps["item"][dst_item.numpy()], a["dst"][buys] % 150)
    finally:
        api.exit_client()


def test_without_dgl_the_command_says_how_to_read_graph_dgl(tmp_path, capsys):
    (tmp_path / "part0").mkdir()
    for name in ("graph.dgl", "node_feat.dgl", "edge_feat.dgl"):
        (tmp_path / "part0" / name).write_bytes(b"")
    config = {
        "graph_name": "g",
        "num_nodes": 4,
        "num_edges": 2,
        "num_parts": 1,
        "node_map": {"_N": [[0, 4]]},
        "edge_map": {"_N:_E:_N": [[0, 2]]},
        "part-0": {
            "node_feats": "part0/node_feat.dgl",
            "edge_feats": "part0/edge_feat.dgl",
            "part_graph": "part0/graph.dgl",
        },
    }
    (tmp_path / "g.json").write_text(json.dumps(config))
    assert main(["convert", "--from-dgl", str(tmp_path / "g.json"), "--out", str(tmp_path / "out")]) == 2
    assert "--dgl-python" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
