"""DGL's side of the side-by-side benchmark: ``dgl.distributed``'s partitioner, servers and client.

Runs in ``.venv-dgl`` (``make bench-dgl`` builds it). Nothing here reimplements DGL: partitions come
from ``dgl.distributed.partition_graph``; each server is a process that calls
``dgl.distributed.initialize`` with DGL's server environment (``DGL_ROLE=server``,
``DGL_SERVER_ID``, ``DGL_NUM_SERVER``, ``DGL_NUM_CLIENT``, ``DGL_IP_CONFIG``, ``DGL_CONF_PATH``, the
variables DGL's launch script sets) and never returns; clients are ``dgl.distributed.initialize``
with the client environment, then ``DistGraph``.

DGL runs one partition per machine and shares that partition with the machine's trainers through
``/dev/shm``, under names made of the graph and tensor names only, so two partition servers of one
graph cannot share a ``/dev/shm``. Here partition 0's server runs as usual (its ``/dev/shm`` is the
client's: the co-located partition) and partition 1's server runs in its own mount namespace with a
private ``/dev/shm`` (``unshare --mount``), which is what a second machine would be to DGL; both
listen on loopback, as in the ip_config file (one ``127.0.0.1 PORT`` line per partition).

DGL creates a new distributed tensor (a ``DistEmbedding`` and its optimizer state) only through the
servers of the machines that have clients, collectively: with one trainer on machine 0, partition
1 would never get its share. So the single-client workloads run with DGL's minimum for two
machines: the measured client on machine 0 plus an idle *peer* client on machine 1 (inside partition
1's mount namespace, its machine ID set to 1 since both machines are 127.0.0.1 here), which joins
the collective creations and then waits in ``exit_client``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("DGLBACKEND", "pytorch")

import dgl  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from processes import Children, dgl_shared_memory_files, free_ports, remove_shared_memory, wait_for_log_line  # noqa: E402

NAME = "dgl"
NUM_PARTS = 2
SERVER_READY = "start graph service on server"
WORKER = Path(__file__).resolve().parent / "worker.py"


def versions() -> dict:
    """Python, torch and DGL versions of this process."""
    return {"python": sys.version.split()[0], "torch": torch.__version__, "dgl": dgl.__version__}


def partition(graph: str, name: str, out_dir: str) -> dict:
    """``dgl.distributed.partition_graph`` of the .npz graph in 2 parts with METIS.

    Every node array of the file (features, labels, masks) goes into ``ndata`` and is partitioned
    with the graph, as graphstore's partitioner does with the same file. ``orig_nids.npy`` (DGL's
    returned mapping) is saved beside the partition config. Returns the time from loading the file
    to the written partitions.
    """
    shutil.rmtree(out_dir, ignore_errors=True)
    start = time.perf_counter()
    data = np.load(graph)
    src, dst = torch.from_numpy(data["src"]), torch.from_numpy(data["dst"])
    num_nodes = int(data["feat"].shape[0])
    g = dgl.graph((src, dst), num_nodes=num_nodes)
    for key in data.files:
        if key not in ("src", "dst") and data[key].shape[:1] == (num_nodes,):
            g.ndata[key] = torch.from_numpy(data[key])
    orig_nids, _ = dgl.distributed.partition_graph(
        g, name, NUM_PARTS, out_dir, part_method="metis", return_mapping=True
    )
    seconds = time.perf_counter() - start
    np.save(Path(out_dir) / "orig_nids.npy", orig_nids.numpy())
    return {"total_seconds": seconds, "num_nodes": num_nodes, "num_edges": int(src.shape[0])}


def serve(ip_config: str) -> None:
    """A DGL partition server: ``initialize`` in the server role (reads DGL_* variables); never returns."""
    dgl.distributed.initialize(ip_config)


def run_peer(ip_config: str, graph_name: str) -> None:
    """The idle client of machine 1: joins the DistGraph and DistEmbedding creations, then exits.

    It mirrors the collective calls of ``workloads.client_workloads`` on DGL (each is a barrier of
    all clients): ``DistGraph``, then per embedding size ``DistEmbedding`` and ``SparseAdagrad``;
    both sides keep those objects until ``exit_client`` (deleting one is a collective call too).
    """
    from dgl.distributed import rpc_client
    from workloads import ADAGRAD_ROWS, EMBEDDING_DIM, embedding_name, init_uniform

    rpc_client.get_local_machine_id = lambda _namebook: 1
    dgl.distributed.initialize(ip_config)
    g = dgl.distributed.DistGraph(graph_name)
    kept = []  # a DistTensor deleted early would start a collective deletion the trainer does not join
    for rows in ADAGRAD_ROWS:
        emb = dgl.distributed.nn.DistEmbedding(
            g.num_nodes(), EMBEDDING_DIM, name=embedding_name(rows), init_func=init_uniform
        )
        kept += [emb, dgl.distributed.optim.SparseAdagrad([emb], lr=0.01)]
    dgl.distributed.exit_client()


def in_namespace_of(pid: int, command: list[str]) -> list[str]:
    """``command`` in the mount namespace of process ``pid`` (to share its private ``/dev/shm``)."""
    userns = [] if os.geteuid() == 0 else ["--user", "--preserve-credentials"]
    return ["nsenter", "--target", str(pid), "--mount", *userns, "--", *command]


def dgl_env(ip_config: Path, part_config: str, num_clients: int) -> dict:
    """The variables DGL's launch script gives servers and trainers (the role set separately)."""
    return {
        **os.environ,
        "DGLBACKEND": "pytorch",
        "DGL_DIST_MODE": "distributed",
        "DGL_IP_CONFIG": str(ip_config),
        "DGL_CONF_PATH": str(part_config),
        "DGL_NUM_SERVER": "1",
        "DGL_NUM_CLIENT": str(num_clients),
        "DGL_NUM_SAMPLER": "0",
        "DGL_GROUP_ID": "0",
        "DGL_GRAPH_FORMAT": "csc",
    }


def private_shm(command: list[str]) -> list[str]:
    """``command`` in a new mount namespace with an empty ``/dev/shm`` of its own."""
    inner = f"mount -t tmpfs tmpfs /dev/shm && exec {shlex.join(command)}"
    userns = [] if os.geteuid() == 0 else ["--map-root-user"]
    return ["unshare", "--mount", *userns, "sh", "-c", inner]


@contextmanager
def cluster(
    part_config: str, graph_name: str, log_dir: Path, num_clients: int, children: Children, peer=False
):
    """Start DGL's 2 partition servers for ``num_clients`` clients; yields (ip_config, client env).

    With ``peer``, also the idle client of machine 1 (:func:`run_peer`), counted in ``num_clients``.

    The servers exit by themselves when the clients are done (DGL's client 0 shuts them down);
    whatever still runs on exit is ended, and the ``/dev/shm`` files that a server ended that way
    leaves behind are removed.
    """
    shm_before = dgl_shared_memory_files(graph_name)
    ip_config = log_dir / "ip_config.txt"
    ports = free_ports(NUM_PARTS)
    ip_config.write_text("".join(f"127.0.0.1 {port}\n" for port in ports))
    env = dgl_env(ip_config, part_config, num_clients)
    servers = []
    try:
        for server_id in range(NUM_PARTS):
            command = [sys.executable, str(WORKER), "--system", NAME, "server", "--ip-config", str(ip_config)]
            if server_id > 0:
                command = private_shm(command)
            log = log_dir / f"dgl-server-{server_id}.log"
            server_env = {
                **env,
                "DGL_ROLE": "server",
                "DGL_SERVER_ID": str(server_id),
                "OMP_NUM_THREADS": "1",
            }
            servers.append((children.start(command, env=server_env, log_path=log), log))
        for proc, log in servers:
            wait_for_log_line(proc, log, SERVER_READY, timeout_s=600)
        if peer:
            command = [
                sys.executable,
                str(WORKER),
                "--system",
                NAME,
                "peer",
                "--ip-config",
                str(ip_config),
                "--graph-name",
                graph_name,
            ]
            children.start(
                in_namespace_of(servers[1][0].pid, command),
                env={**env, "DGL_ROLE": "client"},
                log_path=log_dir / "dgl-peer-client.log",
            )
        yield ip_config, {**env, "DGL_ROLE": "client"}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(proc.poll() is None for proc, _ in servers):
            time.sleep(0.1)
    finally:
        children.stop()
        remove_shared_memory(dgl_shared_memory_files(graph_name) - shm_before)


class DglSystem:
    """The workload adapter over DGL's distributed client (see ``workloads.py``)."""

    name = NAME
    # DGL's client aborts the process (std::bad_alloc in fast_pull) when two threads pull at once,
    # so the workloads serialize its calls.
    thread_safe = False

    def __init__(self, ip_config: Path, part_config: str, graph_name: str):
        dgl.distributed.initialize(str(ip_config))
        self.g = dgl.distributed.DistGraph(graph_name)
        self.feat = self.g.ndata["feat"]
        self.num_nodes = int(self.g.num_nodes())
        book = self.g.get_partition_book()
        self.part_ranges = []
        for part in range(NUM_PARTS):
            nids = book.partid2nids(part)
            self.part_ranges.append((int(nids.min()), int(nids.max()) + 1))
        new2orig = np.load(Path(part_config).parent / "orig_nids.npy")
        self.kept = []
        self.orig2new = np.empty_like(new2orig)
        self.orig2new[new2orig] = np.arange(new2orig.size)

    def to_system_ids(self, original: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(self.orig2new[original])

    def pull(self, ids) -> torch.Tensor:
        return self.feat[ids]

    def sample_one_hop(self, seeds, fanout: int) -> int:
        return int(dgl.distributed.sample_neighbors(self.g, seeds, fanout).num_edges())

    def sample_blocks(self, seeds, fanouts):
        return dgl.dataloading.NeighborSampler(list(fanouts)).sample_blocks(self.g, seeds)

    def embedding(self, num_rows: int, dim: int, name: str):
        from workloads import init_uniform

        emb = dgl.distributed.nn.DistEmbedding(num_rows, dim, name=name, init_func=init_uniform)
        self.kept.append(emb)  # kept until exit_client, as the peer does (see run_peer)
        return emb

    def sparse_adagrad(self, embedding, lr: float):
        if not torch.distributed.is_initialized():
            # DGL's SparseAdagrad.step() asks torch.distributed for its backend: a one-trainer group.
            torch.distributed.init_process_group(
                "gloo", init_method=f"tcp://127.0.0.1:{free_ports(1)[0]}", rank=0, world_size=1
            )
        optimizer = dgl.distributed.optim.SparseAdagrad([embedding], lr=lr)
        self.kept.append(optimizer)
        return optimizer

    def close(self) -> None:
        dgl.distributed.exit_client()
        self.kept.clear()
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


class DglSage(torch.nn.Module):
    """GraphSAGE of ``dgl.nn.SAGEConv`` layers (mean aggregator), as in DGL's distributed example."""

    def __init__(self, in_feats: int, hidden: int, classes: int):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            [dgl.nn.SAGEConv(in_feats, hidden, "mean"), dgl.nn.SAGEConv(hidden, classes, "mean")]
        )

    def forward(self, blocks, x):
        h = x
        for index, (layer, block) in enumerate(zip(self.layers, blocks, strict=True)):
            h = layer(block, h)
            if index < len(self.layers) - 1:
                h = F.relu(h)
        return h


class DglTrainer:
    """The epoch adapter (see ``epoch.py``) of one DGL trainer process (DGL client environment)."""

    def __init__(self, ip_config: str, graph_name: str):
        dgl.distributed.initialize(ip_config)
        self.g = dgl.distributed.DistGraph(graph_name)
        self.feat_dim = int(self.g.ndata["feat"].shape[1])

    def train_nodes(self) -> torch.Tensor:
        return dgl.distributed.node_split(
            self.g.ndata["train_mask"], self.g.get_partition_book(), force_even=True
        )

    def batches(self, nodes, fanouts, batch_size: int, seed: int):
        torch.manual_seed(seed)
        np.random.seed(seed)
        sampler = dgl.dataloading.NeighborSampler(list(fanouts))
        loader = dgl.dataloading.DistNodeDataLoader(
            self.g, nodes, sampler, batch_size=batch_size, shuffle=True, drop_last=False
        )
        feat, label = self.g.ndata["feat"], self.g.ndata["label"]
        for input_nodes, seeds, blocks in loader:
            yield feat[input_nodes], label[seeds], blocks

    def model(self, in_feats: int, hidden: int, classes: int) -> torch.nn.Module:
        return DglSage(in_feats, hidden, classes)

    def barrier(self) -> None:
        self.g.barrier()

    def close(self) -> None:
        dgl.distributed.exit_client()
