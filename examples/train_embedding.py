"""Featureless node classification with learnable node embeddings (DistEmbedding + SparseAdagrad).

The graph's features are ignored: every node gets a trainable row of a ``DistEmbedding`` table that
lives on the partition servers, a GraphSAGE model reads those rows for a mini-batch's input nodes,
and after each backward pass the distributed ``SparseAdagrad`` sends the rows' gradients to their
owners, which update the rows and their Adagrad state in place (the dense GraphSAGE weights train
with Adam under DDP, as in ``train_dist.py``). ``--freeze-embeddings`` is the baseline: the same model
on the same random rows, never updated.

Like ``train_dist.py`` it runs standalone (``--part-config``, no servers) or under ``graphstore launch``
unchanged::

    python examples/train_embedding.py --graph-name g --part-config data/g/g.json
    graphstore launch --config cluster.yaml -- python examples/train_embedding.py --graph-name g \\
        --part-config data/g/g.json

The last line printed is ``test accuracy: X.XXXX``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from graphstore.client import DistEmbedding, get_context, node_split
from graphstore.client.dataloader import DistNodeDataLoader
from graphstore.client.optim import SparseAdagrad
from graphstore.types import InitSpec

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_dist  # noqa: E402 - the shared training machinery of the examples


@dataclass
class EmbeddingConfig(train_dist.TrainConfig):
    """:class:`train_dist.TrainConfig` plus the embedding settings.

    Attributes:
        emb_dim: width of a node's embedding row.
        sparse_lr: SparseAdagrad learning rate of the embedding rows.
        init_scale: rows start uniform in ``[-init_scale, init_scale]`` (seeded).
        freeze_embeddings: never update the rows (the random-embedding baseline).
        embedding_name: the table's name on the servers.
    """

    emb_dim: int = 64
    sparse_lr: float = 0.05
    init_scale: float = 0.1
    freeze_embeddings: bool = False
    embedding_name: str = "node_emb"

    def validate(self) -> None:
        super().validate()
        if self.model != "sage":
            raise ValueError(f"train_embedding.py trains GraphSAGE only, got model {self.model!r}")
        if self.eval_mode != "sampled":
            raise ValueError(f"train_embedding.py evaluates by sampled inference, got {self.eval_mode!r}")
        if self.emb_dim < 1 or self.sparse_lr <= 0 or self.init_scale <= 0:
            raise ValueError(
                f"emb_dim, sparse_lr and init_scale must be positive, got {self.emb_dim}, "
                f"{self.sparse_lr}, {self.init_scale}"
            )


def run(config: EmbeddingConfig) -> dict:
    """Train and evaluate; returns the run's figures (written by rank 0)."""
    started = time.perf_counter()
    device = train_dist.resolve_device(config.device)
    train_dist.set_threads(config.num_threads)
    torch.manual_seed(config.seed)
    distributed = train_dist.init_process_group(device)
    g = train_dist.open_graph(config.graph_name, config.part_config)
    rank, world = train_dist.rank_and_world()
    progress_bar = rank == 0 and (
        config.progress == "on" or (config.progress == "auto" and sys.stderr.isatty())
    )
    num_nodes = g.num_nodes()
    labels = g.ndata[config.label_name][torch.arange(num_nodes)].reshape(-1)
    n_classes = int(labels.max()) + 1
    train_nodes = node_split(g.ndata["train_mask"], g.get_partition_book(), force_even=True)
    eval_masks = {
        name: train_dist.mask_nodes(g, f"{name}_mask", config.eval_max_nodes, config.seed)
        for name in ("val", "test")
        if f"{name}_mask" in g.ndata
    }

    emb = DistEmbedding(
        num_nodes,
        config.emb_dim,
        name=config.embedding_name,
        init_func=InitSpec("uniform", -config.init_scale, config.init_scale, seed=config.seed),
    )
    probe = torch.from_numpy(
        np.random.default_rng(config.seed).choice(num_nodes, min(num_nodes, 2000), replace=False)
    )
    with torch.no_grad():
        probe_before = emb(probe).clone()
    if rank == 0:
        print(
            f"graph {config.graph_name}: {num_nodes:,} nodes, features hidden; {config.emb_dim}-d "
            f"{'frozen' if config.freeze_embeddings else 'learned'} embeddings; {world} trainer(s), "
            f"{'standalone' if get_context().standalone else 'distributed'}",
            flush=True,
        )

    model = train_dist.build_model(config, config.emb_dim, n_classes).to(device)
    if distributed:
        model = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    scaler = torch.amp.GradScaler(device.type, enabled=config.amp == "fp16")
    sparse_optimizer = None if config.freeze_embeddings else SparseAdagrad([emb], lr=config.sparse_lr)

    def embed(input_nodes: torch.Tensor, blocks) -> torch.Tensor:
        if sparse_optimizer is None:
            with torch.no_grad():
                return emb(input_nodes, device=device)
        return emb(input_nodes, device=device)

    loader = DistNodeDataLoader(
        g,
        train_nodes,
        train_dist.make_sampler(config.fanouts, config.seed),
        batch_size=config.batch_size,
        shuffle=True,
        device=device,
        load_features=(),
        load_labels=config.label_name,
        prefetch=config.prefetch,
        num_workers=config.num_workers,
        seed=config.seed * 7919 + rank,
    )
    history = []
    for epoch in range(config.epochs):
        tick = time.perf_counter()
        stats = train_dist.train_epoch(
            model,
            loader,
            optimizer,
            scaler,
            config,
            device,
            progress_bar,
            epoch,
            input_fn=embed,
            after_backward=sparse_optimizer.step if sparse_optimizer is not None else None,
        )
        epoch_time = train_dist.all_reduce_max(time.perf_counter() - tick, device)
        loss_sum, correct, seeds = train_dist.all_reduce_sum(
            [stats.loss_sum, stats.correct, stats.seeds], device
        )
        record = train_dist.epoch_record(epoch, stats.batches, loss_sum, correct, seeds, epoch_time)
        last = epoch == config.epochs - 1
        if "val" in eval_masks and config.eval_every and (epoch + 1) % config.eval_every == 0 and not last:
            record["val_acc"] = train_dist.evaluate_sampled(
                model, g, eval_masks["val"], config, device, input_fn=embed
            )
        history.append(record)
        if rank == 0:
            val_text = f" | val acc {record['val_acc']:.4f}" if "val_acc" in record else ""
            print(
                f"epoch {epoch:3d} | loss {record['loss']:.4f} | train acc {record['train_acc']:.4f}"
                f"{val_text} | time {epoch_time:.2f}s | {record['batches_per_s']:.2f} batches/s",
                flush=True,
            )

    final = {
        name: train_dist.evaluate_sampled(model, g, nodes, config, device, input_fn=embed)
        for name, nodes in eval_masks.items()
    }
    with torch.no_grad():
        changed = int((emb(probe) != probe_before).any(dim=1).sum())
    results = {
        "graph_name": config.graph_name,
        "mode": "standalone" if get_context().standalone else "distributed",
        "world_size": world,
        "freeze_embeddings": config.freeze_embeddings,
        "config": dataclasses.asdict(config),
        "epochs": history,
        "val_acc": final.get("val"),
        "test_acc": final.get("test"),
        "embedding_rows_probed": int(probe.numel()),
        "embedding_rows_changed": changed,
        "mean_epoch_time_s": float(np.mean([h["epoch_time_s"] for h in history])) if history else None,
        "total_time_s": time.perf_counter() - started,
    }
    if rank == 0:
        save_path = (
            train_dist.default_model_path(config).replace(".pt", "_emb.pt")
            if config.save_model is None
            else config.save_model
        )
        if save_path:
            torch.save(train_dist._inner(model).state_dict(), save_path)
            print(f"dense model saved to {save_path} (the embedding rows stay on the servers)", flush=True)
        train_dist.report(config, results, final)
    train_dist.finish(loader, distributed)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    train_dist.add_common_arguments(parser)
    parser.add_argument("--emb-dim", type=int, help="embedding width (default 64)")
    parser.add_argument("--sparse-lr", type=float, help="SparseAdagrad learning rate (default 0.05)")
    parser.add_argument("--init-scale", type=float, help="rows start in U(-s, s) (default 0.1)")
    parser.add_argument(
        "--freeze-embeddings",
        action="store_true",
        default=None,
        help="baseline: keep the random rows, train only the dense model",
    )
    parser.add_argument("--embedding-name", help="the table's name on the servers (default node_emb)")
    args = parser.parse_args(argv)
    try:
        config = train_dist.build_config(EmbeddingConfig, args)
    except (ValueError, FileNotFoundError) as exc:
        parser.error(str(exc))
    run(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
