"""Setting up one trainer process: its device, its threads, its seeds, the trainer group, the graph.

A trainer started by ``graphstore launch`` (or torchrun, Slurm, Kubernetes) finds ``MASTER_ADDR``,
``RANK``, ``WORLD_SIZE``, ... and ``GRAPHSTORE_CONFIG`` in its environment: it joins the group and
connects to the servers. Without them it runs alone in standalone mode, every partition loaded
in-process from ``part_config``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

from graphstore.client import DistGraph, get_context, is_initialized
from graphstore.client import device as devices
from graphstore.client.training.collectives import rank_and_world
from graphstore.client.training.config import TrainConfig
from graphstore.errors import ServerError

# The variable ``graphstore launch`` sets to the cluster YAML; DistGraph connects to its servers.
LAUNCH_CONFIG_ENV = "GRAPHSTORE_CONFIG"
TRAINER_GROUP_ENV = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")
# How many times torchrun restarted this trainer group (set by torchrun only).
RESTART_COUNT_ENV = "TORCHELASTIC_RESTART_COUNT"
PROCESS_GROUP_TIMEOUT = timedelta(seconds=300)


def resolve_device(requested: str) -> torch.device:
    """``cpu`` / ``cuda`` (this process's ``LOCAL_RANK`` GPU) / ``cuda:N`` / ``auto`` -> the device, bound as
    the trainer's device (:func:`graphstore.client.device.bind_device`).

    Args:
        requested: the ``device`` setting.

    Returns:
        The device (a CUDA one is also made the process's current device).

    Raises:
        RuntimeError: CUDA requested but not available, or ``LOCAL_RANK`` at or above the number of
            visible GPUs (each GPU trainer gets a GPU of its own; none wraps around onto another's).
    """
    return devices.bind_device(requested)


def set_threads(requested: int | None) -> int:
    """Give each co-located trainer its share of the CPUs (what torchrun does with OMP_NUM_THREADS).

    Args:
        requested: torch's intra-op threads; None: the CPUs divided by ``LOCAL_WORLD_SIZE``.

    Returns:
        The number of threads set.
    """
    if requested is None:
        local_trainers = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
        requested = max(1, (os.cpu_count() or 1) // local_trainers)
    torch.set_num_threads(int(requested))
    return int(requested)


def init_process_group(device: torch.device, backend: str = "auto") -> bool:
    """Join the trainer group when launched with torchrun-style variables (gloo on CPU, NCCL on CUDA);
    after a torchrun restart, in keys of its own.

    Args:
        device: this trainer's device (picks the backend).
        backend: ``auto`` (by the device), ``nccl`` or ``gloo`` (GPU trainers sharing one GPU).

    Returns:
        Whether a process group exists.
    """
    if dist.is_initialized():
        return True
    if not all(os.environ.get(k) for k in TRAINER_GROUP_ENV):
        return False
    if backend == "auto":
        backend = "nccl" if device.type == "cuda" else "gloo"
    attempt = os.environ.get(RESTART_COUNT_ENV)
    if attempt is None:
        dist.init_process_group(backend, timeout=PROCESS_GROUP_TIMEOUT)
        return True
    # Under torchrun, the rendezvous store outlives a restart with the failed attempt's keys (gloo's
    # peer addresses among them), which the new group could read before they are replaced: each
    # attempt keeps its keys apart.
    store, rank, world_size = next(dist.rendezvous("env://", timeout=PROCESS_GROUP_TIMEOUT))
    store = dist.PrefixStore(f"graphstore/attempt-{attempt}", store)
    dist.init_process_group(
        backend, store=store, rank=rank, world_size=world_size, timeout=PROCESS_GROUP_TIMEOUT
    )
    return True


def open_graph(graph_name: str, part_config: str | None) -> DistGraph:
    """Connect to the servers when launched (``GRAPHSTORE_CONFIG``), else open standalone mode.

    Args:
        graph_name: the partitioned graph's name.
        part_config: the partition config; required in standalone mode.

    Returns:
        The graph.

    Raises:
        ValueError: no ``part_config`` and no cluster to connect to.
    """
    if part_config is None and not is_initialized() and not os.environ.get(LAUNCH_CONFIG_ENV):
        raise ValueError(
            f"--part-config is required without graphstore launch ({LAUNCH_CONFIG_ENV} is not set)"
        )
    return DistGraph(graph_name, part_config=part_config)


@dataclass
class TrainerProcess:
    """This trainer once set up.

    Attributes:
        device: where the model runs.
        graph: the opened graph.
        distributed: whether a trainer group (and DDP) exists.
        rank: this trainer's rank (0 without a group).
        world_size: the number of trainers (1 without a group).
        mode: ``standalone`` (partitions loaded in-process) or ``distributed`` (servers).
        show_progress: whether this trainer draws tqdm bars (rank 0 only).
    """

    device: torch.device
    graph: DistGraph
    distributed: bool
    rank: int
    world_size: int
    mode: str
    show_progress: bool


def setup_trainer(config: TrainConfig) -> TrainerProcess:
    """Device, threads, seeds (torch and numpy), trainer group and graph, in that order.

    Args:
        config: the run's settings.

    Returns:
        The set-up trainer.

    Raises:
        RuntimeError: CUDA requested but not available.
        ValueError: no ``part_config`` and no cluster to connect to.
    """
    device = resolve_device(config.device)
    set_threads(config.num_threads)
    torch.manual_seed(config.seed)
    np.random.seed(config.seed)
    distributed = init_process_group(device, config.dist_backend)
    graph = open_graph(config.graph_name, config.part_config)
    rank, world_size = rank_and_world()
    show_progress = rank == 0 and (
        config.progress == "on" or (config.progress == "auto" and sys.stderr.isatty())
    )
    return TrainerProcess(
        device=device,
        graph=graph,
        distributed=distributed,
        rank=rank,
        world_size=world_size,
        mode="standalone" if get_context().standalone else "distributed",
        show_progress=show_progress,
    )


def run_main(main: Callable[[], int], script: str) -> int:
    """Run a training script's ``main``; a server lost on the way (or failing a call) ends the script
    with one line naming it on stderr and exit code 1, instead of a traceback from a loader thread.

    Args:
        main: the script's body; returns its exit code.
        script: the script's name, to start the line with.

    Returns:
        The exit code.
    """
    try:
        return main()
    except ServerError as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        print(f"{script}: stopped: {first_line}", file=sys.stderr, flush=True)
        # The client's clean-up at exit cannot reach the lost server either: that is said already.
        logging.getLogger("graphstore.client").setLevel(logging.CRITICAL)
        return 1
