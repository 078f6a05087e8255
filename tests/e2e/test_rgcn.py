"""End-to-end: the RGCN example on a generated ogbn-mag-like graph, standalone and under
``graphstore launch`` (2 servers, 1 trainer): identical first-epoch losses with a fixed seed, and a
relational model that learns."""

from __future__ import annotations

import re

import pytest

from tests.e2e.conftest import assert_same_first_epoch, example_command, last_line, run_cli, run_standalone

GRAPH = "e2e"  # the launch fixture's cluster serves this graph name
TEST_ACCURACY_LINE = re.compile(r"test accuracy: (\d\.\d{4})$")


@pytest.fixture(scope="module")
def mag_graph(tmp_path_factory) -> str:
    """``graphstore generate --schema mag`` (2,000 nodes) split into 2 METIS partitions."""
    folder = tmp_path_factory.mktemp("mag-graph")
    npz = folder / "mag.npz"
    run_cli(["generate", "--schema", "mag", "--num-nodes", "2000", "--num-classes", "8", "--out", str(npz)])
    run_cli(
        [
            "partition",
            "--graph",
            str(npz),
            "--name",
            GRAPH,
            "--num-parts",
            "2",
            "--out",
            str(folder / "parts"),
        ]
    )
    return str(folder / "parts" / f"{GRAPH}.json")


def test_rgcn_standalone_and_distributed_first_epoch_losses_are_identical(mag_graph, launch_job, tmp_path):
    args = [
        "--graph-name", GRAPH, "--part-config", mag_graph, "--epochs", "1", "--batch-size", "128",
        "--fanouts", "4,4", "--hidden", "16", "--prefetch", "0", "--seed", "7", "--eval-max-nodes", "50",
        "--num-threads", "1",
    ]  # fmt: skip
    standalone_json = tmp_path / "standalone.json"
    output = run_standalone("train_rgcn.py", *args, "--metrics-json", str(standalone_json))
    assert TEST_ACCURACY_LINE.search(last_line(output)), output
    distributed_json = tmp_path / "distributed.json"
    code, output, _ = launch_job(
        mag_graph, example_command("train_rgcn.py", *args, "--metrics-json", str(distributed_json)), 1
    )
    assert code == 0, output
    standalone, distributed = assert_same_first_epoch(standalone_json, distributed_json)
    assert standalone["test_acc"] == distributed["test_acc"]
