"""The run summary: epoch records, the epoch line, the results dict, and rank 0's report."""

from __future__ import annotations

import json
import time

import torch
from torch import nn

from graphstore.client.training import (
    EpochStats,
    TrainConfig,
    TrainerProcess,
    default_model_path,
    epoch_line,
    epoch_record,
    reduce_epoch,
    report_run,
    save_model,
    summarize_run,
)

CPU = torch.device("cpu")


def lone_trainer(mode: str = "standalone", world_size: int = 1) -> TrainerProcess:
    return TrainerProcess(
        device=CPU,
        graph=None,
        distributed=False,
        rank=0,
        world_size=world_size,
        mode=mode,
        show_progress=False,
    )


def test_epoch_record_averages_over_the_seeds_and_rates_over_the_time():
    record = epoch_record(3, batches=4, loss_sum=50.0, correct=75, seeds=100, epoch_time=2.0)
    assert record == {
        "epoch": 3,
        "loss": 0.5,
        "train_acc": 0.75,
        "epoch_time_s": 2.0,
        "batches": 4,
        "batches_per_s": 2.0,
        "seeds_per_s": 50.0,
    }


def test_an_empty_epoch_divides_by_nothing():
    record = epoch_record(0, batches=0, loss_sum=0.0, correct=0, seeds=0, epoch_time=0.0)
    assert record["loss"] == record["train_acc"] == record["batches_per_s"] == record["seeds_per_s"] == 0


def test_reduce_epoch_without_a_group_keeps_this_trainers_figures():
    stats = EpochStats(
        loss_sum=6.0, correct=3, seeds=4, batches=2, feature_bytes=1000, batch_losses=[2.0, 1.0]
    )
    record = reduce_epoch(1, stats, 0.5, CPU, rank=0)
    assert record["loss"] == 1.5 and record["train_acc"] == 0.75 and record["batches_per_s"] == 4.0
    assert record["feature_bytes"] == 1000 and record["batch_losses_rank0"] == [2.0, 1.0]
    assert reduce_epoch(1, stats, 0.5, CPU, rank=1)["batch_losses_rank0"] is None


def test_an_epoch_that_pulled_no_features_records_no_feature_figures():
    stats = EpochStats(loss_sum=1.0, seeds=1, batches=1, feature_bytes=None, batch_losses=[1.0])
    record = reduce_epoch(0, stats, 1.0, CPU, rank=0)
    assert "feature_bytes" not in record and "batch_losses_rank0" not in record


def test_the_epoch_line_with_features_and_validation():
    record = epoch_record(2, batches=3, loss_sum=12.34567, correct=81, seeds=100, epoch_time=1.5)
    record["val_acc"] = 0.5
    record["feature_bytes"] = 2_500_000
    assert epoch_line(record) == (
        "epoch   2 | loss 0.1235 | train acc 0.8100 | val acc 0.5000 | time 1.50s | 2.00 batches/s "
        "(3 batches) | features pulled 2.5 MB"
    )


def test_the_epoch_line_without_features_or_validation():
    record = epoch_record(12, batches=4, loss_sum=100.0, correct=50, seeds=100, epoch_time=2.0)
    assert epoch_line(record) == "epoch  12 | loss 1.0000 | train acc 0.5000 | time 2.00s | 2.00 batches/s"


def test_the_results_hold_the_config_the_epochs_the_accuracies_and_the_extras():
    config = TrainConfig(graph_name="g", epochs=2)
    history = [epoch_record(e, 1, 1.0, 1, 1, t) for e, t in ((0, 1.0), (1, 3.0))]
    started = time.perf_counter()
    results = summarize_run(config, lone_trainer(), history, {"val": 0.7, "test": 0.8}, started, model="sage")
    assert results["graph_name"] == "g" and results["mode"] == "standalone" and results["world_size"] == 1
    assert results["config"]["epochs"] == 2 and results["config"]["fanouts"] == [10, 25]
    assert results["epochs"] == history
    assert (results["val_acc"], results["test_acc"]) == (0.7, 0.8)
    assert results["mean_epoch_time_s"] == 2.0
    assert results["model"] == "sage"
    assert results["total_time_s"] >= 0
    json.dumps(results)  # the metrics JSON


def test_results_without_epochs_or_evaluated_masks():
    results = summarize_run(TrainConfig(graph_name="g"), lone_trainer("distributed", 2), [], {}, 0.0)
    assert results["mode"] == "distributed" and results["world_size"] == 2
    assert results["mean_epoch_time_s"] is None
    assert results["val_acc"] is None and results["test_acc"] is None


def test_the_report_writes_the_metrics_and_ends_with_the_test_accuracy(tmp_path, capsys):
    metrics = tmp_path / "out" / "metrics.json"
    results = {"val_acc": 0.71234, "test_acc": 0.80006, "epochs": []}
    report_run(results, str(metrics))
    assert json.loads(metrics.read_text()) == results
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["validation accuracy: 0.7123", "test accuracy: 0.8001"]


def test_the_report_prints_only_the_accuracies_measured(tmp_path, capsys):
    report_run({"val_acc": None, "test_acc": 0.5}, None)
    assert capsys.readouterr().out == "test accuracy: 0.5000\n"
    report_run({"val_acc": None, "test_acc": None}, "")
    assert capsys.readouterr().out == ""
    assert list(tmp_path.iterdir()) == []


def test_the_default_model_path_is_beside_the_partition_config(tmp_path, monkeypatch):
    config = TrainConfig(graph_name="cora", model="mlp", part_config=str(tmp_path / "cora" / "cora.json"))
    assert default_model_path(config) == str(tmp_path / "cora" / "cora_mlp.pt")
    assert default_model_path(config, "_emb") == str(tmp_path / "cora" / "cora_mlp_emb.pt")
    monkeypatch.chdir(tmp_path)
    assert default_model_path(TrainConfig(graph_name="g")) == str(tmp_path / "g_sage.pt")


def test_save_model_creates_the_folder_and_saves_the_unwrapped_state(tmp_path):
    model = nn.Linear(3, 2)
    path = save_model(model, str(tmp_path / "new" / "model.pt"))
    assert path == str(tmp_path / "new" / "model.pt")
    state = torch.load(path)
    assert set(state) == {"weight", "bias"} and torch.equal(state["weight"], model.weight.detach())
