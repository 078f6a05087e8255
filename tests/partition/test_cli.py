"""``graphstore generate`` and ``graphstore partition``: output, statistics, and one-line errors."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from graphstore.launcher.cli import main
from graphstore.partition import load_partition, load_partition_book, read_config


@pytest.fixture
def generated(tmp_path, capsys):
    path = tmp_path / "g.npz"
    code = main(
        [
            "generate",
            "--num-nodes",
            "3000",
            "--avg-degree",
            "6",
            "--feat-dim",
            "8",
            "--num-classes",
            "5",
            "--seed",
            "7",
            "--out",
            str(path),
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["num_nodes"] == 3000 and report["num_edges"] == 18000
    assert report["arrays"]["feat"] == [3000, 8]
    return path


def test_generate_then_partition_prints_stats(tmp_path, capsys, generated):
    out = tmp_path / "parts"
    code = main(
        [
            "partition",
            "--graph",
            str(generated),
            "--num-parts",
            "3",
            "--out",
            str(out),
            "--balance-ntypes",
            "train_mask",
            "--feat-dtype",
            "bfloat16",
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "edge cut:" in text and "peak RSS" in text and "time:" in text
    rows = [line.split() for line in text.splitlines() if line.strip()[:1].isdigit()]
    assert len(rows) == 3  # one row per partition: part, nodes, edges, train nodes
    assert sum(int(r[1].replace(",", "")) for r in rows) == 3000
    assert sum(int(r[2].replace(",", "")) for r in rows) == 18000
    config_path = out / "g.json"
    config = read_config(str(config_path))
    assert config["node_feats"]["_N"]["feat"]["dtype"] == "bfloat16"
    assert config["balance"] == {"ntypes": ["train_mask"], "edges": False}
    assert load_partition(str(config_path), 2).node_feats["_N"]["feat"].dtype == np.uint16


def test_partition_json_output_and_edge_list(tmp_path, capsys):
    edges = tmp_path / "edges.txt"
    edges.write_text("0 1\n1 2\n2 3\n3 0\n4 5\n5 4\n")
    code = main(
        [
            "partition",
            "--graph",
            str(edges),
            "--name",
            "ring",
            "--num-parts",
            "2",
            "--out",
            str(tmp_path / "o"),
            "--json",
            "--method",
            "random",
        ]
    )
    assert code == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["num_nodes"] == 6 and stats["num_edges"] == 6 and stats["part_nodes"] == [3, 3]
    assert 0.0 <= stats["edge_cut"] <= 1.0
    assert load_partition_book(stats["config_path"]).graph_name == "ring"


def _one_line_error(capsys, argv, match):
    code = main(argv)
    captured = capsys.readouterr()
    assert code != 0
    err = captured.err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert match in err, err


def test_bad_inputs_are_one_line_errors(tmp_path, capsys, generated):
    out = str(tmp_path / "out")
    base = ["partition", "--graph", str(generated), "--out", out]
    _one_line_error(
        capsys,
        ["partition", "--graph", str(tmp_path / "missing.npz"), "--num-parts", "2", "--out", out],
        "missing.npz",
    )
    _one_line_error(capsys, base + ["--num-parts", "0"], "num_parts must be >= 1")
    _one_line_error(capsys, base + ["--num-parts", "3001"], "num_parts=3001 exceeds num_nodes=3000")
    _one_line_error(capsys, base + ["--num-parts", "2", "--method", "bogus"], "unknown part_method 'bogus'")
    _one_line_error(capsys, base + ["--num-parts", "2", "--feat-dtype", "int4"], "feat_dtype")
    _one_line_error(capsys, base + ["--num-parts", "2", "--balance-ntypes", "nope"], "'nope'")
    bad = tmp_path / "bad.npz"
    np.savez(bad, src=np.array([0, 1]), dst=np.array([1, 5]), feat=np.zeros((3, 2)))
    _one_line_error(capsys, ["partition", "--graph", str(bad), "--num-parts", "2", "--out", out], "node ID 5")
    np.savez(bad, src=np.array([0, 1, 2]), dst=np.array([1, 2]))
    _one_line_error(
        capsys, ["partition", "--graph", str(bad), "--num-parts", "2", "--out", out], "differ in length"
    )
    assert not os.path.exists(out)
    assert main(base + ["--num-parts", "2"]) == 0
    capsys.readouterr()
    _one_line_error(capsys, base + ["--num-parts", "2"], "--overwrite")
    assert main(base + ["--num-parts", "2", "--overwrite"]) == 0
    capsys.readouterr()
    _one_line_error(capsys, ["generate", "--num-nodes", "10", "--out", str(generated)], "exists")
    _one_line_error(capsys, ["generate", "--num-nodes", "1", "--out", str(tmp_path / "x.npz")], "num_nodes")


def test_console_entry_point_exit_code(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "graphstore.launcher.cli",
            "partition",
            "--graph",
            str(tmp_path / "none.npz"),
            "--num-parts",
            "2",
            "--out",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().endswith(f"graph file {str(tmp_path / 'none.npz')!r} not found")
