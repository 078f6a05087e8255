"""One training epoch: the loader over this trainer's training nodes, and one pass over it (forward,
loss, backward, optimizer steps), measured in :class:`EpochStats`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from graphstore.client import DistGraph, DistNodeDataLoader
from graphstore.client.training.amp import autocast_context
from graphstore.client.training.config import TrainConfig
from graphstore.client.training.evaluation import InputFn
from graphstore.client.training.features import batch_labels, model_input, nbytes
from graphstore.client.training.models import make_sampler

# Spreads the loaders' shuffling seeds apart across ranks and runs (any prime works).
SHUFFLE_SEED_STRIDE = 7919


@dataclass
class EpochStats:
    """What one epoch measured on this rank (sums are reduced over ranks before logging).

    Attributes:
        loss_sum: the loss summed over the seeds (batch mean loss times batch size).
        correct: seeds predicted right.
        seeds: seeds trained on.
        batches: mini-batches.
        feature_bytes: bytes of input features pulled; None when the model read no stored features.
        batch_losses: each batch's mean loss, in order.
    """

    loss_sum: float = 0.0
    correct: int = 0
    seeds: int = 0
    batches: int = 0
    feature_bytes: int | None = None
    batch_losses: list[float] = field(default_factory=list)


# make_train_loader's default label: the config's (None is a value: no labels).
_CONFIG_LABELS = object()


def make_train_loader(
    g: DistGraph,
    train_nodes: torch.Tensor | dict[str, torch.Tensor],
    config: TrainConfig,
    device: torch.device,
    rank: int,
    load_features: tuple[str, ...],
    *,
    load_labels: str | None | object = _CONFIG_LABELS,
    cache_remote_features=None,
) -> DistNodeDataLoader:
    """The shuffled, seeded loader of this trainer's training nodes: blocks sampled with the training
    fanouts, labels (and ``load_features``) pulled in background threads.

    Args:
        g: the graph.
        train_nodes: this trainer's training nodes (``{ntype: IDs}`` on a typed graph).
        config: the run's settings (fanouts, batch size, seed, labels, prefetch, workers).
        device: where batches go.
        rank: this trainer's rank (each rank shuffles with its own seed).
        load_features: node data pulled for each batch's input nodes (``()``: none).
        load_labels: the label pulled for the output nodes (default: ``config.label_name``; None: none).
        cache_remote_features: the loader's remote feature cache (a share, or
            ``{feature: RemoteFeatureCache}``; 0: none; None: ``config.cache_remote_features``).

    Returns:
        The loader (every rank gets the same number of batches).
    """
    return DistNodeDataLoader(
        g,
        train_nodes,
        make_sampler(config.training_fanouts(), config.seed),
        batch_size=config.batch_size,
        shuffle=True,
        device=device,
        load_features=load_features,
        load_labels=config.label_name if load_labels is _CONFIG_LABELS else load_labels,
        prefetch=config.prefetch,
        num_workers=config.num_workers,
        seed=config.seed * SHUFFLE_SEED_STRIDE + rank,
        cache_remote_features=(
            config.cache_remote_features if cache_remote_features is None else cache_remote_features
        ),
        **config.loader_placement(),
    )


def train_epoch(
    model: nn.Module,
    loader: DistNodeDataLoader,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    config: TrainConfig,
    device: torch.device,
    *,
    epoch: int,
    show_progress: bool = False,
    input_fn: InputFn | None = None,
    sparse_optimizers: Sequence = (),
) -> EpochStats:
    """One pass over this rank's training nodes.

    Args:
        model: the model (DDP-wrapped in a trainer group).
        loader: :func:`make_train_loader`'s loader.
        optimizer: the dense parameters' optimizer.
        scaler: the loss scaler (:func:`~graphstore.client.training.amp.make_grad_scaler`).
        config: the run's settings (features, labels, amp).
        device: where the model is.
        epoch: the epoch's number (the progress bar's label).
        show_progress: draw a tqdm bar.
        input_fn: ``input_fn(input_nodes, blocks) -> x`` (default: the pulled features, counted in
            ``feature_bytes``).
        sparse_optimizers: stepped after each backward pass, before the dense step, through the scaler
            (``scaler.step(sparse_optimizer)``): under fp16 their gradients are unscaled, and a step with
            an inf/NaN gradient on any trainer is skipped on all of them; otherwise a plain step.

    Returns:
        This rank's figures of the epoch.
    """
    stats = EpochStats(feature_bytes=0 if input_fn is None else None)
    batches = tqdm(loader, total=len(loader), desc=f"epoch {epoch}", leave=False, disable=not show_progress)
    # The loss and the correct predictions stay on the model's device until the epoch ends: reading them
    # each batch would make the CPU wait for the GPU to finish it before it queues the next one.
    losses: list[torch.Tensor] = []
    sizes: list[int] = []
    correct = torch.zeros((), dtype=torch.int64, device=device)
    input_dtype = config.model_input_dtype()
    for input_nodes, _, blocks in batches:
        if input_fn is None:
            raw = blocks[0].srcdata[config.feat_name]
            stats.feature_bytes += nbytes(raw)
            x = model_input(raw, config.feat_norm, input_dtype)
        else:
            x = input_fn(input_nodes, blocks)
        labels = batch_labels(blocks[-1], config.label_name, config.target_ntype)
        with autocast_context(device, config.amp):
            logits = model(blocks, x)
        loss = F.cross_entropy(logits.float(), labels)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        for sparse_optimizer in sparse_optimizers:
            scaler.step(sparse_optimizer)
        scaler.step(optimizer)
        scaler.update()
        loss = loss.detach()
        losses.append(loss)
        sizes.append(int(labels.numel()))
        correct += (logits.detach().argmax(dim=-1) == labels).sum()
        if show_progress:
            batches.set_postfix(loss=f"{float(loss):.4f}")
    stats.batch_losses = [float(v) for v in torch.stack(losses).tolist()] if losses else []
    stats.loss_sum = sum(value * size for value, size in zip(stats.batch_losses, sizes, strict=True))
    stats.correct = int(correct)
    stats.seeds = sum(sizes)
    stats.batches = len(sizes)
    return stats
