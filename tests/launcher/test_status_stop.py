"""``graphstore status`` (``--config`` and ``--probe``) and ``graphstore stop`` against real servers."""

from __future__ import annotations

import json
import subprocess

from tests.launcher.helpers import CLI, free_ports, write_cluster


def cli(*args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout_s)


def test_probe_exits_zero_only_when_serving(running_servers):
    _, addresses, _ = running_servers
    result = cli("status", "--probe", addresses[0])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{addresses[0]} SERVING"
    (closed,) = free_ports(1)
    result = cli("status", "--probe", f"127.0.0.1:{closed}", "--timeout", "1")
    assert result.returncode == 1
    assert "UNREACHABLE" in result.stdout


def test_probe_does_not_import_torch():
    code = (
        "import sys; from graphstore.launcher.cli import main\n"
        "code = main(['status', '--probe', '127.0.0.1:1', '--timeout', '0.5'])\n"
        "assert 'torch' not in sys.modules and 'numpy' not in sys.modules, sorted(sys.modules)\n"
        "sys.exit(code)\n"
    )
    result = subprocess.run([CLI[0], "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr  # nothing serves on port 1; no assertion error


def test_status_reports_every_server(running_servers):
    config, addresses, _ = running_servers
    result = cli("status", "--config", str(config), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["graph_name"] == "testgraph"
    servers = report["servers"]
    assert [s["address"] for s in servers] == addresses
    assert [s["health"] for s in servers] == ["SERVING", "SERVING"]
    assert [s["part_id"] for s in servers] == [0, 1]
    for server in servers:
        assert server["rss_bytes"] > 0 and server["uptime_s"] >= 0
        names = {t["name"]: t for t in server["tensors"]}
        assert names["feat"]["shape"] == [400, 8] and names["feat"]["dtype"] == "float32"
        assert names["feat"]["from_partition"] and names["feat"]["policy"] == "node"

    text = cli("status", "--config", str(config))
    assert text.returncode == 0
    assert "graph testgraph, 2 partitions" in text.stdout
    assert text.stdout.count("SERVING") == 2
    assert "tensor feat" in text.stdout and "rss" in text.stdout


def test_stop_shuts_every_server_down(running_servers):
    config, addresses, procs = running_servers
    result = cli("stop", "--config", str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(": stopping") == 2
    for proc in procs:
        assert proc.wait(timeout=30) == 0
    status = cli("status", "--config", str(config), "--timeout", "1")
    assert status.returncode == 1 and status.stdout.count("UNREACHABLE") == 2
    again = cli("stop", "--config", str(config))
    assert again.returncode == 0 and again.stdout.count("not running") == 2


def test_status_of_a_cluster_that_is_down(small_graph, tmp_path):
    part_config, _ = small_graph
    config = write_cluster(tmp_path, part_config, free_ports(2))
    result = cli("status", "--config", str(config), "--json", "--timeout", "1")
    assert result.returncode == 1
    assert [s["health"] for s in json.loads(result.stdout)["servers"]] == ["UNREACHABLE"] * 2
    bad = cli("status", "--config", str(tmp_path / "missing.yaml"))
    assert bad.returncode == 2 and "file not found" in bad.stderr
