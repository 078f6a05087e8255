"""Distributed entity classification with a relational GCN on a typed (ogbn-mag-like) graph.

The papers of ``graphstore generate --schema mag`` are classified from their 128-d features and from the
relations around them (``writes``, ``cites``, ``affiliated_with``, ``has_topic`` and their ``rev_``
reverses). Authors, institutions and fields of study have no features: each of their nodes gets a
learnable row of a ``DistEmbedding`` table on the partition servers, trained by ``SparseAdagrad``. The
model is two ``RelGraphConv`` layers (basis decomposition, self-loops) over typed blocks sampled with
a fanout per edge type; ``--model mlp`` is the baseline that reads the paper features only.

Like ``train_dist.py`` it runs standalone or under ``graphstore launch`` unchanged::

    graphstore generate --schema mag --num-nodes 60000 --out mag.npz
    graphstore partition --graph mag.npz --name mag --num-parts 2 --out data/mag
    python examples/train_rgcn.py --graph-name mag --part-config data/mag/mag.json
    graphstore launch --config configs/local-2part-mag.yaml -- \\
        python examples/train_rgcn.py --graph-name mag --part-config data/mag/mag.json

Settings come from flags, or from a training YAML (``--config configs/train-rgcn.yaml``) that flags
override. A lost server ends the run with one line naming it. The last line printed is
``test accuracy: X.XXXX``.
"""

from __future__ import annotations

import sys
import time

import torch

from graphstore.client import SparseAdagrad, training


def run(config: training.RGCNConfig) -> dict:
    """Train and evaluate; returns the run's figures (the same on every rank, written by rank 0)."""
    started = time.perf_counter()
    trainer = training.setup_trainer(config)  # device, threads, seeds, process group, graph
    g, device = trainer.graph, trainer.device
    task = training.load_task(g, config)  # the papers' classes, this rank's training papers, val / test
    model, embedding = training.build_relational_model(config, g, task.num_classes)
    if trainer.rank == 0:
        print(
            f"graph {config.graph_name}: {g.num_nodes():,} nodes of types {g.ntypes}, {g.num_edges():,} "
            f"edges of {len(g.canonical_etypes)} types; {task.num_nodes:,} {config.target_ntype} nodes, "
            f"{task.num_classes} classes; embeddings for {list(embedding or [])}; {trainer.world_size} "
            f"trainer(s), {trainer.mode}, model {config.model}",
            flush=True,
        )

    model = training.wrap_model(model, device, trainer.distributed)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    sparse_optimizer = SparseAdagrad(list(embedding.values()), lr=config.sparse_lr) if embedding else None
    scaler = training.make_grad_scaler(device, config.amp)
    loader = training.make_train_loader(
        g, task.train_nodes, config, device, trainer.rank, (config.feat_name,)
    )

    history = []
    for epoch in range(config.epochs):
        tick = time.perf_counter()
        stats = training.train_epoch(
            model,
            loader,
            optimizer,
            scaler,
            config,
            device,
            epoch=epoch,
            show_progress=trainer.show_progress,
            sparse_optimizers=[sparse_optimizer] if sparse_optimizer is not None else (),
        )
        record = training.reduce_epoch(epoch, stats, time.perf_counter() - tick, device, trainer.rank)
        if "val" in task.eval_nodes and config.validates_after(epoch):
            val_nodes = {"val": task.eval_nodes["val"]}
            record["val_acc"] = training.evaluate(model, g, val_nodes, config, device, f"eval{epoch}")["val"]
        history.append(record)
        if trainer.rank == 0:
            print(training.epoch_line(record), flush=True)

    final = training.evaluate(model, g, task.eval_nodes, config, device, "final")
    results = training.summarize_run(config, trainer, history, final, started, model=config.model)
    if trainer.rank == 0 and config.save_model:
        results["model_path"] = training.save_model(model, config.save_model)
        print(f"model saved to {config.save_model} (the embedding rows stay on the servers)", flush=True)
    return training.finish_run(trainer, loader, results, config.metrics_json)


def main(argv: list[str] | None = None) -> int:
    parser = training.argument_parser(__doc__)  # every TrainConfig flag but --model
    training.add_rgcn_arguments(parser)  # --model rgcn|mlp, --num-bases, --sparse-lr, ...
    run(training.config_from_args(parser, training.RGCNConfig, argv))
    return 0


if __name__ == "__main__":
    sys.exit(training.run_main(main, "train_rgcn.py"))
