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

The training loop's pieces come from ``graphstore.client.training``.
"""

from __future__ import annotations

import sys
import time

import torch

from graphstore.client import training
from graphstore.errors import GraphstoreError


def run(config: training.TrainConfig) -> dict:
    """Train and evaluate; returns the run's figures (the same on every rank, written by rank 0)."""
    started = time.perf_counter()
    trainer = training.setup_trainer(config)  # device, threads, seeds, process group, graph
    g, device = trainer.graph, trainer.device
    task = training.load_task(g, config)  # classes, this rank's training nodes, the val / test nodes
    features = g.ndata[config.feat_name]
    in_feats = training.feature_width(features)
    if trainer.rank == 0:
        print(
            f"graph {config.graph_name}: {task.num_nodes:,} nodes, {g.num_edges():,} edges, {in_feats}-d "
            f"{features.dtype} features, {task.num_classes} classes; {trainer.world_size} trainer(s), "
            f"{trainer.mode}, model {config.model}, device {device}, amp {config.amp}",
            flush=True,
        )

    model = training.wrap_model(
        training.build_model(config, in_feats, task.num_classes), device, trainer.distributed
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    scaler = training.make_grad_scaler(device, config.amp)
    loader = training.make_train_loader(
        g, task.train_nodes, config, device, trainer.rank, (config.feat_name,)
    )

    history = []
    for epoch in range(config.epochs):
        tick = time.perf_counter()
        stats = training.train_epoch(
            model, loader, optimizer, scaler, config, device, epoch=epoch, show_progress=trainer.show_progress
        )
        record = training.reduce_epoch(epoch, stats, time.perf_counter() - tick, device, trainer.rank)
        if "val" in task.eval_nodes and config.validates_after(epoch):
            val_nodes = {"val": task.eval_nodes["val"]}
            accuracy = training.evaluate(model, g, val_nodes, config, device, f"eval{epoch}")
            record["val_acc"] = accuracy["val"]
        history.append(record)
        if trainer.rank == 0:
            print(training.epoch_line(record), flush=True)

    final = training.evaluate(model, g, task.eval_nodes, config, device, "final")
    feature_bytes = history[-1]["feature_bytes"] if history else 0
    cache = training.reduce_cache_stats(loader, device)
    results = training.summarize_run(
        config, trainer, history, final, started, model=config.model, feature_bytes_per_epoch=feature_bytes
    )
    if cache:
        results["feature_cache"] = cache
        if trainer.rank == 0:
            for name, figures in cache.items():
                print(
                    f"feature cache {name!r}: {figures['remote_hit_rate']:.1%} of remote rows served, "
                    f"{figures['rows_pulled']:,} rows pulled",
                    flush=True,
                )
    if trainer.rank == 0:
        save_path = training.default_model_path(config) if config.save_model is None else config.save_model
        if save_path:
            results["model_path"] = training.save_model(model, save_path)
            print(f"model saved to {save_path}", flush=True)
    return training.finish_run(trainer, loader, results, config.metrics_json)


def main(argv: list[str] | None = None) -> int:
    parser = training.argument_parser(__doc__)  # every TrainConfig flag but --model
    parser.add_argument("--model", help="sage (GraphSAGE, default) | mlp (features-only baseline)")
    config = training.config_from_args(parser, training.TrainConfig, argv)
    try:
        run(config)
    except GraphstoreError as exc:  # a server gone or misconfigured: one line naming it, no traceback
        print(f"train_dist.py: error: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
