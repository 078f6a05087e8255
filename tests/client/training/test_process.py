"""Trainer set-up that needs no cluster: the standalone fallbacks of the collectives, the device and
thread settings, the error for a run with neither servers nor a partition config, and the one-line end
of a script whose server is lost."""

from __future__ import annotations

import logging
from contextlib import nullcontext

import pytest
import torch

from graphstore.client.training import (
    all_reduce_max,
    all_reduce_sum,
    autocast_context,
    init_process_group,
    make_grad_scaler,
    open_graph,
    rank_and_world,
    resolve_device,
    run_main,
    set_threads,
)
from graphstore.errors import ServerUnavailableError

CPU = torch.device("cpu")


def test_a_lone_trainer_is_rank_0_of_1_and_reduces_to_itself():
    assert rank_and_world() == (0, 1)
    assert all_reduce_sum([1.5, 2, 3], CPU) == [1.5, 2.0, 3.0]
    assert all_reduce_max(4.25, CPU) == 4.25


def test_no_group_is_formed_without_the_launch_variables(monkeypatch):
    for name in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert init_process_group(CPU) is False


def test_a_run_without_servers_or_a_partition_config_names_the_flag(monkeypatch):
    monkeypatch.delenv("GRAPHSTORE_CONFIG", raising=False)
    with pytest.raises(ValueError, match="--part-config is required without graphstore launch"):
        open_graph("g", None)


def test_cpu_is_always_available_and_unknown_cuda_is_refused(monkeypatch):
    assert resolve_device("cpu") == CPU
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == CPU
    with pytest.raises(RuntimeError, match="'cuda:0' requested but CUDA is not available"):
        resolve_device("cuda:0")


def test_co_located_trainers_share_the_cores(monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setattr("os.cpu_count", lambda: 8)
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
        assert set_threads(None) == 2 and torch.get_num_threads() == 2
        assert set_threads(3) == 3 and torch.get_num_threads() == 3
        monkeypatch.setenv("LOCAL_WORLD_SIZE", "16")
        assert set_threads(None) == 1
    finally:
        torch.set_num_threads(before)


def test_mixed_precision_settings():
    assert isinstance(autocast_context(CPU, "none"), nullcontext)
    with autocast_context(CPU, "bf16"):
        x = torch.ones(2, 2)
        assert (x @ x).dtype == torch.bfloat16  # a matmul runs in bfloat16 under CPU autocast
    with pytest.raises(ValueError, match="got 'fp8'"):
        autocast_context(CPU, "fp8")
    if hasattr(torch.amp, "GradScaler"):
        assert make_grad_scaler(CPU, "fp16").is_enabled()
    else:  # torch 2.2: a CUDA-only scaler
        with pytest.raises(RuntimeError, match="amp 'fp16' on cpu needs torch >= 2.3"):
            make_grad_scaler(CPU, "fp16")
    assert not make_grad_scaler(CPU, "bf16").is_enabled()


def test_a_lost_server_ends_the_script_with_one_line_naming_it(capsys):
    def main() -> int:
        raise ServerUnavailableError("127.0.0.1:50062", "UNAVAILABLE", "SampleNeighbors: Socket closed\nmore")

    client_logger = logging.getLogger("graphstore.client")
    level = client_logger.level
    try:
        assert run_main(main, "train_rgcn.py") == 1
        # the clean-up at exit, which cannot reach the lost server either, adds no lines
        assert not logging.getLogger("graphstore.client.dist_tensor").isEnabledFor(logging.WARNING)
    finally:
        client_logger.setLevel(level)
    err = capsys.readouterr().err
    assert (
        err == "train_rgcn.py: stopped: server 127.0.0.1:50062: UNAVAILABLE: SampleNeighbors: Socket closed\n"
    )
    assert run_main(lambda: 0, "train_rgcn.py") == 0
