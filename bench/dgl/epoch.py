"""One GraphSAGE training epoch (2 layers, hidden 256, fanouts [10, 25], batch 1,024), either system.

The trainer adapter (``GraphstoreTrainer`` or ``DglTrainer``) gives this rank's training nodes
(the system's ``node_split``), its mini-batches (the system's own ``DistNodeDataLoader`` with its
own neighbor sampler, yielding ``(input features, labels, blocks)``), its GraphSAGE model (its own
SAGEConv layers, mean aggregator) and a barrier. The loop, the optimizer (Adam under
DistributedDataParallel over gloo) and the clock are the same for both.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

FANOUTS = (10, 25)
BATCH_SIZE = 1024
HIDDEN = 256
WARMUP_BATCHES = 2


def graphsage_epoch(trainer, num_classes: int, seed: int) -> dict:
    """Train one epoch on this rank's nodes; returns the epoch time and what was done.

    The epoch starts after a barrier (and a 2-batch warm-up) and ends after the next barrier, so
    every rank reports the time of the slowest one.
    """
    torch.manual_seed(seed)
    model = trainer.model(trainer.feat_dim, HIDDEN, num_classes)
    if dist.is_initialized():
        model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.003)
    nodes = trainer.train_nodes()

    def step(features, labels, blocks):
        loss = F.cross_entropy(model(blocks, features), labels.long())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    for count, batch in enumerate(trainer.batches(nodes, FANOUTS, BATCH_SIZE, seed + 1)):
        step(*batch)
        if count + 1 >= WARMUP_BATCHES:
            break
    trainer.barrier()
    batches, input_nodes = 0, 0
    start = time.perf_counter()
    for features, labels, blocks in trainer.batches(nodes, FANOUTS, BATCH_SIZE, seed):
        step(features, labels, blocks)
        batches += 1
        input_nodes += int(features.shape[0])
    trainer.barrier()
    seconds = time.perf_counter() - start
    return {
        "epoch_s": seconds,
        "batches": batches,
        "train_nodes": int(nodes.shape[0]),
        "input_nodes_per_batch": input_nodes / max(batches, 1),
    }
