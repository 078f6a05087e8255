"""The node classification task of a run: the classes, this trainer's training nodes, and the nodes
the validation and test accuracies are measured on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from graphstore.client import DistGraph, node_split
from graphstore.client.training.config import TrainConfig

EVALUATED_MASKS = ("val", "test")


@dataclass
class NodeTask:
    """What a node classification run trains and evaluates on.

    Attributes:
        num_nodes: nodes in the graph.
        num_classes: the largest label plus one.
        train_nodes: this trainer's share of the training nodes (``node_split`` of ``train_mask``).
        eval_nodes: ``{'val': nodes, 'test': nodes}`` for the masks the graph has (the same on every
            trainer).
    """

    num_nodes: int
    num_classes: int
    train_nodes: torch.Tensor
    eval_nodes: dict[str, torch.Tensor]


def mask_nodes(g: DistGraph, mask_name: str, max_nodes: int | None, seed: int) -> torch.Tensor:
    """Every node of a boolean mask (sorted), or a seeded random subset of ``max_nodes`` of them.

    Args:
        g: the graph.
        mask_name: the node data holding the mask.
        max_nodes: keep at most this many (None: all).
        seed: seeds the subset.

    Returns:
        The node IDs.
    """
    num_nodes = g.num_nodes()
    mask = g.ndata[mask_name][torch.arange(num_nodes)]
    nodes = torch.nonzero(mask.reshape(num_nodes, -1)[:, 0].bool(), as_tuple=True)[0]
    if max_nodes is not None and nodes.numel() > max_nodes:
        rng = np.random.default_rng(seed)
        nodes = torch.from_numpy(np.sort(rng.choice(nodes.numpy(), size=max_nodes, replace=False)))
    return nodes


def load_task(g: DistGraph, config: TrainConfig) -> NodeTask:
    """Read the labels, split the training nodes and pick the evaluated ones.

    Args:
        g: the graph (with ``train_mask``, and optionally ``val_mask`` / ``test_mask``).
        config: the run's settings (``label_name``, ``eval_max_nodes``, ``seed``).

    Returns:
        The task.
    """
    num_nodes = g.num_nodes()
    labels = g.ndata[config.label_name][torch.arange(num_nodes)].reshape(-1)
    train_nodes = node_split(g.ndata["train_mask"], g.get_partition_book(), force_even=True)
    eval_nodes = {
        name: mask_nodes(g, f"{name}_mask", config.eval_max_nodes, config.seed)
        for name in EVALUATED_MASKS
        if f"{name}_mask" in g.ndata
    }
    return NodeTask(num_nodes, int(labels.max()) + 1, train_nodes, eval_nodes)
