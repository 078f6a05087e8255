"""The figures of a run: each epoch's record (summed over the trainers), its log line, and the results
dict that rank 0 writes as the metrics JSON."""

from __future__ import annotations

import dataclasses
import statistics
import time

import torch

from graphstore.client.training.collectives import all_reduce_max, all_reduce_sum
from graphstore.client.training.config import TrainConfig
from graphstore.client.training.epoch import EpochStats
from graphstore.client.training.process import TrainerProcess


def epoch_record(
    epoch: int, batches: int, loss_sum: float, correct: float, seeds: float, epoch_time: float
) -> dict:
    """One epoch's log entry from the figures summed (and the time maxed) over every rank.

    Args:
        epoch: the epoch's number.
        batches: batches per rank.
        loss_sum: the loss summed over every seed.
        correct: seeds predicted right.
        seeds: seeds trained on.
        epoch_time: the slowest rank's epoch time in seconds.

    Returns:
        ``{epoch, loss, train_acc, epoch_time_s, batches, batches_per_s, seeds_per_s}``.
    """
    return {
        "epoch": epoch,
        "loss": loss_sum / max(seeds, 1),
        "train_acc": correct / max(seeds, 1),
        "epoch_time_s": epoch_time,
        "batches": batches,
        "batches_per_s": batches / epoch_time if epoch_time > 0 else 0.0,
        "seeds_per_s": seeds / epoch_time if epoch_time > 0 else 0.0,
    }


def reduce_epoch(epoch: int, stats: EpochStats, elapsed_s: float, device: torch.device, rank: int) -> dict:
    """An epoch's record over the trainer group (a collective: every rank calls it).

    Args:
        epoch: the epoch's number.
        stats: this rank's figures.
        elapsed_s: this rank's epoch time.
        device: where the group reduces.
        rank: this rank (only rank 0's batch losses are kept).

    Returns:
        :func:`epoch_record`'s entry, plus ``feature_bytes`` (summed over ranks) and
        ``batch_losses_rank0`` when the model read stored features.
    """
    epoch_time = all_reduce_max(elapsed_s, device)
    loss_sum, correct, seeds, feature_bytes = all_reduce_sum(
        [stats.loss_sum, stats.correct, stats.seeds, stats.feature_bytes or 0], device
    )
    record = epoch_record(epoch, stats.batches, loss_sum, correct, seeds, epoch_time)
    if stats.feature_bytes is not None:
        record["feature_bytes"] = int(feature_bytes)
        record["batch_losses_rank0"] = stats.batch_losses if rank == 0 else None
    return record


def epoch_line(record: dict) -> str:
    """The line rank 0 prints per epoch: loss, training accuracy, validation accuracy when measured,
    time, batches/s, and the batches and feature bytes when features were pulled.

    Args:
        record: :func:`reduce_epoch`'s record (with ``val_acc`` when measured).

    Returns:
        ``epoch   N | loss L | train acc A[ | val acc V] | time Ts | B batches/s[ (n batches) | features
        pulled M MB]``.
    """
    val_text = f" | val acc {record['val_acc']:.4f}" if "val_acc" in record else ""
    line = (
        f"epoch {record['epoch']:3d} | loss {record['loss']:.4f} | train acc {record['train_acc']:.4f}"
        f"{val_text} | time {record['epoch_time_s']:.2f}s | {record['batches_per_s']:.2f} batches/s"
    )
    if "feature_bytes" in record:
        line += f" ({record['batches']} batches) | features pulled {record['feature_bytes'] / 1e6:.1f} MB"
    return line


def summarize_run(
    config: TrainConfig,
    trainer: TrainerProcess,
    history: list[dict],
    final: dict[str, float],
    started: float,
    **extra,
) -> dict:
    """The run's results (the metrics JSON).

    Args:
        config: the run's settings (recorded in full).
        trainer: the trainer (its mode and the number of trainers are recorded).
        history: the epoch records.
        final: the final accuracies, ``{'val': ..., 'test': ...}`` (either may be missing).
        started: ``time.perf_counter()`` at the run's start.
        extra: further figures of the script, added as given.

    Returns:
        ``{graph_name, mode, world_size, config, epochs, val_acc, test_acc, mean_epoch_time_s,
        total_time_s, ...extra}``.
    """
    return {
        "graph_name": config.graph_name,
        "mode": trainer.mode,
        "world_size": trainer.world_size,
        "config": dataclasses.asdict(config),
        "epochs": history,
        "val_acc": final.get("val"),
        "test_acc": final.get("test"),
        "mean_epoch_time_s": statistics.fmean(h["epoch_time_s"] for h in history) if history else None,
        **extra,
        "total_time_s": time.perf_counter() - started,
    }


def reduce_cache_stats(loader, device: torch.device) -> dict:
    """The training loader's remote feature caches over the trainer group (a collective: every rank
    calls it).

    Args:
        loader: the training loader.
        device: where the group reduces.

    Returns:
        ``{feature: {remote_lookups, hits, rows_pulled, bytes_pulled, remote_hit_rate}}`` summed over the
        ranks; ``{}`` without a cache.
    """
    out = {}
    for name, stats in sorted(loader.cache_stats().items()):
        lookups, hits, rows, nbytes = all_reduce_sum(
            [stats.remote_lookups, stats.hits, stats.rows_pulled, stats.bytes_pulled], device
        )
        out[name] = {
            "remote_lookups": int(lookups),
            "hits": int(hits),
            "rows_pulled": int(rows),
            "bytes_pulled": int(nbytes),
            "remote_hit_rate": hits / lookups if lookups else 0.0,
        }
    return out
