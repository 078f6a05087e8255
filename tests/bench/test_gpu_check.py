"""``make gpu-check``'s script in its dry mode (every step on the CPU with small graphs): the run a GPU
machine gets is the one tested here, so a lent GPU's few minutes are not spent on the script's bugs."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_dry_gpu_check_runs_every_step_and_packs_one_archive(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "bench/gpu_check.py", "--dry", "--dry-nodes", "6000"]
        + ["--workdir", str(tmp_path / "work"), "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mode"] == "dry"
    assert all(step["rc"] == 0 for step in summary["steps"].values()), summary["steps"]
    # the gpu tests were collected (and skip here, without a GPU), none failed
    tests = summary["gpu_tests"]
    assert tests["skipped"] > 10 and tests["failed"] == tests["errors"] == 0
    cora = summary["cora"]
    assert set(cora) == {"cpu", "gpu-device/fp32"}
    assert all(row["mean"] is not None and row["mean"] > 0.5 for row in cora.values()), cora
    bench = summary["loader_bench"]
    assert {v["placement"] for v in bench["variants"]} == {"none", "device"}
    assert all(v["batches_per_s"] > 0 and v["profile_ms"]["step"] > 0 for v in bench["variants"])
    assert "device/none vs none/none" in bench["ratios"]
    (launch,) = summary["launch"].values()
    assert launch["rc"] == 0 and launch["epoch_s"] and launch["feature_cache"]["feat"]["remote_lookups"] > 0
    with tarfile.open(out / "gpu-check.tar.gz") as tar:
        names = tar.getnames()
    assert "summary.json" in names and any(n.startswith("logs/") for n in names)
    assert any(n == "results/gpu_loader.json" for n in names)
