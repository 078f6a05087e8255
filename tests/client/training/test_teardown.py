"""The end of a run: rank 0 reports, every trainer stops its loader."""

from __future__ import annotations

import json

import torch

from graphstore.client.training import TrainerProcess, finish_run


class RecordingLoader:
    closed = False

    def close(self) -> None:
        self.closed = True


def trainer(rank: int) -> TrainerProcess:
    return TrainerProcess(
        device=torch.device("cpu"),
        graph=None,
        distributed=False,
        rank=rank,
        world_size=2,
        mode="standalone",
        show_progress=False,
    )


def test_rank_0_reports_and_its_loader_is_closed(tmp_path, capsys):
    loader = RecordingLoader()
    results = {"val_acc": 0.5, "test_acc": 0.25}
    metrics = tmp_path / "metrics.json"
    assert finish_run(trainer(0), loader, results, str(metrics)) is results
    assert capsys.readouterr().out.splitlines()[-1] == "test accuracy: 0.2500"
    assert json.loads(metrics.read_text()) == results
    assert loader.closed


def test_other_ranks_only_finish(tmp_path, capsys):
    loader = RecordingLoader()
    metrics = tmp_path / "metrics.json"
    finish_run(trainer(1), loader, {"val_acc": 0.5, "test_acc": 0.25}, str(metrics))
    assert capsys.readouterr().out == ""
    assert not metrics.exists()
    assert loader.closed
