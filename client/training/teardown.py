"""The end of a run: rank 0's report, then every trainer stops its loader, waits for the others, and
leaves the servers and the trainer group."""

from __future__ import annotations

import torch.distributed as dist

from graphstore.client import DistNodeDataLoader, exit_client
from graphstore.client.training.process import TrainerProcess
from graphstore.client.training.report import report_run


def finish_training(loader: DistNodeDataLoader, distributed: bool) -> None:
    """Stop the loader, wait for every rank, leave the servers and the process group.

    Args:
        loader: the training loader (its background threads stop).
        distributed: whether a process group exists (then every rank must call this).
    """
    loader.close()
    if distributed:
        dist.barrier()
    exit_client()
    if distributed:
        dist.destroy_process_group()


def finish_run(
    trainer: TrainerProcess, loader: DistNodeDataLoader, results: dict, metrics_json: str | None
) -> dict:
    """Rank 0 reports the run (:func:`~graphstore.client.training.report.report_run`: the metrics JSON and
    the accuracy lines, ``test accuracy: X.XXXX`` last); then every trainer finishes
    (:func:`finish_training`). Every rank calls it.

    Args:
        trainer: this trainer.
        loader: the training loader.
        results: the run's results.
        metrics_json: where rank 0 writes ``results`` (None or '': nowhere).

    Returns:
        ``results``.
    """
    if trainer.rank == 0:
        report_run(results, metrics_json)
    finish_training(loader, trainer.distributed)
    return results
