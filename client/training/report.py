"""What rank 0 leaves behind at the end of a run: the model file, the metrics JSON, and the accuracy
lines, ``test accuracy: X.XXXX`` last (the line the demo and the tests read)."""

from __future__ import annotations

import json
import os

import torch
from torch import nn

from graphstore.client.training.config import TrainConfig
from graphstore.client.training.models import unwrap_model


def default_model_path(config: TrainConfig, suffix: str = "") -> str:
    """Where the model is saved unless ``save_model`` says: ``<graph>_<model><suffix>.pt`` next to the
    partition config, else in the current folder.

    Args:
        config: the run's settings.
        suffix: added to the file name (e.g. ``_emb``).

    Returns:
        The path.
    """
    folder = os.path.dirname(os.path.abspath(config.part_config)) if config.part_config else os.getcwd()
    return os.path.join(folder, f"{config.graph_name}_{config.model}{suffix}.pt")


def save_model(model: nn.Module, path: str) -> str:
    """Save the model's state dict (unwrapped from DDP), creating the folder.

    Args:
        model: the trained model.
        path: the file.

    Returns:
        The file's absolute path.
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    torch.save(unwrap_model(model).state_dict(), path)
    return os.path.abspath(path)


def report_run(results: dict, metrics_json: str | None) -> None:
    """Rank 0's last words: the metrics JSON (if asked for) and the accuracy lines, test last.

    Args:
        results: the run's results (``summarize_run``), with ``val_acc`` and ``test_acc``.
        metrics_json: where to write ``results`` as JSON (None or '': nowhere).
    """
    if metrics_json:
        os.makedirs(os.path.dirname(os.path.abspath(metrics_json)), exist_ok=True)
        with open(metrics_json, "w") as handle:
            json.dump(results, handle, indent=1)
    if results.get("val_acc") is not None:
        print(f"validation accuracy: {results['val_acc']:.4f}", flush=True)
    if results.get("test_acc") is not None:
        print(f"test accuracy: {results['test_acc']:.4f}", flush=True)
