"""examples/train_pyg.py end to end: PyG's GraphSAGE through PyG's NodeLoader over graphstore's stores,
standalone and under ``graphstore launch`` (2 servers + 2 trainers), and link prediction standalone."""

from __future__ import annotations

import re

import pytest

from tests.e2e.conftest import GRAPH_NAME, example_command, run_standalone

pytest.importorskip("torch_geometric")

FLAGS = [
    "--epochs",
    "4",
    "--batch-size",
    "256",
    "--feat-norm",
    "none",
    "--eval-fanouts",
    "5,5",
    "--num-threads",
    "1",
]


def final_value(output: str, name: str) -> float:
    found = re.findall(rf"test {name}: ([0-9.]+)", output)
    assert found, f"no 'test {name}' line in:\n{output}"
    return float(found[-1])


def test_node_classification_standalone_and_distributed(e2e_graph, launch_job):
    args = ["--graph-name", GRAPH_NAME, "--part-config", e2e_graph, *FLAGS]
    standalone = final_value(run_standalone("train_pyg.py", *args), "accuracy")
    assert standalone > 0.5  # 4 classes: chance is 0.25
    code, output, _ = launch_job(e2e_graph, example_command("train_pyg.py", *args))
    assert code == 0, output
    assert "2 trainer(s)" in output
    assert final_value(output, "accuracy") > 0.5


def test_link_prediction_standalone(e2e_graph):
    args = ["--graph-name", GRAPH_NAME, "--part-config", e2e_graph, "--task", "link", "--epochs", "2"]
    args += ["--batch-size", "1024", "--feat-norm", "none", "--eval-fanouts", "5,5", "--num-threads", "1"]
    assert final_value(run_standalone("train_pyg.py", *args), "auc") > 0.6
