"""The typed DGL-style examples (``examples/dgl/``) import only the compat namespace, and run end to end
in DGL's standalone mode on a small ``graphstore generate --schema mag`` graph: the R-GCN (with
``DistEmbedding`` + ``SparseAdam``) learns, the typed link prediction scores its held-out edges. Their
full-size figures, under ``graphstore launch`` and beside DGL, come from ``bench/dgl/script_side_by_side.py``
(docs/compat.md)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launcher.helpers import REPO, clean_env

EXAMPLES = REPO / "examples" / "dgl"
SCRIPTS = ("rgcn_node_classification.py", "typed_link_prediction.py")


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_examples_import_only_the_compat_namespace(script):
    tree = ast.parse((EXAMPLES / script).read_text())
    modules = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    modules += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    ours = [m for m in modules if m.startswith(("graphstore", "tests"))]
    assert ours and all(m.startswith("graphstore.compat.dgl") for m in ours), ours


@pytest.fixture(scope="module")
def mag(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("dgl-examples")
    cli = [sys.executable, "-m", "graphstore.launcher.cli"]
    graph = folder / "mag.npz"
    subprocess.run(
        [
            *cli,
            "generate",
            "--schema",
            "mag",
            "--num-nodes",
            "2000",
            "--num-classes",
            "4",
            "--out",
            str(graph),
        ],
        check=True,
        capture_output=True,
        env=clean_env(),
    )
    subprocess.run(
        [
            *cli,
            "partition",
            "--graph",
            str(graph),
            "--name",
            "mag",
            "--num-parts",
            "1",
            "--out",
            str(folder / "parts"),
        ],
        check=True,
        capture_output=True,
        env=clean_env(),
    )
    (folder / "ip_config.txt").write_text("127.0.0.1\n")
    return folder


def _run(mag: Path, script: str, *args: str) -> dict:
    out = mag / f"{script}.json"
    command = [
        sys.executable,
        str(EXAMPLES / script),
        "--graph_name",
        "mag",
        "--ip_config",
        str(mag / "ip_config.txt"),
        "--part_config",
        str(mag / "parts" / "mag.json"),
        "--standalone",
        "--out",
        str(out),
        *args,
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=240, env=clean_env(), cwd=str(mag))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "could not delete" not in proc.stderr, proc.stderr
    return json.loads(out.read_text())


def test_rgcn_learns_beyond_chance(mag):
    result = _run(
        mag,
        "rgcn_node_classification.py",
        "--num_epochs",
        "4",
        "--fan_out",
        "4,4",
        "--n_hidden",
        "16",
        "--batch_size",
        "64",
    )
    assert len(result["epoch_times"]) == 4 and result["trainers"] == 1
    assert result["test_acc"] > 0.4, result  # 4 classes: chance is 0.25


def test_typed_link_prediction_runs(mag):
    result = _run(mag, "typed_link_prediction.py", "--num_epochs", "1", "--n_hidden", "8")
    assert result["etype"] == ["author", "writes", "paper"] and result["last_loss"] < result["first_loss"]
    assert 0.0 <= result["heldout_auc"] <= 1.0
