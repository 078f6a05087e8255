"""The models a run trains, built from its config: GraphSAGE over sampled blocks, or the features-only
MLP baseline; their neighbor sampler; and the DistributedDataParallel wrapping."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from graphstore.client import GraphSAGE, NeighborSampler
from graphstore.client.training.config import TrainConfig


class MLP(nn.Module):
    """A features-only baseline: ``layers`` linear layers over each seed node's own features.

    It takes the same ``(blocks, x)`` as GraphSAGE and uses only the rows of the output nodes, which
    are the first rows of ``x`` (blocks put destination nodes first); on a typed graph ``x`` is
    ``{ntype: rows}`` and the output nodes are those of ``ntype``.

    Args:
        in_feats: input width.
        hidden: width of the hidden layers.
        n_classes: output width.
        layers: number of linear layers (at least 1).
        dropout: dropout after each hidden layer.
        ntype: the classified node type of a typed graph (None: ``x`` is one tensor).

    Raises:
        ValueError: ``layers`` below 1.
    """

    def __init__(
        self,
        in_feats: int,
        hidden: int,
        n_classes: int,
        layers: int,
        dropout: float,
        ntype: str | None = None,
    ):
        super().__init__()
        self.ntype = ntype
        if layers < 1:
            raise ValueError(f"layers must be at least 1, got {layers}")
        widths = [in_feats] + [hidden] * (layers - 1) + [n_classes]
        self.layers = nn.ModuleList(nn.Linear(widths[i], widths[i + 1]) for i in range(layers))
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, x: torch.Tensor) -> torch.Tensor:
        """Logits of the last block's destination nodes, ``[num_dst, n_classes]``."""
        if self.ntype is not None:
            x = x[self.ntype]
        h = x[: blocks[-1].num_dst_nodes(self.ntype)]
        for index, layer in enumerate(self.layers):
            h = layer(h)
            if index != len(self.layers) - 1:
                h = self.dropout(F.relu(h))
        return h


def build_model(config: TrainConfig, in_feats: int, n_classes: int) -> nn.Module:
    """The model ``config.model`` names, sized by the config (``hidden``, ``layers``, ``dropout``, and
    GraphSAGE's ``aggregator``).

    Args:
        config: the run's settings.
        in_feats: width of a node's input (features or embedding row).
        n_classes: number of classes.

    Returns:
        A module called as ``model(blocks, x)``, returning the logits of the last block's
        destination nodes.

    Raises:
        ValueError: an unknown ``config.model``.
    """
    if config.model == "mlp":
        return MLP(in_feats, config.hidden, n_classes, config.layers, config.dropout)
    if config.model != "sage":
        raise ValueError(f"model must be sage or mlp, got {config.model!r}")
    return GraphSAGE(
        in_feats,
        config.hidden,
        n_classes,
        config.layers,
        dropout=config.dropout,
        aggregator_type=config.aggregator,
    )


def make_sampler(fanouts: list[int], seed: int | None) -> NeighborSampler:
    """Neighbor sampling whose every sample is a function of ``seed`` and the batch's nodes, so a fixed
    seed reproduces a run in standalone and distributed mode alike, whatever thread samples.

    Args:
        fanouts: neighbors per layer, input layer first.
        seed: the run's seed.

    Returns:
        The sampler.
    """
    return NeighborSampler(fanouts, seed=seed)


def wrap_model(model: nn.Module, device: torch.device, distributed: bool) -> nn.Module:
    """Move the model to its device and, in a trainer group, wrap it in DistributedDataParallel (which
    all-reduces the dense gradients).

    Args:
        model: the freshly built model.
        device: the trainer's device.
        distributed: whether a process group exists.

    Returns:
        The model to train.
    """
    model = model.to(device)
    if distributed:
        model = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    return model


def unwrap_model(model: nn.Module) -> nn.Module:
    """The module inside a DistributedDataParallel wrapper (the model itself when not wrapped)."""
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
