"""The load benchmark, scaled down: 4 client processes × 300 mixed calls (pull, push-add, sample,
push-grad) against 2 servers: no errors, and every add is accounted for exactly on the servers."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.reliability.helpers import REPO


def test_concurrent_clients_mixed_calls_no_errors_and_exact_adds(tmp_path):
    out = tmp_path / "load.json"
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "load.py"), "--procs", "4", "--ops", "300"]
        + ["--warmup-requests", "0", "--rss-requests", "0", "--num-nodes", "2000"]
        + ["--work-dir", str(tmp_path / "work"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["errors"] == 0, report["error_examples"]
    assert report["adds_exact"] and report["adds_total"] > 0
    assert report["total_requests"] == 4 * 300
    latency = report["main_phase"]["latency_ms"]
    assert set(latency) == {"pull", "push_add", "sample", "push_grad"}
    assert sum(entry["count"] for entry in latency.values()) == 4 * 300
    assert all(entry["count"] > 0 and entry["p99"] >= entry["p50"] > 0 for entry in latency.values())
