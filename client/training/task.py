"""The node classification task of a run: the classes, this trainer's training nodes, and the nodes
the validation and test accuracies are measured on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from graphstore.client import DistGraph, node_split
from graphstore.client.training.config import TrainConfig
from graphstore.types import DEFAULT_NTYPE

EVALUATED_MASKS = ("val", "test")


@dataclass
class NodeTask:
    """What a node classification run trains and evaluates on.

    Attributes:
        num_nodes: nodes in the graph (of the classified type on a typed graph).
        num_classes: the largest label plus one.
        train_nodes: this trainer's share of the training nodes (``node_split`` of ``train_mask``);
            ``{target_ntype: IDs}`` on a typed graph.
        eval_nodes: ``{'val': nodes, 'test': nodes}`` for the masks the graph has (the same on every
            trainer; per-type IDs on a typed graph).
    """

    num_nodes: int
    num_classes: int
    train_nodes: torch.Tensor | dict[str, torch.Tensor]
    eval_nodes: dict[str, torch.Tensor]


def mask_nodes(
    g: DistGraph, mask_name: str, max_nodes: int | None, seed: int, ntype: str | None = None
) -> torch.Tensor:
    """Every node of a boolean mask (sorted), or a seeded random subset of ``max_nodes`` of them.

    Args:
        g: the graph.
        mask_name: the node data holding the mask.
        max_nodes: keep at most this many (None: all).
        seed: seeds the subset.
        ntype: the node type whose data holds the mask (None: a homogeneous graph).

    Returns:
        The node IDs (per-type IDs for a type).
    """
    num_nodes = g.num_nodes(ntype)
    mask = g.nodes[ntype].data[mask_name][torch.arange(num_nodes)]
    nodes = torch.nonzero(mask.reshape(num_nodes, -1)[:, 0].bool(), as_tuple=True)[0]
    if max_nodes is not None and nodes.numel() > max_nodes:
        rng = np.random.default_rng(seed)
        nodes = torch.from_numpy(np.sort(rng.choice(nodes.numpy(), size=max_nodes, replace=False)))
    return nodes


def load_task(g: DistGraph, config: TrainConfig) -> NodeTask:
    """Read the labels, split the training nodes and pick the evaluated ones.

    Args:
        g: the graph (with ``train_mask``, and optionally ``val_mask`` / ``test_mask``, on the nodes of
            ``config.target_ntype`` on a typed graph).
        config: the run's settings (``label_name``, ``target_ntype``, ``eval_max_nodes``, ``seed``).

    Returns:
        The task.

    Raises:
        KeyError: an unknown ``target_ntype``, or none on a typed graph.
    """
    ntype = config.target_ntype
    data = g.nodes[ntype].data
    num_nodes = g.num_nodes(ntype)
    labels = data[config.label_name][torch.arange(num_nodes)].reshape(-1)
    split_type = DEFAULT_NTYPE if ntype is None else ntype
    train_nodes = node_split(data["train_mask"], g.get_partition_book(), ntype=split_type, force_even=True)
    eval_nodes = {
        name: mask_nodes(g, f"{name}_mask", config.eval_max_nodes, config.seed, ntype)
        for name in EVALUATED_MASKS
        if f"{name}_mask" in data
    }
    return NodeTask(
        num_nodes, int(labels.max()) + 1, train_nodes if ntype is None else {ntype: train_nodes}, eval_nodes
    )
