"""The cluster YAML: valid files load into dataclasses; each mistake gets one message naming the field."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from graphstore.config import (
    DEFAULT_REMOTE_EXEC,
    ClusterConfig,
    load_cluster_config,
    validate_remote_exec,
)
from graphstore.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]

VALID = """\
graph_name: toy
part_config: parts/toy.json
servers:
  - {host: 127.0.0.1, port: 50051, part_id: 0}
  - {host: 127.0.0.1, port: 50052, part_id: 1}
"""


def write_part_config(folder: Path, num_parts: int = 2, graph_name: str = "toy") -> Path:
    """A partition config with the fields the cluster config is checked against."""
    path = folder / "parts" / f"{graph_name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"graph_name": graph_name, "num_parts": num_parts, "format_version": 1}))
    return path


def write_yaml(folder: Path, text: str, name: str = "cluster.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def test_minimal_config_loads_with_defaults(tmp_path):
    part = write_part_config(tmp_path)
    config = load_cluster_config(write_yaml(tmp_path, VALID))
    assert isinstance(config, ClusterConfig)
    assert config.graph_name == "toy"
    assert config.part_config == str(part.resolve())
    assert config.addresses == ["127.0.0.1:50051", "127.0.0.1:50052"]
    assert config.num_parts == 2
    assert config.num_trainers == 1 and config.trainer_hosts == ("127.0.0.1",)
    assert config.remote_exec == DEFAULT_REMOTE_EXEC
    assert config.local_read == "auto" and config.restart == "no"
    assert config.servers[0].exec_host == "127.0.0.1" and config.servers[0].bind_host == "127.0.0.1"
    assert config.path == str((tmp_path / "cluster.yaml").resolve())


def test_full_config_and_relative_paths(tmp_path):
    write_part_config(tmp_path)
    (tmp_path / "certs").mkdir()
    for name in ("server.crt", "server.key", "ca.crt"):
        (tmp_path / "certs" / name).write_text("x")
    text = VALID.replace(
        "part_id: 1}", "part_id: 1, exec_host: node-b, bind_host: 0.0.0.0}"
    ) + textwrap.dedent(
        """\
        trainer_hosts: [127.0.0.1, node-b]
        num_trainers: 4
        master_port: 29600
        remote_exec: "ip netns exec {host} {command}"
        remote_python: /opt/venv/bin/python
        server_args: [--writable-features]
        rpc: {deadline_s: 5, connect_timeout_s: 20, max_retries: 2, backoff_initial_s: 0.05, backoff_max_s: 1}
        local_read: off
        local_part_id: 1
        restart: on-failure
        checkpoint: {path: ckpt, every_s: 60}
        tls: {cert: certs/server.crt, key: certs/server.key, ca: certs/ca.crt}
        token: s3cret-of-16-chars
        metrics_port: 9100
        """
    )
    config = load_cluster_config(write_yaml(tmp_path, text))
    assert config.servers[1].exec_host == "node-b" and config.servers[1].bind_host == "0.0.0.0"
    assert config.servers[1].address == "127.0.0.1:50052"
    assert config.trainers_per_host == 2 and config.num_trainers == 4
    assert config.local_read == "off"  # YAML 1.1 reads a bare `off` as False
    assert config.restart == "on-failure"
    assert config.checkpoint.path == str((tmp_path / "ckpt").resolve()) and config.checkpoint.every_s == 60
    assert config.tls.cert == str((tmp_path / "certs/server.crt").resolve())
    assert config.server_args == ("--writable-features",)
    policy = config.rpc
    assert policy.deadline_s == 5 and policy.max_retries == 2 and policy.connect_timeout_s == 20


def test_servers_are_sorted_by_partition(tmp_path):
    write_part_config(tmp_path)
    text = (
        VALID.replace("part_id: 0}", "part_id: 9}").replace("part_id: 1}", "part_id: 0}").replace("9}", "1}")
    )
    config = load_cluster_config(write_yaml(tmp_path, text))
    assert [s.part_id for s in config.servers] == [0, 1]
    assert [s.port for s in config.servers] == [50052, 50051]


def test_example_configs_in_the_repo_are_valid():
    for name in ("local-2part.yaml", "local-2part-mag.yaml", "multi-host.yaml", "compose.yaml"):
        config = load_cluster_config(REPO / "configs" / name, check_files=False)
        assert config.num_parts >= 2, name


BAD_CASES = [
    # (description, yaml text, field the message must name)
    ("yaml syntax", "graph_name: toy\nservers: [ {host: a\n", "line"),
    ("not a mapping", "- a\n- b\n", "mapping"),
    ("missing graph_name", VALID.replace("graph_name: toy\n", ""), "'graph_name'"),
    ("missing part_config", VALID.replace("part_config: parts/toy.json\n", ""), "'part_config'"),
    ("missing servers", VALID.split("servers:")[0], "'servers'"),
    ("empty servers", VALID.split("servers:")[0] + "servers: []\n", "'servers'"),
    ("missing port", VALID.replace("port: 50052, ", ""), "'servers[1].port'"),
    ("missing host", VALID.replace("host: 127.0.0.1, port: 50051", "port: 50051"), "'servers[0].host'"),
    ("port too big", VALID.replace("50052", "70000"), "'servers[1].port'"),
    ("port zero", VALID.replace("50051", "0"), "'servers[0].port'"),
    ("port not int", VALID.replace("50051", "'abc'"), "'servers[0].port'"),
    ("duplicate address", VALID.replace("50052", "50051"), "'servers[1]'"),
    (
        "duplicate address via localhost",
        VALID.replace("127.0.0.1, port: 50052", "localhost, port: 50051"),
        "'servers[1]'",
    ),
    # A second entry of part_id 0 is its read replica, which leaves partition 1 unserved.
    (
        "duplicate part_id",
        VALID.replace("part_id: 1", "part_id: 0"),
        "1 further entries of a part_id are read",
    ),
    ("part_id gap", VALID.replace("part_id: 1", "part_id: 2"), "'servers'"),
    ("unknown field", VALID + "sever_args: []\n", "'sever_args'"),
    ("unknown server field", VALID.replace("part_id: 1}", "part_id: 1, prot: 3}"), "'servers[1].prot'"),
    ("bad local_read", VALID + "local_read: sometimes\n", "'local_read'"),
    ("bad restart", VALID + "restart: always\n", "'restart'"),
    ("negative deadline", VALID + "rpc: {deadline_s: -1}\n", "'rpc.deadline_s'"),
    ("unknown rpc field", VALID + "rpc: {deadline: 3}\n", "'rpc.deadline'"),
    ("rpc not mapping", VALID + "rpc: 3\n", "'rpc'"),
    ("retries not int", VALID + "rpc: {max_retries: 1.5}\n", "'rpc.max_retries'"),
    ("trainers zero", VALID + "trainers_per_host: 0\n", "'trainers_per_host'"),
    ("trainers disagree", VALID + "trainers_per_host: 2\nnum_trainers: 3\n", "'num_trainers'"),
    ("metrics port", VALID + "metrics_port: 99999\n", "'metrics_port'"),
    ("nice too high", VALID + "background_nice: 20\n", "'background_nice'"),
    ("nice negative", VALID + "background_nice: -1\n", "'background_nice'"),
    ("tls half", VALID + "tls: {cert: a.crt}\n", "'tls.key'"),
    ("remote exec without command", VALID + "remote_exec: 'ssh {host}'\n", "'remote_exec'"),
    ("remote exec bad placeholder", VALID + "remote_exec: 'ssh {hots} {command}'\n", "'remote_exec'"),
    ("checkpoint without path", VALID + "checkpoint: {every_s: 10}\n", "'checkpoint.path'"),
    ("local_part_id out of range", VALID + "local_part_id: 2\n", "'local_part_id'"),
]


@pytest.mark.parametrize("text, field", [case[1:] for case in BAD_CASES], ids=[case[0] for case in BAD_CASES])
def test_bad_config_gets_one_message_naming_the_field(tmp_path, text, field):
    write_part_config(tmp_path)
    path = write_yaml(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_cluster_config(path)
    message = str(info.value)
    assert field in message, message
    assert str(path.resolve()) in message or str(path) in message, message
    assert "\n" not in message


def test_server_count_must_match_partitions_on_disk(tmp_path):
    write_part_config(tmp_path, num_parts=3)
    with pytest.raises(
        ConfigError, match=r"field 'servers' lists 2 servers but part_config .* has num_parts 3"
    ):
        load_cluster_config(write_yaml(tmp_path, VALID))
    # status / stop only need the addresses: no check of the files.
    assert load_cluster_config(tmp_path / "cluster.yaml", check_files=False).num_parts == 2


def test_graph_name_must_match_partition_config(tmp_path):
    write_part_config(tmp_path, graph_name="toy")
    with pytest.raises(ConfigError, match="field 'graph_name' = 'other'"):
        load_cluster_config(write_yaml(tmp_path, VALID.replace("graph_name: toy", "graph_name: other")))


def test_missing_partition_config_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="field 'part_config': file not found"):
        load_cluster_config(write_yaml(tmp_path, VALID))
    with pytest.raises(ConfigError, match="file not found"):
        load_cluster_config(tmp_path / "nope.yaml")


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = write_yaml(tmp_path, "graph_name: toy\nservers:\n  - {host: a, port: 1\n")
    with pytest.raises(ConfigError, match=r"YAML syntax error at line \d+, column \d+"):
        load_cluster_config(path)


def test_remote_exec_validation():
    assert validate_remote_exec("ssh -o BatchMode=yes {host} {command}")
    for bad in ("", "ssh {host}", "ssh {host} {cmd}", "ssh 'unbalanced {command}"):
        with pytest.raises(ConfigError, match="remote_exec"):
            validate_remote_exec(bad)


def test_client_reads_the_launcher_config(tmp_path):
    """Trainers read the same file through GRAPHSTORE_CONFIG: the client's loader agrees with ours."""
    client_config = pytest.importorskip("graphstore.client.config")
    write_part_config(tmp_path)
    text = (
        VALID
        + "rpc: {deadline_s: 7, connect_timeout_s: 9}\nlocal_read: off\ntrainers_per_host: 2\n"
        + "background_nice: 5\n"
    )
    path = write_yaml(tmp_path, text)
    ours = load_cluster_config(path)
    theirs = client_config.find_cluster_config(str(path))
    assert [s.address for s in theirs.servers] == ours.addresses
    assert theirs.part_config == ours.part_config
    assert theirs.local_read == ours.local_read == "off"
    assert theirs.background_nice == ours.background_nice == 5
    assert theirs.rpc.deadline_s == 7 and theirs.rpc.connect_timeout_s == 9
