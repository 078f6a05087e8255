"""One trainer on a GPU, end to end: the GraphSAGE examples under fp16 and bf16 autocast in a 1-rank NCCL
group (DDP on the GPU; the embedding example's SparseAdagrad exchanges its gradients over NCCL and steps
through the loss scaler). Skipped cleanly where no CUDA device or no NCCL is present."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.distributed as dist

from tests.e2e.conftest import last_line, run_standalone, short_run_args
from tests.e2e.test_e2e import TEST_ACCURACY_LINE
from tests.launcher.helpers import free_ports

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available() or not dist.is_nccl_available(), reason="needs a CUDA device and NCCL"
    ),
]


def one_rank_group() -> dict[str, str]:
    """The variables of a 1-trainer group: the examples join it with NCCL on ``cuda:LOCAL_RANK``."""
    (port,) = free_ports(1)
    return {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
    }


@pytest.mark.parametrize("amp", ["fp16", "bf16"])
@pytest.mark.parametrize("script", ["train_dist.py", "train_embedding.py"])
def test_one_gpu_trainer_trains_graphsage_under_amp_with_nccl(e2e_graph, tmp_path, script, amp):
    metrics = tmp_path / "metrics.json"
    args = [*short_run_args(e2e_graph, metrics), "--device", "cuda", "--amp", amp]
    output = run_standalone(script, *args, env=one_rank_group())
    assert TEST_ACCURACY_LINE.search(last_line(output)), output
    results = json.loads(metrics.read_text())
    assert results["world_size"] == 1 and results["config"]["amp"] == amp
    losses = [epoch["loss"] for epoch in results["epochs"]]
    assert all(math.isfinite(loss) for loss in losses) and losses[-1] < losses[0], losses
    if script == "train_embedding.py":
        assert results["embedding_rows_changed"] > 0
        # A skipped step (the scaler's first scales may overflow) is skipped whole; most steps apply.
        assert results["sparse_steps_skipped"] < results["epochs"][0]["batches"]
