"""bench/dgl/grpc_ceiling.py and the ceiling rule of report.py.

The ceiling is a bare grpcio call with a remote pull's request and answer sizes; a remote pull row
whose ceiling is itself under the target ratio over DGL is judged by a share of the ceiling.
"""

from __future__ import annotations

from pathlib import Path

import pytest

BENCH_DGL = Path(__file__).resolve().parents[2] / "bench" / "dgl"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH_DGL))
    import grpc_ceiling
    import report

    return grpc_ceiling, report


def test_the_ceiling_calls_carry_a_pulls_sizes_and_the_server_is_ended(bench, tmp_path):
    grpc_ceiling, _ = bench
    shapes = [(1_000, 1, 6), (1_000, 4, 8)]
    results = grpc_ceiling.ceilings(shapes, row_bytes=400, log_dir=tmp_path, repeats=1, warmup=1)
    assert set(results) == {"ceiling/1000/1t", "ceiling/1000/4t"}
    for key, (rows, _, calls) in zip(sorted(results), sorted(shapes), strict=True):
        entry = results[key]
        assert entry["calls"] == calls and entry["rows_per_s"] == pytest.approx(entry["calls_per_s"] * rows)
    log = (tmp_path / "grpc-ceiling-server.log").read_text()
    pid = int(log.split(f"{grpc_ceiling.READY} (pid ")[1].split(")")[0])
    assert not Path(f"/proc/{pid}").exists()  # ended and reaped once ceilings() returns


def _side(rows_per_s, ceiling=None):
    results = {"pull/remote/1000/1t": {"rows_per_s": rows_per_s}}
    if ceiling is not None:
        results["ceiling/1000/1t"] = {"rows_per_s": ceiling}
    return {"results": results, "quiet": {"account": {"valid": True}}}


def test_a_row_whose_ceiling_is_under_the_target_is_judged_by_the_ceiling(bench):
    _, report = bench
    metric = next(m for m in report.metrics() if m.workload == "pull/remote/1000/1t")
    # The ceiling is 1.1x DGL: under the 1.2x target, so graphstore must reach 0.9x the ceiling.
    near = report.summarize(metric, [{"graphstore": _side(1.0e6, 1.1e6), "dgl": _side(1.0e6)}])
    assert near["ceiling_over_dgl"] == pytest.approx(1.1)
    target, met = report.verdict(metric.key, near)
    assert "gRPC ceiling" in target and met  # 1.0 / 1.1 = 0.91 of the ceiling
    far = report.summarize(metric, [{"graphstore": _side(0.8e6, 1.1e6), "dgl": _side(1.0e6)}])
    assert report.verdict(metric.key, far)[1] is False  # 0.73 of the ceiling
    # A ceiling well above DGL leaves the plain target: 1.0x DGL does not meet 1.2x.
    high = report.summarize(metric, [{"graphstore": _side(1.0e6, 5e6), "dgl": _side(1.0e6)}])
    assert report.verdict(metric.key, high) == ("≥ 1.2x", False)
    assert "the ceiling" in report.table({metric.key: near})
