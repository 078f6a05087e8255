"""graphstore's side of the side-by-side benchmark: its servers, its client, its trainers.

Runs in the project's venv. The servers are ``graphstore server`` processes started by
``graphstore.launcher.local_servers.start_servers`` (single-client workloads) or by ``graphstore
launch`` (the two-trainer epoch); the client is ``graphstore.client``, reading partition 0 from its
files (``local_read: on``), as a trainer co-located with that partition does.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
import yaml
from processes import free_ports, run_measured

from graphstore.client import (
    DistEmbedding,
    DistGraph,
    DistNodeDataLoader,
    GraphSAGE,
    NeighborSampler,
    SparseAdagrad,
    call_counts,
    exit_client,
    initialize,
    node_split,
    sample_neighbors,
)
from graphstore.launcher.local_servers import start_servers

NAME = "graphstore"
NUM_PARTS = 2


def versions() -> dict:
    """Python, torch and graphstore versions of this process."""
    from importlib.metadata import version

    return {"python": sys.version.split()[0], "torch": torch.__version__, "graphstore": version("graphstore")}


def original_ids(part_config: str) -> np.ndarray:
    """``new2orig[new_id]``: the original node ID of each of graphstore's relabelled node IDs."""
    folder = Path(part_config).parent
    parts = json.loads(Path(part_config).read_text())["parts"]
    return np.concatenate([np.load(folder / part["path"] / "orig_nid.npy") for part in parts])


def cluster_dict(part_config: str, graph_name: str, ports: list[int], trainers: int = 1) -> dict:
    """The cluster config: one server per partition on loopback, clients co-located with partition 0."""
    return {
        "graph_name": graph_name,
        "part_config": str(part_config),
        "servers": [{"host": "127.0.0.1", "port": port, "part_id": k} for k, port in enumerate(ports)],
        "trainers_per_host": trainers,
        "local_read": "on",
        "local_part_id": 0,
    }


@contextmanager
def cluster(part_config: str, graph_name: str, log_dir: Path):
    """Start the partition servers; yields the client's cluster config; stops them on exit."""
    with start_servers(part_config, NUM_PARTS, log_dir=log_dir, timeout=300) as servers:
        ports = [int(address.rsplit(":", 1)[1]) for address in servers.addresses]
        yield cluster_dict(part_config, graph_name, ports)


class GraphstoreSystem:
    """The workload adapter over graphstore's client (see ``workloads.py``)."""

    name = NAME
    thread_safe = True

    def __init__(self, config: dict):
        initialize(config)
        self.g = DistGraph(config["graph_name"])
        self.feat = self.g.ndata["feat"]
        self.num_nodes = self.g.num_nodes()
        book = json.loads(Path(config["part_config"]).read_text())["node_map"]["_N"]
        self.part_ranges = [(int(start), int(end)) for start, end in book]
        new2orig = original_ids(config["part_config"])
        self.orig2new = np.empty_like(new2orig)
        self.orig2new[new2orig] = np.arange(new2orig.size)

    def to_system_ids(self, original: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(self.orig2new[original])

    def pull(self, ids) -> torch.Tensor:
        return self.feat[ids]

    def sample_one_hop(self, seeds, fanout: int) -> int:
        return sample_neighbors(self.g, seeds, fanout).num_edges()

    def sample_blocks(self, seeds, fanouts):
        return NeighborSampler(list(fanouts)).sample_blocks(self.g, seeds)

    def embedding(self, num_rows: int, dim: int, name: str):
        from workloads import init_uniform

        return DistEmbedding(num_rows, dim, name=name, init_func=init_uniform)

    def sparse_adagrad(self, embedding, lr: float):
        return SparseAdagrad([embedding], lr=lr)

    def wire_counts(self) -> dict:
        """Calls and bytes per method sent to the servers so far (``graphstore.client.call_counts``)."""
        return {
            method: {"calls": c.calls, "request_bytes": c.request_bytes, "answer_bytes": c.answer_bytes}
            for method, c in call_counts().items()
        }

    def close(self) -> None:
        exit_client()


class GraphstoreTrainer:
    """The epoch adapter (see ``epoch.py``) of one trainer started by ``graphstore launch``."""

    def __init__(self):
        initialize()  # the cluster config of GRAPHSTORE_CONFIG, set by graphstore launch
        self.g = DistGraph(yaml.safe_load(Path(os.environ["GRAPHSTORE_CONFIG"]).read_text())["graph_name"])
        self.feat_dim = int(self.g.ndata["feat"].shape[1])

    def train_nodes(self) -> torch.Tensor:
        return node_split(self.g.ndata["train_mask"], self.g.get_partition_book(), force_even=True)

    def batches(self, nodes, fanouts, batch_size: int, seed: int):
        loader = DistNodeDataLoader(
            self.g,
            nodes,
            NeighborSampler(list(fanouts)),
            batch_size=batch_size,
            shuffle=True,
            drop_last=False,
            seed=seed,
        )
        for _, _, blocks in loader:
            yield blocks[0].srcdata["feat"], blocks[-1].dstdata["label"], blocks

    def model(self, in_feats: int, hidden: int, classes: int) -> torch.nn.Module:
        return GraphSAGE(in_feats, hidden, classes, n_layers=2)

    def barrier(self) -> None:
        self.g.barrier()

    def close(self) -> None:
        exit_client()


def partition_command(graph: str, name: str, out_dir: str) -> list[str]:
    """``graphstore partition`` of the graph in 2 parts with METIS (prints its statistics as JSON)."""
    cli = str(Path(sys.executable).with_name("graphstore"))
    options = {
        "--graph": graph,
        "--name": name,
        "--num-parts": str(NUM_PARTS),
        "--method": "metis",
        "--out": out_dir,
    }
    return [cli, "partition", *(word for pair in options.items() for word in pair), "--overwrite", "--json"]


def run_epoch(
    part_config: str, graph_name: str, trainer_command: list[str], log_dir: Path, timeout_s: float
) -> None:
    """``graphstore launch`` of 2 servers and 2 trainers running ``trainer_command``.

    Raises:
        RuntimeError: launch exited non-zero (its log's tail in the message).
    """
    config_path = log_dir / "cluster.yaml"
    config = cluster_dict(part_config, graph_name, free_ports(NUM_PARTS), trainers=2)
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    cli = str(Path(sys.executable).with_name("graphstore"))
    log = log_dir / "launch.log"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    outcome = run_measured(
        [cli, "launch", "--config", str(config_path), "--", *trainer_command],
        env=env,
        log_path=log,
        timeout_s=timeout_s,
    )
    if outcome["returncode"] != 0:
        raise RuntimeError(f"graphstore launch exited {outcome['returncode']}:\n{log.read_text()[-3000:]}")
