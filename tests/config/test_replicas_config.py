"""Read replicas in the cluster YAML: several entries with one ``part_id`` are that partition's owner
(the first) and read replicas; the commands launch runs, the metrics ports, Slurm's placement and the
written-back document follow."""

from __future__ import annotations

import pytest
import yaml

from graphstore.config import config_to_mapping, parse_cluster_config
from graphstore.errors import ConfigError
from graphstore.launcher.process_commands import server_command
from graphstore.launcher.slurm import cluster_for_nodes

DOC = {
    "graph_name": "toy",
    "servers": [
        {"host": "127.0.0.1", "port": 50051, "part_id": 0},
        {"host": "127.0.0.1", "port": 50052, "part_id": 1},
        {"host": "127.0.0.1", "port": 50053, "part_id": 1},
        {"host": "127.0.0.1", "port": 50054, "part_id": 0},
        {"host": "127.0.0.1", "port": 50055, "part_id": 0},
    ],
    "metrics_port": 9100,
    "checkpoint": {"path": "/tmp/ckpt", "durability": "wal"},
}


def parse(doc: dict):
    return parse_cluster_config(doc, "/tmp", check_files=False)


def test_the_first_entry_of_a_part_id_owns_it_and_the_others_are_read_replicas():
    config = parse(DOC)
    assert config.num_parts == 2
    assert [(s.part_id, s.port, s.replica) for s in config.servers] == [(0, 50051, 0), (1, 50052, 0)]
    assert [(s.part_id, s.port, s.replica) for s in config.read_replicas] == [
        (0, 50054, 1),
        (0, 50055, 2),
        (1, 50053, 1),
    ]
    assert [s.name for s in config.replicas_of(0)] == ["server-0", "server-0.r1", "server-0.r2"]
    assert len(config.all_servers) == 5 and config.addresses == ["127.0.0.1:50051", "127.0.0.1:50052"]
    # Owners keep metrics_port + part_id; the replicas follow them.
    assert [config.metrics_port_of(s.part_id, s.replica) for s in config.all_servers] == [
        9100,
        9101,
        9102,
        9103,
        9104,
    ]
    with pytest.raises(KeyError, match="no read replica 3"):
        config.metrics_port_of(0, 3)


def test_the_written_document_reads_back_to_the_same_servers():
    config = parse(DOC)
    again = parse(yaml.safe_load(yaml.safe_dump(config_to_mapping(config))))
    assert again.servers == config.servers and again.read_replicas == config.read_replicas


def test_a_missing_partition_and_a_duplicate_address_are_named():
    doc = dict(
        DOC, servers=[{"host": "127.0.0.1", "port": 1, "part_id": 0}, {"host": "h", "port": 2, "part_id": 2}]
    )
    with pytest.raises(ConfigError, match="has no server for part_id 1"):
        parse(doc)
    doc = dict(DOC, servers=[{"host": "127.0.0.1", "port": 1, "part_id": 0}] * 2)
    with pytest.raises(ConfigError, match=r"duplicates address 127.0.0.1:1 of servers\[0\]"):
        parse(doc)


def test_a_read_replica_runs_with_read_replica_and_no_checkpoint_or_log():
    config = parse(dict(DOC, part_config="/data/toy.json"))
    owner, replica = config.replicas_of(0)[:2]
    owner_argv = server_command(config, owner, "python", restore_latest=True)
    replica_argv = server_command(config, replica, "python", restore_latest=True)
    assert "--read-replica" not in owner_argv
    assert {"--checkpoint-dir", "--durability", "--restore-latest"} <= set(owner_argv)
    assert "--read-replica" in replica_argv
    assert not {"--checkpoint-dir", "--durability", "--restore-latest", "--fsync"} & set(replica_argv)
    assert replica_argv[replica_argv.index("--port") + 1] == "50054"
    assert replica_argv[replica_argv.index("--metrics-port") + 1] == "9102"


def test_slurm_puts_a_partitions_replicas_on_different_nodes():
    mapping = cluster_for_nodes({"graph_name": "toy"}, ["n1", "n2"], 2, 50051, replicas=2)
    config = parse(mapping)
    placed = {(s.part_id, s.replica): s.address for s in config.all_servers}
    assert placed == {
        (0, 0): "n1:50051",
        (1, 0): "n2:50051",
        (0, 1): "n2:50052",
        (1, 1): "n1:50052",
    }
    with pytest.raises(ValueError, match="replicas must be >= 1"):
        cluster_for_nodes({}, ["n1"], 2, 50051, replicas=0)
