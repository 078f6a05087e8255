"""Featureless node classification with learnable node embeddings (DistEmbedding + SparseAdagrad).

The graph's features are ignored: every node gets a trainable row of a ``DistEmbedding`` table that
lives on the partition servers, a GraphSAGE model reads those rows for a mini-batch's input nodes,
and after each backward pass the distributed ``SparseAdagrad`` (stepped through the loss scaler, so
``--amp fp16`` works) sends the rows' gradients to their owners, which update the rows and their
Adagrad state in place (the dense GraphSAGE weights train with Adam under DDP, as in
``train_dist.py``). ``--freeze-embeddings`` is the baseline: the same model on the same random rows,
never updated.

Like ``train_dist.py`` it runs standalone (``--part-config``, no servers) or under ``graphstore launch``
unchanged::

    python examples/train_embedding.py --graph-name g --part-config data/g/g.json
    graphstore launch --config cluster.yaml -- python examples/train_embedding.py --graph-name g \\
        --part-config data/g/g.json

The last line printed is ``test accuracy: X.XXXX``.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

from graphstore.client import DistEmbedding, SparseAdagrad, training
from graphstore.types import InitSpec

PROBED_ROWS = 2000  # rows compared before and after training, to show that the table learned


def run(config: training.EmbeddingConfig) -> dict:
    """Train and evaluate; returns the run's figures (written by rank 0)."""
    started = time.perf_counter()
    trainer = training.setup_trainer(config)  # device, threads, seeds, process group, graph
    g, device = trainer.graph, trainer.device
    task = training.load_task(g, config)  # classes, this rank's training nodes, the val / test nodes

    emb = DistEmbedding(
        task.num_nodes,
        config.emb_dim,
        name=config.embedding_name,
        init_func=InitSpec("uniform", -config.init_scale, config.init_scale, seed=config.seed),
    )
    rng = np.random.default_rng(config.seed)
    probe = torch.from_numpy(rng.choice(task.num_nodes, min(task.num_nodes, PROBED_ROWS), replace=False))
    with torch.no_grad():
        probe_before = emb(probe).clone()
    if trainer.rank == 0:
        print(
            f"graph {config.graph_name}: {task.num_nodes:,} nodes, features hidden; {config.emb_dim}-d "
            f"{'frozen' if config.freeze_embeddings else 'learned'} embeddings; {trainer.world_size} "
            f"trainer(s), {trainer.mode}",
            flush=True,
        )

    model = training.wrap_model(
        training.build_model(config, config.emb_dim, task.num_classes), device, trainer.distributed
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    scaler = training.make_grad_scaler(device, config.amp)
    sparse_optimizer = None if config.freeze_embeddings else SparseAdagrad([emb], lr=config.sparse_lr)
    loader = training.make_train_loader(g, task.train_nodes, config, device, trainer.rank, load_features=())

    def embed(input_nodes: torch.Tensor, blocks) -> torch.Tensor:
        """The model's input: the input nodes' embedding rows (no gradient when frozen)."""
        if sparse_optimizer is None:
            with torch.no_grad():
                return emb(input_nodes, device=device)
        return emb(input_nodes, device=device)

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
            input_fn=embed,
            sparse_optimizers=[sparse_optimizer] if sparse_optimizer is not None else (),
        )
        record = training.reduce_epoch(epoch, stats, time.perf_counter() - tick, device, trainer.rank)
        if "val" in task.eval_nodes and config.validates_after(epoch):
            val_nodes = {"val": task.eval_nodes["val"]}
            accuracy = training.evaluate(model, g, val_nodes, config, device, "val", input_fn=embed)
            record["val_acc"] = accuracy["val"]
        history.append(record)
        if trainer.rank == 0:
            print(training.epoch_line(record), flush=True)

    final = training.evaluate(model, g, task.eval_nodes, config, device, "final", input_fn=embed)
    with torch.no_grad():
        changed = int((emb(probe) != probe_before).any(dim=1).sum())
    results = training.summarize_run(
        config,
        trainer,
        history,
        final,
        started,
        freeze_embeddings=config.freeze_embeddings,
        embedding_rows_probed=int(probe.numel()),
        embedding_rows_changed=changed,
        sparse_steps_skipped=sparse_optimizer.timings.steps_skipped if sparse_optimizer is not None else 0,
    )
    if trainer.rank == 0:
        save_path = (
            training.default_model_path(config, "_emb") if config.save_model is None else config.save_model
        )
        if save_path:
            training.save_model(model, save_path)
            print(f"dense model saved to {save_path} (the embedding rows stay on the servers)", flush=True)
    return training.finish_run(trainer, loader, results, config.metrics_json)


def main(argv: list[str] | None = None) -> int:
    parser = training.argument_parser(__doc__)
    training.add_embedding_arguments(parser)  # --emb-dim, --sparse-lr, ...
    run(training.config_from_args(parser, training.EmbeddingConfig, argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
