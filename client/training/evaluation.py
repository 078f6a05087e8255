"""Accuracy of a trained model over all trainers: sampled inference over the evaluated nodes, or exact
layer-wise GraphSAGE inference over every node (``eval_mode``).

Every trainer evaluates its ``node_split`` of the same nodes and the counts are summed over the group,
so every trainer returns the same accuracy.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from graphstore.client import DistGraph, DistNodeDataLoader, DistTensor, NeighborSampler, node_split
from graphstore.client.training.amp import autocast_context
from graphstore.client.training.collectives import all_reduce_sum
from graphstore.client.training.config import TrainConfig
from graphstore.client.training.features import batch_labels, model_input, prepare_features
from graphstore.client.training.models import make_sampler, unwrap_model
from graphstore.types import DEFAULT_NTYPE

# ``input_fn(input_nodes, blocks) -> x``: a batch's model input in place of the pulled features.
InputFn = Callable[[torch.Tensor, list], torch.Tensor]


@torch.no_grad()
def evaluate_sampled(
    model: nn.Module,
    g: DistGraph,
    nodes: torch.Tensor,
    config: TrainConfig,
    device: torch.device,
    input_fn: InputFn | None = None,
) -> float:
    """Accuracy over ``nodes`` (the same set on every rank; each rank predicts its ``node_split``).

    Args:
        model: the trained model.
        g: the graph.
        nodes: the evaluated node IDs (of ``config.target_ntype`` on a typed graph).
        config: the run's settings (eval fanouts, batch size, amp, feature and label names).
        device: where the model is.
        input_fn: ``input_fn(input_nodes, blocks) -> x`` (default: the pulled features).

    Returns:
        The accuracy over all ranks' predictions.
    """
    module = unwrap_model(model)
    module.eval()
    ntype = config.target_ntype
    local = node_split(nodes, g.get_partition_book(), ntype=ntype or DEFAULT_NTYPE, force_even=True)
    correct = total = 0
    if local.numel():
        loader = DistNodeDataLoader(
            g,
            local if ntype is None else {ntype: local},
            make_sampler(config.inference_fanouts(), config.seed),
            batch_size=config.eval_batch_size,
            shuffle=False,
            device=device,
            load_features=() if input_fn is not None else (config.feat_name,),
            load_labels=config.label_name,
            prefetch=config.prefetch,
            num_workers=config.num_workers,
            equal_batches=False,  # no collective per batch: padding would count nodes twice
            **config.loader_placement(),
        )
        for input_nodes, _, blocks in loader:
            if input_fn is not None:
                x = input_fn(input_nodes, blocks)
            else:
                x = model_input(
                    blocks[0].srcdata[config.feat_name], config.feat_norm, config.model_input_dtype()
                )
            with autocast_context(device, config.amp):
                logits = module(blocks, x)
            labels = batch_labels(blocks[-1], config.label_name, ntype)
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

    Args:
        model: the trained GraphSAGE (DDP-wrapped or not).
        g: the graph.
        config: the run's settings (features, eval batch size, amp, loader settings).
        device: where the model is.
        tag: names the layers' DistTensors (``{tag}.layer{i}``), unique per call.

    Returns:
        The DistTensor of logits ``[num_nodes, n_classes]`` (released when dropped).
    """
    module = unwrap_model(model)
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
            h = prepare_features(h, config.feat_norm) if first else h.float()
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
    input_fn: InputFn | None = None,
) -> dict[str, float]:
    """Accuracy per mask name (``{'val': nodes, 'test': nodes}``), with the configured eval mode.

    Args:
        model: the trained model.
        g: the graph.
        masks: the evaluated nodes per name (none: no evaluation).
        config: the run's settings (``eval_mode`` and the rest).
        device: where the model is.
        tag: names layer-wise inference's DistTensors, unique per call.
        input_fn: ``input_fn(input_nodes, blocks) -> x`` in place of the features (sampled mode only).

    Returns:
        ``{name: accuracy}``.

    Raises:
        ValueError: layer-wise evaluation of a model that reads ``input_fn`` instead of the features.
    """
    if not masks:
        return {}
    if config.eval_mode == "layerwise" and config.model == "sage":
        if input_fn is not None:
            raise ValueError("eval_mode 'layerwise' reads the stored features; use 'sampled' with input_fn")
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
    return {
        name: evaluate_sampled(model, g, nodes, config, device, input_fn=input_fn)
        for name, nodes in masks.items()
    }
