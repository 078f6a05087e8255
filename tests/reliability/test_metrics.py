"""Prometheus metrics (off by default): per-call counts by status, latency histograms, per-tensor bytes
(exact), bounded tensor labels; ``graphstore status`` shows them; server events are one
``event=NAME key=value`` line each."""

from __future__ import annotations

import re
import shlex

import numpy as np
import pytest

from graphstore.client.transport import RemotePartition
from graphstore.launcher.control import fetch_metrics_text, histogram_quantile, summarize_metrics
from graphstore.server.metrics import MAX_TENSOR_LABELS, ServerMetrics, format_event
from graphstore.types import InitSpec, OptimizerConfig
from tests.reliability.helpers import (
    cluster_dict,
    free_ports,
    run_cli,
    start_server,
    wait_started,
    write_yaml,
)


def _event_fields(log: str, event: str) -> dict[str, str]:
    line = next(line for line in log.splitlines() if f"event={event} " in line)
    return dict(token.split("=", 1) for token in shlex.split(line[line.index("event=") :]))


def test_metrics_count_calls_latencies_and_tensor_bytes_and_status_shows_them(graph, servers, tmp_path):
    part_config, _, _ = graph
    ports = free_ports(2)
    for k in range(2):
        servers.append(start_server(part_config, k, ports[k], tmp_path, ["--metrics-port", "0"]))
    for server in servers:
        wait_started(server)
    started = _event_fields(servers[0].log(), "server_started")
    assert started["part_id"] == "0" and started["token"] == "False" and started["tls"] == "False"
    metrics_port = int(started["metrics_port"])

    client = RemotePartition(servers[0].address, 0)
    meta = client.metadata()
    owned = np.arange(meta.node_bounds[0], meta.node_bounds[1])
    for size in (10, 20, 30):
        client.pull("feat", owned[:size])
    client.init_tensor("emb", (meta.num_nodes, 4), "float32", "node", init=InitSpec("constant", 1.0))
    client.push("emb", owned[:5], np.ones((5, 4), np.float32), "add")
    client.push_grad("emb", owned[:3], np.ones((3, 4), np.float32), OptimizerConfig("adagrad", 0.1))
    client.init_tensor("_anon.someclient.0", (meta.num_nodes, 2), "float32", "node")
    client.push("_anon.someclient.0", owned[:2], np.ones((2, 2), np.float32))
    client.init_tensor("gone", (meta.num_nodes, 1), "float32", "node")
    client.push("gone", owned[:1], np.ones((1, 1), np.float32))
    client.delete_tensor("gone")
    with pytest.raises(KeyError):
        client.pull("missing", owned[:1])

    summary = summarize_metrics(fetch_metrics_text("127.0.0.1", metrics_port))
    rpc = summary["rpc"]
    assert rpc["Pull"]["count"] == 4 and rpc["Pull"]["errors"] == 1  # the NOT_FOUND pull
    assert rpc["Push"]["count"] == 3 and rpc["PushGrad"]["count"] == 1 and rpc["Init"]["count"] == 3
    assert rpc["Pull"]["p50_ms"] is not None and rpc["Pull"]["p99_ms"] >= rpc["Pull"]["p50_ms"]
    feat_row = 8 * 4  # 8 float32 features
    assert summary["tensor_bytes"]["feat"] == {"pull": (10 + 20 + 30) * feat_row}
    assert summary["tensor_bytes"]["emb"] == {"push": 5 * 16, "push_grad": 3 * 16}
    assert summary["tensor_bytes"]["(anonymous)"] == {"push": 2 * 8}
    assert "gone" not in summary["tensor_bytes"] and "_anon.someclient.0" not in summary["tensor_bytes"]

    config = write_yaml(tmp_path / "c.yaml", cluster_dict(part_config, ports, metrics_port=metrics_port))
    status = run_cli("status", "--config", str(config))
    # Server 1 listens on another (random) metrics port than metrics_port + 1: its line says so.
    assert status.returncode == 0, status.stdout + status.stderr
    assert re.search(r"rpc Pull\s+calls 4\s+errors 1", status.stdout), status.stdout
    assert re.search(r"bytes feat\s+pull 1\.9 KiB", status.stdout), status.stdout
    assert "metrics: metrics at port" in status.stdout  # server 1's metrics are elsewhere
    client.close()

    # Off by default: no metrics port, status shows no metrics lines.
    (port,) = free_ports(1)
    plain = start_server(part_config, 0, port, tmp_path)
    servers.append(plain)
    wait_started(plain)
    assert _event_fields(plain.log(), "server_started")["metrics_port"] == "off"


def test_tensor_labels_are_bounded():
    metrics = ServerMetrics(0)
    for index in range(MAX_TENSOR_LABELS + 50):
        metrics.tensor_io(f"t{index}", "pull", 1)
    metrics.tensor_io("_anon.c.1", "push", 3)
    metrics.tensor_io("_anon.d.9", "push", 4)
    from prometheus_client import generate_latest

    summary = summarize_metrics(generate_latest(metrics.registry).decode())
    assert len(summary["tensor_bytes"]) == MAX_TENSOR_LABELS + 2  # + (other) + (anonymous)
    assert summary["tensor_bytes"]["(other)"] == {"pull": 50}
    assert summary["tensor_bytes"]["(anonymous)"] == {"push": 7}
    metrics.forget_tensor("t0")
    metrics.tensor_io("fresh", "pull", 2)  # a freed label slot is reused
    summary = summarize_metrics(generate_latest(metrics.registry).decode())
    assert "t0" not in summary["tensor_bytes"] and summary["tensor_bytes"]["fresh"] == {"pull": 2}


def test_histogram_quantile_interpolates_like_prometheus():
    buckets = [(0.001, 10.0), (0.01, 90.0), (0.1, 100.0), (float("inf"), 100.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.001 + 0.009 * (50 - 10) / 80)
    assert histogram_quantile(0.99, buckets) == pytest.approx(0.01 + 0.09 * (99 - 90) / 10)
    assert histogram_quantile(0.5, [(float("inf"), 0.0)]) is None


def test_event_lines_are_key_value_and_quote_what_needs_it():
    line = format_event("checkpoint_failed", part_id=1, error="disk full: /x y", seconds=0.5)
    assert line == 'event=checkpoint_failed part_id=1 error="disk full: /x y" seconds=0.500'
    assert dict(t.split("=", 1) for t in shlex.split(line))["error"] == "disk full: /x y"
