"""End-to-end: the demo pipeline (generate -> partition -> launch 2 servers + 2 trainers -> train ->
accuracy -> clean exit), standalone vs distributed reproducibility, the DGL-compat script under
launch, and the embedding example."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

from tests.e2e.conftest import (
    GRAPH_NAME,
    NUM_CLASSES,
    assert_same_first_epoch,
    example_command,
    last_line,
    run_standalone,
    short_run_args,
)

CHANCE = 1.0 / NUM_CLASSES
TEST_ACCURACY_LINE = re.compile(r"test accuracy: (\d\.\d{4})$")


def _accuracy_from_output(output: str) -> float:
    """The trainer's last line, as launch prefixes it (``[trainer-0] test accuracy: 0.8123``)."""
    trainer_lines = [line for line in output.splitlines() if "test accuracy:" in line]
    assert len(trainer_lines) == 1, f"expected one 'test accuracy' line (rank 0), got:\n{output}"
    match = TEST_ACCURACY_LINE.search(trainer_lines[0].strip())
    assert match, trainer_lines[0]
    return float(match.group(1))


def test_demo_pipeline_trains_above_chance_and_exits_cleanly(e2e_graph, launch_job, tmp_path):
    metrics = tmp_path / "metrics.json"
    model_path = tmp_path / "model.pt"
    code, output, _ = launch_job(
        e2e_graph,
        example_command(
            "train_dist.py",
            "--graph-name",
            GRAPH_NAME,
            "--part-config",
            e2e_graph,
            "--epochs",
            "2",
            "--fanouts",
            "10,10",
            "--batch-size",
            "128",
            "--hidden",
            "64",
            "--lr",
            "0.01",
            "--save-model",
            str(model_path),
            "--metrics-json",
            str(metrics),
        ),
    )
    assert code == 0, output
    accuracy = _accuracy_from_output(output)
    assert accuracy > CHANCE + 0.15, output
    results = json.loads(metrics.read_text())
    assert results["mode"] == "distributed" and results["world_size"] == 2
    assert len(results["epochs"]) == 2
    assert abs(results["test_acc"] - accuracy) < 1e-4
    # Each epoch logged by rank 0, with loss, accuracy, time and throughput.
    epoch_lines = [line for line in output.splitlines() if "] epoch " in line]
    assert len(epoch_lines) == 2 and all("batches/s" in line and "loss" in line for line in epoch_lines)
    assert model_path.is_file()
    assert "[launch] all 2 trainers finished" in output


def test_standalone_and_distributed_first_epoch_losses_are_identical(e2e_graph, launch_job, tmp_path):
    args = [
        "--graph-name",
        GRAPH_NAME,
        "--part-config",
        e2e_graph,
        "--epochs",
        "1",
        "--batch-size",
        "256",
        "--fanouts",
        "5,5",
        "--hidden",
        "32",
        "--prefetch",
        "0",
        "--seed",
        "7",
        "--eval-max-nodes",
        "200",
        "--save-model",
        "",
    ]
    standalone_json = tmp_path / "standalone.json"
    run_standalone("train_dist.py", *args, "--metrics-json", str(standalone_json))
    distributed_json = tmp_path / "distributed.json"
    code, output, _ = launch_job(
        e2e_graph, example_command("train_dist.py", *args, "--metrics-json", str(distributed_json)), 1
    )
    assert code == 0, output
    assert_same_first_epoch(standalone_json, distributed_json)


def test_dgl_style_script_runs_under_launch_with_compat_imports(e2e_graph, launch_job, tmp_path):
    script = Path(__file__).with_name("dgl_style_train.py")
    # The script is a DGL script whose only graphstore imports are the compat namespace.
    tree = ast.parse(script.read_text())
    modules = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    modules += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    graphstore_modules = [m for m in modules if m.startswith("graphstore")]
    assert graphstore_modules and all(m.startswith("graphstore.compat.dgl") for m in graphstore_modules)

    out = tmp_path / "dgl-out"
    ip_config = tmp_path / "ip_config.txt"
    # The launch's cluster YAML decides the ports; the script gets them as a DGL ip_config.txt.

    def command_with_ip_config(cluster_yaml: Path) -> list[str]:
        import yaml

        servers = yaml.safe_load(cluster_yaml.read_text())["servers"]
        ip_config.write_text("".join(f"{s['host']} {s['port']}\n" for s in servers))
        return [
            sys.executable,
            str(script),
            "--graph-name",
            GRAPH_NAME,
            "--ip-config",
            str(ip_config),
            "--part-config",
            e2e_graph,
            "--out",
            str(out),
            "--epochs",
            "3",
        ]

    code, output, _ = launch_job(e2e_graph, command_with_ip_config, 2)
    assert code == 0, output
    results = [json.loads((out / f"result-{rank}.json").read_text()) for rank in (0, 1)]
    graph = json.loads(Path(e2e_graph).read_text())
    for result in results:
        assert result["world_size"] == 2
        assert result["ids_consistent"], "blocks[0].srcdata[NID] must be the loader's input_nodes"
        assert result["test_acc"] > CHANCE + 0.15, output
        assert result["inferred_rows"] == result["inferred_rows_filled"] == graph["num_nodes"]
    # node_split(force_even=True): disjoint, covering, even.
    first, second = (set(r["train_nid"]) for r in results)
    assert not first & second
    assert abs(len(first) - len(second)) <= 1
    assert results[0]["test_acc"] == results[1]["test_acc"]
    assert results[0]["batches"] == results[1]["batches"]


def test_embedding_example_standalone_learns(e2e_graph, tmp_path):
    metrics = tmp_path / "emb.json"
    output = run_standalone("train_embedding.py", *short_run_args(e2e_graph, metrics))
    assert TEST_ACCURACY_LINE.search(last_line(output)), output
    results = json.loads(metrics.read_text())
    assert results["embedding_rows_changed"] > 0
    losses = [epoch["loss"] for epoch in results["epochs"]]
    assert losses[-1] < losses[0]
