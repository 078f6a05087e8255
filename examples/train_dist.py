"""Distributed GraphSAGE node classification on a graphstore DistGraph.

The same command runs in two modes, with no code change:

- standalone (one process, every partition loaded in-process, no servers)::

      python examples/train_dist.py --graph-name cora --part-config data/cora/cora.json

- distributed, under ``graphstore launch`` (which starts the servers and sets ``GRAPHSTORE_CONFIG``,
  ``MASTER_ADDR``, ``RANK``, ``WORLD_SIZE``, ...)::

      graphstore launch --config configs/local-2part.yaml -- \\
          python examples/train_dist.py --graph-name cora --part-config data/cora/cora.json

Each trainer takes its share of the training nodes (``node_split``), iterates a
``DistNodeDataLoader`` (neighbor sampling and feature pulls in background threads), and trains the
dense model under DistributedDataParallel (gloo on CPU, NCCL on CUDA) whenever a process group can
be formed. Accuracy is computed over all ranks, either by sampled inference over the evaluated
nodes (``--eval-mode sampled``, the default) or exactly, layer by layer over every node into
DistTensors (``--eval-mode layerwise``). ``--model mlp`` trains a features-only MLP the same way
(the baseline a GNN must beat). Settings come from flags, or from a training YAML (``--config``,
e.g. ``configs/train.yaml``) that flags override. The last line printed is ``test accuracy: X.XXXX``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
import yaml
from torch import nn
from tqdm import tqdm

from graphstore.client import DistGraph, DistTensor, exit_client, get_context, initialize, node_split
from graphstore.client.constants import CONFIG_ENV
from graphstore.client.dataloader import DistNodeDataLoader
from graphstore.client.nn import GraphSAGE
from graphstore.client.samplers import NeighborSampler

AMP_DTYPES = {"none": None, "fp16": torch.float16, "bf16": torch.bfloat16}
MODELS = ("sage", "mlp")
EVAL_MODES = ("sampled", "layerwise")


@dataclass
class TrainConfig:
    """Settings of one training run (flags and the training YAML use the same names, dashes or not).

    Attributes:
        graph_name: the partitioned graph's name.
        part_config: the partition config (NAME.json); required for standalone mode.
        fanouts: neighbors sampled per layer, input layer first (DGL's convention).
        batch_size: training seeds per mini-batch.
        hidden: hidden width.
        layers: number of GNN (or MLP) layers; must equal ``len(fanouts)`` for the GNN.
        dropout: dropout between layers.
        lr: Adam learning rate of the dense parameters.
        weight_decay: Adam weight decay.
        epochs: training epochs.
        seed: seeds model initialization, shuffling and neighbor sampling (reproducible runs).
        device: ``cpu``, ``cuda`` (``cuda:LOCAL_RANK``) or ``auto``.
        amp: ``none``, ``fp16`` (autocast + GradScaler) or ``bf16`` (autocast).
        eval_every: validation accuracy every N epochs (0: only at the end).
        eval_mode: ``sampled`` or ``layerwise`` (see the module docstring).
        eval_fanouts: fanouts of sampled inference (default: the training fanouts).
        eval_batch_size: seeds per inference mini-batch.
        eval_max_nodes: evaluate on a seeded random subset of at most this many nodes per mask.
        model: ``sage`` (GraphSAGE) or ``mlp`` (features only).
        aggregator: SAGEConv aggregator (``mean``, ``gcn``, ``pool``).
        prefetch: mini-batches prepared ahead by the loader (0: none, everything in this thread).
        num_workers: loader threads.
        feat_name, label_name: node data holding the features and the labels.
        feat_norm: ``none`` or ``row`` (divide each feature row by its L1 norm).
        save_model: where rank 0 saves the trained model's state dict ('' to skip; default: next to
            the partition config, else the current folder).
        metrics_json: where rank 0 writes the run's figures as JSON (optional).
        progress: ``auto`` (a tqdm bar on rank 0 when it writes to a terminal), ``on`` or ``off``.
        num_threads: torch's intra-op threads; default: the CPUs divided among the trainers of this
            host (``LOCAL_WORLD_SIZE``), so co-located trainers do not oversubscribe the cores.
    """

    graph_name: str = ""
    part_config: str | None = None
    fanouts: list[int] = field(default_factory=lambda: [10, 25])
    batch_size: int = 1024
    hidden: int = 256
    layers: int = 2
    dropout: float = 0.5
    lr: float = 0.003
    weight_decay: float = 0.0
    epochs: int = 10
    seed: int = 0
    device: str = "cpu"
    amp: str = "none"
    eval_every: int = 1
    eval_mode: str = "sampled"
    eval_fanouts: list[int] | None = None
    eval_batch_size: int = 4096
    eval_max_nodes: int | None = None
    model: str = "sage"
    aggregator: str = "mean"
    prefetch: int = 2
    num_workers: int = 1
    feat_name: str = "feat"
    feat_norm: str = "none"
    label_name: str = "label"
    save_model: str | None = None
    metrics_json: str | None = None
    progress: str = "auto"
    num_threads: int | None = None

    def validate(self) -> None:
        """Check the settings.

        Raises:
            ValueError: naming the setting and its value.
        """
        if not self.graph_name:
            raise ValueError("graph_name is required (--graph-name)")
        if not self.fanouts or any(int(f) < -1 for f in self.fanouts):
            raise ValueError(f"fanouts must be a non-empty list of ints >= -1, got {self.fanouts}")
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.model == "sage" and self.layers != len(self.fanouts):
            raise ValueError(f"layers ({self.layers}) must equal the number of fanouts {self.fanouts}")
        if self.eval_fanouts is not None and len(self.eval_fanouts) != len(self.fanouts):
            raise ValueError(f"eval_fanouts {self.eval_fanouts} must have one entry per layer like fanouts")
        if self.amp not in AMP_DTYPES:
            raise ValueError(f"amp must be one of {sorted(AMP_DTYPES)}, got {self.amp!r}")
        if self.eval_mode not in EVAL_MODES:
            raise ValueError(f"eval_mode must be one of {EVAL_MODES}, got {self.eval_mode!r}")
        if self.device not in ("cpu", "cuda", "auto") and not self.device.startswith("cuda:"):
            raise ValueError(f"device must be cpu, cuda, cuda:N or auto, got {self.device!r}")
        if self.feat_norm not in ("none", "row"):
            raise ValueError(f"feat_norm must be none or row, got {self.feat_norm!r}")
        if self.progress not in ("auto", "on", "off"):
            raise ValueError(f"progress must be auto, on or off, got {self.progress!r}")
        for name in ("batch_size", "hidden", "layers", "epochs", "eval_batch_size", "num_workers"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.lr <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.eval_every < 0 or self.prefetch < 0:
            raise ValueError(f"eval_every and prefetch must be >= 0, got {self.eval_every}, {self.prefetch}")


# ----- configuration -------------------------------------------------------------------------------


def _int_list(text: str) -> list[int]:
    return [int(x) for x in str(text).replace(" ", "").split(",") if x]


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags shared with ``train_embedding.py``; every default is None so the YAML can fill it."""
    parser.add_argument("--config", help="training YAML (e.g. configs/train.yaml); flags override it")
    parser.add_argument("--graph-name", help="the partitioned graph's name")
    parser.add_argument("--part-config", help="partition config NAME.json (standalone mode needs it)")
    parser.add_argument("--fanouts", type=_int_list, help="comma-separated, input layer first, e.g. 10,25")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--hidden", type=int)
    parser.add_argument("--layers", type=int)
    parser.add_argument("--dropout", type=float)
    parser.add_argument("--lr", type=float)
    parser.add_argument("--weight-decay", type=float)
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--device", help="cpu | cuda | cuda:N | auto")
    parser.add_argument("--amp", help="none | fp16 | bf16")
    parser.add_argument("--eval-every", type=int, help="validation every N epochs (0: only at the end)")
    parser.add_argument("--eval-mode", help="sampled | layerwise")
    parser.add_argument("--eval-fanouts", type=_int_list)
    parser.add_argument("--eval-batch-size", type=int)
    parser.add_argument("--eval-max-nodes", type=int, help="evaluate a seeded subset of each mask")
    parser.add_argument("--aggregator", help="mean | gcn | pool")
    parser.add_argument("--prefetch", type=int, help="mini-batches prepared ahead (0: off)")
    parser.add_argument("--num-workers", type=int, help="loader threads")
    parser.add_argument("--feat-name")
    parser.add_argument("--feat-norm", help="none | row (L1-normalize each feature row)")
    parser.add_argument("--label-name")
    parser.add_argument("--save-model", help="where rank 0 saves the model ('' to skip)")
    parser.add_argument("--metrics-json", help="where rank 0 writes the run's figures")
    parser.add_argument("--progress", help="auto | on | off")
    parser.add_argument("--num-threads", type=int, help="torch threads (default: CPUs / local trainers)")


def build_config(config_cls, args: argparse.Namespace):
    """Defaults, then the training YAML (``--config``), then the flags given.

    Raises:
        ValueError: an unknown key in the YAML, or an invalid setting.
        FileNotFoundError: a missing YAML.
    """
    known = {f.name for f in dataclasses.fields(config_cls)}
    values: dict = {}
    if args.config:
        with open(args.config) as handle:
            loaded = yaml.safe_load(handle) or {}
        if not isinstance(loaded, dict):
            raise ValueError(
                f"training config {args.config!r} must be a mapping, got {type(loaded).__name__}"
            )
        for key, value in loaded.items():
            name = str(key).replace("-", "_")
            if name not in known:
                raise ValueError(f"training config {args.config!r}: unknown setting {key!r}")
            values[name] = value
    for name, value in vars(args).items():
        if name in known and value is not None:
            values[name] = value
    # An older spelling: amp: true/false.
    if isinstance(values.get("amp"), bool):
        values["amp"] = "bf16" if values["amp"] else "none"
    for name in ("fanouts", "eval_fanouts"):
        if isinstance(values.get(name), str):
            values[name] = _int_list(values[name])
    config = config_cls(**values)
    config.validate()
    return config


# ----- process group and graph ---------------------------------------------------------------------


def resolve_device(requested: str) -> torch.device:
    """``cpu`` / ``cuda`` (this process's ``LOCAL_RANK`` GPU) / ``cuda:N`` / ``auto``.

    Raises:
        RuntimeError: CUDA requested but not available.
    """
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError(f"device {requested!r} requested but CUDA is not available")
    if requested == "cuda":
        requested = f"cuda:{int(os.environ.get('LOCAL_RANK', '0')) % torch.cuda.device_count()}"
    device = torch.device(requested)
    torch.cuda.set_device(device)
    return device


def set_threads(requested: int | None) -> int:
    """Give each co-located trainer its share of the CPUs (what torchrun does with OMP_NUM_THREADS)."""
    if requested is None:
        local_trainers = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
        requested = max(1, (os.cpu_count() or 1) // local_trainers)
    torch.set_num_threads(int(requested))
    return int(requested)


def init_process_group(device: torch.device) -> bool:
    """Join the trainer group when launched with torchrun-style variables; returns whether one exists."""
    if dist.is_initialized():
        return True
    if not all(os.environ.get(k) for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")):
        return False
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, timeout=timedelta(seconds=300))
    return True


def open_graph(graph_name: str, part_config: str | None) -> DistGraph:
    """Connect to the servers when launched (``GRAPHSTORE_CONFIG``), else open standalone mode."""
    if os.environ.get(CONFIG_ENV):
        initialize()
    elif part_config is None:
        raise ValueError(f"--part-config is required without graphstore launch ({CONFIG_ENV} is not set)")
    return DistGraph(graph_name, part_config=part_config)


def rank_and_world() -> tuple[int, int]:
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def all_reduce_sum(values: list[float], device: torch.device) -> list[float]:
    """Sum a few numbers over the trainer group (identity without one)."""
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    if dist.is_initialized():
        dist.all_reduce(tensor)
    return tensor.tolist()


def all_reduce_max(value: float, device: torch.device) -> float:
    tensor = torch.tensor([value], dtype=torch.float64, device=device)
    if dist.is_initialized():
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return float(tensor.item())


def mask_nodes(g: DistGraph, mask_name: str, max_nodes: int | None, seed: int) -> torch.Tensor:
    """Every node of a boolean mask (sorted), or a seeded random subset of ``max_nodes`` of them."""
    num_nodes = g.num_nodes()
    mask = g.ndata[mask_name][torch.arange(num_nodes)]
    nodes = torch.nonzero(mask.reshape(num_nodes, -1)[:, 0].bool(), as_tuple=True)[0]
    if max_nodes is not None and nodes.numel() > max_nodes:
        rng = np.random.default_rng(seed)
        nodes = torch.from_numpy(np.sort(rng.choice(nodes.numpy(), size=max_nodes, replace=False)))
    return nodes


# ----- models and samplers -------------------------------------------------------------------------


class MLP(nn.Module):
    """A features-only baseline: ``layers`` linear layers over each seed node's own features.

    It takes the same ``(blocks, x)`` as GraphSAGE and uses only the rows of the output nodes, which
    are the first rows of ``x`` (blocks put destination nodes first).
    """

    def __init__(self, in_feats: int, hidden: int, n_classes: int, layers: int, dropout: float):
        super().__init__()
        widths = [in_feats] + [hidden] * (layers - 1) + [n_classes]
        self.layers = nn.ModuleList(nn.Linear(widths[i], widths[i + 1]) for i in range(layers))
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, x: torch.Tensor) -> torch.Tensor:
        h = x[: blocks[-1].num_dst_nodes()]
        for index, layer in enumerate(self.layers):
            h = layer(h)
            if index != len(self.layers) - 1:
                h = self.dropout(F.relu(h))
        return h


def prepare_features(raw: torch.Tensor, config: TrainConfig) -> torch.Tensor:
    """Stored features (float32 / float16 / bfloat16) -> the model's float32 input, L1-normalized per
    row with ``feat_norm: row`` (what DGL's citation datasets apply to their 0/1 word vectors)."""
    x = raw.float()
    if config.feat_norm == "row":
        x = x / x.abs().sum(dim=-1, keepdim=True).clamp(min=1e-12)
    return x


def make_sampler(fanouts: list[int], seed: int | None) -> NeighborSampler:
    """Neighbor sampling whose every sample is a function of ``seed`` and the batch's nodes, so a fixed
    seed reproduces a run in standalone and distributed mode alike, whatever thread samples."""
    return NeighborSampler(fanouts, seed=seed)


def build_model(config: TrainConfig, in_feats: int, n_classes: int) -> nn.Module:
    if config.model == "mlp":
        return MLP(in_feats, config.hidden, n_classes, config.layers, config.dropout)
    return GraphSAGE(
        in_feats,
        config.hidden,
        n_classes,
        config.layers,
        dropout=config.dropout,
        aggregator_type=config.aggregator,
    )


def training_fanouts(config: TrainConfig) -> list[int]:
    """The MLP needs no neighbors: a one-layer sample of fanout 0 gives blocks of the seeds only."""
    return [0] if config.model == "mlp" else list(config.fanouts)


# ----- evaluation ----------------------------------------------------------------------------------


def _inner(model: nn.Module) -> nn.Module:
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


def autocast_context(device: torch.device, amp: str):
    dtype = AMP_DTYPES[amp]
    if dtype is None:
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


@torch.no_grad()
def evaluate_sampled(
    model: nn.Module,
    g: DistGraph,
    nodes: torch.Tensor,
    config: TrainConfig,
    device: torch.device,
    input_fn=None,
) -> float:
    """Accuracy over ``nodes`` (the same set on every rank; each rank predicts its ``node_split``).

    Args:
        model: the trained model.
        g: the graph.
        nodes: the evaluated node IDs.
        config: the run's settings (eval fanouts, batch size, amp, feature and label names).
        device: where the model is.
        input_fn: ``input_fn(input_nodes, blocks) -> x`` (default: the pulled features).

    Returns:
        The accuracy over all ranks' predictions.
    """
    module = _inner(model)
    module.eval()
    fanouts = [0] if config.model == "mlp" else (config.eval_fanouts or config.fanouts)
    local = node_split(nodes, g.get_partition_book(), force_even=True)
    correct = total = 0
    if local.numel():
        loader = DistNodeDataLoader(
            g,
            local,
            make_sampler(fanouts, config.seed),
            batch_size=config.eval_batch_size,
            shuffle=False,
            device=device,
            load_features=() if input_fn is not None else (config.feat_name,),
            load_labels=config.label_name,
            prefetch=config.prefetch,
            num_workers=config.num_workers,
            equal_batches=False,  # no collective per batch: padding would count nodes twice
        )
        for input_nodes, _, blocks in loader:
            if input_fn is not None:
                x = input_fn(input_nodes, blocks)
            else:
                x = prepare_features(blocks[0].srcdata[config.feat_name], config)
            with autocast_context(device, config.amp):
                logits = module(blocks, x)
            labels = blocks[-1].dstdata[config.label_name].reshape(-1)
            correct += int((logits.argmax(dim=-1) == labels).sum())
            total += int(labels.numel())
    correct, total = all_reduce_sum([correct, total], device)
    module.train()
    return correct / max(total, 1)


@torch.no_grad()
def layerwise_inference(
    model: nn.Module, g: DistGraph, config: TrainConfig, device: torch.device, tag: str
) -> DistTensor:
    """GraphSAGE's exact output for every node: one layer at a time over all nodes, each rank computing
    its ``node_split`` of the nodes with every in-neighbor, the layer's output kept in a DistTensor that
    the next layer reads (a barrier between layers).

    Returns:
        The DistTensor of logits ``[num_nodes, n_classes]`` (released when dropped).
    """
    module = _inner(model)
    module.eval()
    num_nodes = g.num_nodes()
    local = node_split(torch.ones(num_nodes, dtype=torch.bool), g.get_partition_book(), force_even=True)
    source = g.ndata[config.feat_name]
    for index, layer in enumerate(module.layers):
        first = index == 0
        width = layer.fc_neigh.out_features
        target = DistTensor((num_nodes, width), torch.float32, name=f"{tag}.layer{index}")
        loader = DistNodeDataLoader(
            g,
            local,
            NeighborSampler([-1]),
            batch_size=config.eval_batch_size,
            shuffle=False,
            load_features=(),
            load_labels=None,
            prefetch=config.prefetch,
            num_workers=config.num_workers,
            equal_batches=False,
        )
        for input_nodes, output_nodes, blocks in loader:
            h = source[input_nodes].to(device)
            h = prepare_features(h, config) if first else h.float()
            with autocast_context(device, config.amp):
                h = layer(blocks[0].to(device), h)
            if index != len(module.layers) - 1:
                h = module.activation(h)
            target[output_nodes] = h.float().cpu()
        g.barrier()
        source = target
    module.train()
    return source


def evaluate(
    model: nn.Module,
    g: DistGraph,
    masks: dict[str, torch.Tensor],
    config: TrainConfig,
    device: torch.device,
    tag: str,
) -> dict[str, float]:
    """Accuracy per mask name (``{'val': nodes, 'test': nodes}``), with the configured eval mode."""
    if config.eval_mode == "layerwise" and config.model == "sage":
        logits = layerwise_inference(model, g, config, device, tag)
        out = {}
        for name, nodes in masks.items():
            local = node_split(nodes, g.get_partition_book(), force_even=True)
            correct = 0
            if local.numel():
                predicted = logits[local].argmax(dim=-1)
                labels = g.ndata[config.label_name][local].reshape(-1)
                correct = int((predicted == labels).sum())
            correct, total = all_reduce_sum([correct, local.numel()], device)
            out[name] = correct / max(total, 1)
        g.barrier()  # nobody releases the layer tensors while another rank still reads them
        del logits
        return out
    return {name: evaluate_sampled(model, g, nodes, config, device) for name, nodes in masks.items()}


# ----- training ------------------------------------------------------------------------------------


@dataclass
class EpochStats:
    """What one epoch measured on this rank (sums are reduced over ranks before logging)."""

    loss_sum: float = 0.0
    correct: int = 0
    seeds: int = 0
    batches: int = 0
    feature_bytes: int = 0
    batch_losses: list[float] = field(default_factory=list)


def train_epoch(
    model: nn.Module,
    loader: DistNodeDataLoader,
    optimizer: torch.optim.Optimizer,
    scaler,
    config: TrainConfig,
    device: torch.device,
    progress_bar: bool,
    epoch: int,
    input_fn=None,
    after_backward=None,
) -> EpochStats:
    """One pass over this rank's training nodes.

    Args:
        input_fn: ``input_fn(input_nodes, blocks) -> x`` (default: the pulled features, counted in
            ``feature_bytes``).
        after_backward: called after each backward pass (e.g. a sparse optimizer's step).
    """
    stats = EpochStats()
    batches = tqdm(loader, total=len(loader), desc=f"epoch {epoch}", leave=False, disable=not progress_bar)
    for input_nodes, _, blocks in batches:
        if input_fn is None:
            raw = blocks[0].srcdata[config.feat_name]
            stats.feature_bytes += raw.numel() * raw.element_size()
            x = prepare_features(raw, config)
        else:
            x = input_fn(input_nodes, blocks)
        labels = blocks[-1].dstdata[config.label_name].reshape(-1)
        with autocast_context(device, config.amp):
            logits = model(blocks, x)
        loss = F.cross_entropy(logits.float(), labels)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        if after_backward is not None:
            after_backward()
        scaler.step(optimizer)
        scaler.update()
        loss_value = float(loss.detach())
        stats.batch_losses.append(loss_value)
        stats.loss_sum += loss_value * labels.numel()
        stats.correct += int((logits.detach().argmax(dim=-1) == labels).sum())
        stats.seeds += int(labels.numel())
        stats.batches += 1
        batches.set_postfix(loss=f"{loss_value:.4f}")
    return stats


def default_model_path(config: TrainConfig) -> str:
    folder = os.path.dirname(os.path.abspath(config.part_config)) if config.part_config else os.getcwd()
    return os.path.join(folder, f"{config.graph_name}_{config.model}.pt")


def run(config: TrainConfig) -> dict:
    """Train and evaluate; returns the run's figures (the same on every rank, written by rank 0)."""
    started = time.perf_counter()
    device = resolve_device(config.device)
    set_threads(config.num_threads)
    torch.manual_seed(config.seed)
    np.random.seed(config.seed)
    distributed = init_process_group(device)
    g = open_graph(config.graph_name, config.part_config)
    rank, world = rank_and_world()
    progress_bar = rank == 0 and (
        config.progress == "on" or (config.progress == "auto" and sys.stderr.isatty())
    )

    num_nodes = g.num_nodes()
    feat_scheme = g.ndata[config.feat_name]
    in_feats = int(np.prod(feat_scheme.shape[1:]))
    labels = g.ndata[config.label_name][torch.arange(num_nodes)].reshape(-1)
    n_classes = int(labels.max()) + 1
    train_nodes = node_split(g.ndata["train_mask"], g.get_partition_book(), force_even=True)
    eval_masks = {
        name: mask_nodes(g, f"{name}_mask", config.eval_max_nodes, config.seed)
        for name in ("val", "test")
        if f"{name}_mask" in g.ndata
    }
    if rank == 0:
        print(
            f"graph {config.graph_name}: {num_nodes:,} nodes, {g.num_edges():,} edges, {in_feats}-d "
            f"{feat_scheme.dtype} features, {n_classes} classes; {world} trainer(s), "
            f"{'distributed' if not get_context().standalone else 'standalone'}, model {config.model}, "
            f"device {device}, amp {config.amp}",
            flush=True,
        )

    model = build_model(config, in_feats, n_classes).to(device)
    if distributed:
        model = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    scaler = torch.amp.GradScaler(device.type, enabled=config.amp == "fp16")
    loader = DistNodeDataLoader(
        g,
        train_nodes,
        make_sampler(training_fanouts(config), config.seed),
        batch_size=config.batch_size,
        shuffle=True,
        device=device,
        load_features=(config.feat_name,),
        load_labels=config.label_name,
        prefetch=config.prefetch,
        num_workers=config.num_workers,
        seed=config.seed * 7919 + rank,
    )

    history = []
    val_acc = None
    for epoch in range(config.epochs):
        tick = time.perf_counter()
        stats = train_epoch(model, loader, optimizer, scaler, config, device, progress_bar, epoch)
        epoch_time = all_reduce_max(time.perf_counter() - tick, device)
        loss_sum, correct, seeds, feature_bytes = all_reduce_sum(
            [stats.loss_sum, stats.correct, stats.seeds, stats.feature_bytes], device
        )
        record = epoch_record(epoch, stats.batches, loss_sum, correct, seeds, epoch_time)
        record["feature_bytes"] = int(feature_bytes)
        record["batch_losses_rank0"] = stats.batch_losses if rank == 0 else None
        last = epoch == config.epochs - 1
        if "val" in eval_masks and config.eval_every and ((epoch + 1) % config.eval_every == 0) and not last:
            val_acc = evaluate(model, g, {"val": eval_masks["val"]}, config, device, f"eval{epoch}")["val"]
            record["val_acc"] = val_acc
        history.append(record)
        if rank == 0:
            val_text = f" | val acc {record['val_acc']:.4f}" if "val_acc" in record else ""
            print(
                f"epoch {epoch:3d} | loss {record['loss']:.4f} | train acc {record['train_acc']:.4f}"
                f"{val_text} | time {epoch_time:.2f}s | {record['batches_per_s']:.2f} batches/s "
                f"({stats.batches} batches) | features pulled {feature_bytes / 1e6:.1f} MB",
                flush=True,
            )

    final = evaluate(model, g, eval_masks, config, device, "final") if eval_masks else {}
    results = {
        "graph_name": config.graph_name,
        "model": config.model,
        "mode": "standalone" if get_context().standalone else "distributed",
        "world_size": world,
        "config": dataclasses.asdict(config),
        "epochs": history,
        "val_acc": final.get("val"),
        "test_acc": final.get("test"),
        "mean_epoch_time_s": float(np.mean([h["epoch_time_s"] for h in history])) if history else None,
        "feature_bytes_per_epoch": history[-1]["feature_bytes"] if history else 0,
        "total_time_s": time.perf_counter() - started,
    }
    if rank == 0:
        save_path = default_model_path(config) if config.save_model is None else config.save_model
        if save_path:
            os.makedirs(os.path.dirname(os.path.abspath(save_path)), exist_ok=True)
            torch.save(_inner(model).state_dict(), save_path)
            results["model_path"] = os.path.abspath(save_path)
            print(f"model saved to {save_path}", flush=True)
        report(config, results, final)
    finish(loader, distributed)
    return results


def epoch_record(
    epoch: int, batches: int, loss_sum: float, correct: float, seeds: float, epoch_time: float
) -> dict:
    """One epoch's log entry from the figures summed (and the time maxed) over every rank."""
    return {
        "epoch": epoch,
        "loss": loss_sum / max(seeds, 1),
        "train_acc": correct / max(seeds, 1),
        "epoch_time_s": epoch_time,
        "batches": batches,
        "batches_per_s": batches / epoch_time if epoch_time > 0 else 0.0,
        "seeds_per_s": seeds / epoch_time if epoch_time > 0 else 0.0,
    }


def report(config, results: dict, final: dict) -> None:
    """Rank 0's last words: the metrics JSON (if asked for) and the accuracy lines, test last."""
    if config.metrics_json:
        os.makedirs(os.path.dirname(os.path.abspath(config.metrics_json)), exist_ok=True)
        with open(config.metrics_json, "w") as handle:
            json.dump(results, handle, indent=1)
    if final.get("val") is not None:
        print(f"validation accuracy: {final['val']:.4f}", flush=True)
    if final.get("test") is not None:
        print(f"test accuracy: {final['test']:.4f}", flush=True)


def finish(loader, distributed: bool) -> None:
    """Stop the loader, wait for every rank, leave the servers and the process group."""
    loader.close()
    if distributed:
        dist.barrier()
    exit_client()
    if distributed:
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser)
    parser.add_argument("--model", help="sage (GraphSAGE, default) | mlp (features-only baseline)")
    args = parser.parse_args(argv)
    try:
        config = build_config(TrainConfig, args)
    except (ValueError, FileNotFoundError) as exc:
        parser.error(str(exc))
    run(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
