"""The subcommands' shared argparse helpers: descriptions from module docstrings, configs from arguments."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

from graphstore.launcher.cli import build_parser
from graphstore.launcher.commands.arguments import add_command, dataclass_from_args


@dataclass(frozen=True)
class Settings:
    part_id: int
    port: int = 0
    max_message_bytes: int = 1
    grace_s: float = 8.0


def test_dataclass_from_args_takes_same_named_arguments_and_computed_values():
    args = argparse.Namespace(part_id=3, port=50051, max_message_mb=2, unrelated="x")
    settings = dataclass_from_args(Settings, args, max_message_bytes=2 * 1024 * 1024)
    assert settings == Settings(part_id=3, port=50051, max_message_bytes=2 * 1024 * 1024, grace_s=8.0)
    assert dataclass_from_args(Settings, args, port=7).port == 7, "a computed value wins over the argument"


def test_add_command_describes_a_command_by_its_docstring():
    subparsers = argparse.ArgumentParser(prog="graphstore").add_subparsers()
    doc = """``graphstore x``: does ``x``
    to things.

    Details that stay out of --help.
    """
    parser = add_command(subparsers, "x", "does x", doc)
    assert parser.description == "graphstore x: does x\n    to things."


def test_every_command_parses_its_arguments():
    parser = build_parser()
    args = parser.parse_args(["server", "--part-config", "g.json", "--part-id", "1", "--max-message-mb", "2"])
    assert (args.part_config, args.part_id, args.max_message_mb) == ("g.json", 1, 2)
    assert (args.durability, args.fsync) == ("checkpoint", False)
    args = parser.parse_args(
        ["server", "--part-config", "g.json", "--part-id", "0", "--durability", "wal", "--fsync"]
    )
    assert (args.durability, args.fsync) == ("wal", True)
    args = parser.parse_args(["generate", "--num-nodes", "10", "--out", "g.npz"])
    assert args.num_nodes == 10 and args.schema == "homogeneous" and args.avg_degree is None  # config default
    args = parser.parse_args(["launch", "--config", "c.yaml", "--", "python", "t.py"])
    assert args.command == ["--", "python", "t.py"]


def test_the_durability_settings_reach_the_server_and_are_checked_there():
    from graphstore.config import parse_cluster_config
    from graphstore.launcher.process_commands import server_command
    from graphstore.server.server_config import ServerConfig

    document = {
        "servers": [{"host": "127.0.0.1", "port": 50051}],
        "checkpoint": {"path": "/ckpt", "durability": "wal", "fsync": True},
    }
    config = parse_cluster_config(document, "/", check_files=False)
    argv = server_command(config, config.servers[0], "python")
    assert argv[argv.index("--durability") + 1] == "wal" and "--fsync" in argv
    plain = parse_cluster_config({**document, "checkpoint": {"path": "/ckpt"}}, "/", check_files=False)
    assert "--durability" not in server_command(plain, plain.servers[0], "python")
    for fields, match in (
        ({"durability": "wal"}, "needs checkpoint_dir"),
        ({"durability": "journal", "checkpoint_dir": "/c"}, "durability must be one of"),
        ({"fsync": True, "checkpoint_dir": "/c"}, "fsync applies to durability 'wal' only"),
    ):
        with pytest.raises(ValueError, match=match):
            ServerConfig("g.json", 0, **fields).validate()


def test_a_config_error_names_the_subcommand_not_the_trainer_command(tmp_path, capsys):
    from graphstore.launcher.cli import main

    bad = tmp_path / "cluster.yaml"
    bad.write_text("servers:\n  - {host: 127.0.0.1, port: 50051}\ntrainers_per_hots: 2\n")
    code = main(["launch", "--config", str(bad), "--", "python", "train.py", "--epochs", "3"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("graphstore launch: error:") and "'trainers_per_hots'" in err[0]
    assert "train.py" not in err[0]
