"""The launcher, the demo and the client read one cluster YAML to the same values, and reject the same
mistakes with the same message (the three used to disagree on a numeric graph_name, ``~`` in paths and
IPv6 hosts)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from graphstore.client.config import find_cluster_config
from graphstore.config import ClusterConfig, load_cluster_config
from graphstore.errors import ConfigError
from graphstore.launcher import demo
from graphstore.launcher.hosts import free_port

CLI = [sys.executable, "-m", "graphstore.launcher.cli"]


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home folder (``~``) holding a partition config of graph ``g`` in 2 parts and a token file."""
    folder = tmp_path / "home"
    (folder / "parts").mkdir(parents=True)
    (folder / "parts" / "g.json").write_text(json.dumps({"graph_name": "g", "num_parts": 2}))
    (folder / "token").write_text("t0ken-from-the-file\n")
    monkeypatch.setenv("HOME", str(folder))
    return folder


def cluster_yaml(folder: Path, host: str = "127.0.0.1", graph_name: str = "g") -> Path:
    """A cluster YAML with ``~`` and relative paths, two servers at ``host`` on ports nothing listens on."""
    ports = [free_port(), free_port()]
    while ports[1] == ports[0]:
        ports[1] = free_port()
    path = folder / "cluster.yaml"
    path.write_text(
        f"graph_name: {graph_name}\n"
        "part_config: ~/parts/g.json\n"
        "servers:\n"
        f"  - {{host: '{host}', port: {ports[0]}, part_id: 0}}\n"
        f"  - {{host: '{host}', port: {ports[1]}, part_id: 1, bind_host: '{host}'}}\n"
        "trainers_per_host: 2\n"
        "rpc: {deadline_s: 7, connect_timeout_s: 9}\n"
        "local_read: off\n"
        "background_nice: 5\n"
        "checkpoint: {path: ckpt, every_s: 60}\n"
        "token_file: ~/token\n"
    )
    return path


def read_as_launch(path: Path) -> ClusterConfig:
    """What ``graphstore launch`` reads (with the checks of the files it starts the servers on)."""
    return load_cluster_config(path)


def read_as_client(path: Path) -> ClusterConfig:
    """What ``initialize()`` reads from ``GRAPHSTORE_CONFIG``."""
    return find_cluster_config(str(path))


def read_as_demo(path: Path) -> ClusterConfig:
    """What the demo makes of ``path`` as its template (pointed at the same partitions, written to
    another folder), as launched."""
    part_config = Path.home() / "parts" / "g.json"
    out = path.parent / "demo_out"
    out.mkdir(exist_ok=True)
    written = demo.write_cluster_config(path, part_config, out / "cluster.yaml")
    return dataclasses.replace(load_cluster_config(written), path=str(path.resolve()))


READERS = [read_as_launch, read_as_client, read_as_demo]


def read_as_status(path: Path) -> subprocess.CompletedProcess:
    """``graphstore status --config PATH --json`` (nothing serves, so every server is UNREACHABLE)."""
    command = [*CLI, "status", "--config", str(path), "--json", "--timeout", "0.5"]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_every_reader_gets_the_same_config(tmp_path, home):
    path = cluster_yaml(tmp_path)
    launch, client, from_demo = (read(path) for read in READERS)
    assert launch == client == from_demo
    assert launch.part_config == str(home / "parts" / "g.json")
    assert launch.checkpoint.path == str(tmp_path / "ckpt") and launch.token_file == str(home / "token")
    assert (
        launch.token == "t0ken-from-the-file" and launch.local_read == "off" and launch.background_nice == 5
    )
    assert launch.rpc.deadline_s == 7 and launch.num_trainers == 2
    status = read_as_status(path)
    assert status.returncode == 1, status.stderr  # read fine; nothing serves
    report = json.loads(status.stdout)
    assert report["graph_name"] == "g"
    assert [server["address"] for server in report["servers"]] == launch.addresses


@pytest.mark.parametrize("read", READERS, ids=lambda read: read.__name__)
def test_numeric_graph_name_is_rejected_by_every_reader(tmp_path, home, read):
    path = cluster_yaml(tmp_path, graph_name="2024")
    with pytest.raises(ConfigError, match=r"field 'graph_name' = 2024 must be a string"):
        read(path)


def test_numeric_graph_name_is_rejected_by_the_command_line(tmp_path, home):
    result = read_as_status(cluster_yaml(tmp_path, graph_name="2024"))
    assert result.returncode == 2
    assert "field 'graph_name' = 2024 must be a string" in result.stderr


@pytest.mark.parametrize("written", ["::1", "[::1]"])
@pytest.mark.parametrize("read", READERS, ids=lambda read: read.__name__)
def test_ipv6_servers_read_the_same_by_every_reader(tmp_path, home, read, written):
    path = cluster_yaml(tmp_path, host=written)
    config = read(path)
    assert [server.host for server in config.servers] == ["::1", "::1"]
    assert config.servers[1].bind_host == "::1"
    assert all(address.startswith("[::1]:") for address in config.addresses)
    assert config == read_as_launch(path)


def test_ipv6_addresses_on_the_command_line(tmp_path, home):
    path = cluster_yaml(tmp_path, host="[::1]")
    status = read_as_status(path)
    assert status.returncode == 1, status.stderr
    addresses = [server["address"] for server in json.loads(status.stdout)["servers"]]
    assert addresses == read_as_launch(path).addresses and addresses[0].startswith("[::1]:")
