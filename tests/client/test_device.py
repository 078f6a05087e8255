"""The trainer's device (graphstore.client.device): the choice from LOCAL_RANK and the visible GPUs as a
pure function, the collectives' device from a group's backend, and the process-wide binding (with
CUDA faked where the choice would need a GPU)."""

from __future__ import annotations

import pytest
import torch

from graphstore.client import device as devices
from graphstore.client.api import initialize
from graphstore.client.device import (
    backend_device_type,
    bind_device,
    bound_device,
    collective_device,
    cuda_device,
    select_device,
    unbind_device,
)

CPU = torch.device("cpu")


def cuda(index: int) -> torch.device:
    return torch.device("cuda", index)


# No device bound before or after each test; ``two_gpus`` fakes a process that sees 2 GPUs (conftest).
pytestmark = pytest.mark.usefixtures("unbound_device")


@pytest.mark.parametrize(
    ("requested", "local_rank", "gpus", "want"),
    [
        (None, 0, 0, CPU),
        ("auto", 5, 0, CPU),
        ("cpu", 7, 2, CPU),
        (None, 1, 2, cuda(1)),
        ("auto", 0, 2, cuda(0)),
        ("cuda", 1, 2, cuda(1)),
        ("cuda", 3, 8, cuda(3)),
        ("cuda:1", 5, 2, cuda(1)),  # an explicit GPU wins over LOCAL_RANK (trainers may share one)
        (torch.device("cuda", 0), 1, 1, cuda(0)),
    ],
)
def test_each_trainer_takes_the_gpu_of_its_local_rank(requested, local_rank, gpus, want):
    assert select_device(requested, local_rank=local_rank, num_visible_gpus=gpus) == want


@pytest.mark.parametrize("requested", [None, "auto", "cuda"])
def test_a_local_rank_beyond_the_visible_gpus_is_an_error_not_a_wrap_around(requested):
    with pytest.raises(RuntimeError, match=r"LOCAL_RANK=2 has no GPU of its own.*sees 2 GPU\(s\).*'4,5'"):
        select_device(requested, local_rank=2, num_visible_gpus=2, visible_devices="4,5")


def test_a_gpu_index_that_is_not_visible_is_refused():
    with pytest.raises(RuntimeError, match=r"'cuda:2' does not exist.*sees 2 GPU\(s\).*unset"):
        select_device("cuda:2", local_rank=0, num_visible_gpus=2)


@pytest.mark.parametrize("requested", ["cuda", "cuda:0"])
def test_cuda_without_a_visible_gpu_names_the_variable(requested):
    with pytest.raises(RuntimeError, match=r"CUDA is not available.*CUDA_VISIBLE_DEVICES is ''"):
        select_device(requested, local_rank=0, num_visible_gpus=0, visible_devices="")


@pytest.mark.parametrize("requested", ["tpu", "gpu0", "meta", 3.5])
def test_a_malformed_device_is_refused(requested):
    with pytest.raises(ValueError, match="device must be cpu, cuda, cuda:N or auto"):
        select_device(requested, local_rank=0, num_visible_gpus=1)


def test_a_negative_local_rank_is_refused():
    with pytest.raises(ValueError, match="LOCAL_RANK must be >= 0, got -1"):
        select_device("cpu", local_rank=-1, num_visible_gpus=0)


@pytest.mark.parametrize(
    ("backend", "want"),
    [
        ("gloo", "cpu"),
        ("mpi", "cpu"),
        ("cpu:gloo", "cpu"),
        ("cpu:gloo,cuda:nccl", "cpu"),
        ("cuda:nccl,cpu:gloo", "cpu"),
        ("nccl", "cuda"),
        ("cuda:nccl", "cuda"),
        ("NCCL", "cuda"),
    ],
)
def test_collectives_run_on_the_cpu_unless_the_group_is_nccl_only(backend, want):
    assert backend_device_type(backend) == want
    assert collective_device(backend, cuda(1)) == (CPU if want == "cpu" else cuda(1))


@pytest.mark.parametrize("trainer", [None, CPU])
def test_an_nccl_group_needs_a_gpu_trainer(trainer):
    with pytest.raises(RuntimeError, match="runs collectives on CUDA only"):
        collective_device("nccl", trainer)
    assert collective_device("cpu:gloo,cuda:nccl", trainer) == CPU


def test_binding_reads_local_rank_and_keeps_the_device_while_connected(two_gpus, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert bound_device() is None
    assert bind_device() == cuda(1) and bound_device() == cuda(1)
    assert two_gpus == [cuda(1)]  # also the calling thread's current device, for the user's code
    assert bind_device("cuda") == cuda(1) and cuda_device() == cuda(1)
    with pytest.raises(RuntimeError, match="already bound to cuda:1; it cannot switch to cuda:0"):
        bind_device("cuda:0")
    unbind_device()
    assert bind_device("cuda:0") == cuda(0)


def test_the_first_gpu_use_binds_local_rank_and_fails_clearly_beyond_the_gpus(two_gpus, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert cuda_device() == cuda(0) and bound_device() == cuda(0)
    unbind_device()
    monkeypatch.setenv("LOCAL_RANK", "2")
    with pytest.raises(RuntimeError, match=r"LOCAL_RANK=2 has no GPU of its own.*'2,3'"):
        cuda_device()
    assert bound_device() is None
    monkeypatch.setenv("LOCAL_RANK", "first")
    with pytest.raises(ValueError, match="LOCAL_RANK must be an integer, got 'first'"):
        bind_device()


def test_a_cpu_trainer_has_no_gpu_to_give(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bind_device("auto") == CPU
    with pytest.raises(RuntimeError, match="bound to cpu, but a CUDA device is needed"):
        cuda_device()


def test_initialize_binds_its_device_before_connecting(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    config = {"graph_name": "g", "servers": [{"host": "127.0.0.1", "port": 1, "part_id": 0}]}
    # Refused before any connection is tried (a connection to port 1 would wait for its timeout).
    with pytest.raises(RuntimeError, match="'cuda' requested but CUDA is not available"):
        initialize(config, device="cuda")
    assert devices.bound_device() is None
