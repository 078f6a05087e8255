"""The one cluster-config schema: the cases its readers used to disagree on (a numeric graph_name, ``~``
in paths, IPv6 hosts), every field's validation, and the document round trip."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from graphstore.config import (
    ClusterConfig,
    ConfigFileNotFoundError,
    ServerSpec,
    config_to_mapping,
    format_address,
    load_cluster_config,
    parse_cluster_config,
    split_address,
)
from graphstore.errors import ConfigError
from graphstore.launcher.process_commands import server_command
from graphstore.limits import RequestLimits
from graphstore.rpc import RpcPolicy

SERVERS = [
    {"host": "127.0.0.1", "port": 50051, "part_id": 0},
    {"host": "127.0.0.1", "port": 50052, "part_id": 1},
]


def parse(tmp_path: Path, **fields) -> ClusterConfig:
    """The config of ``fields`` on top of two loopback servers (files not checked)."""
    data = {"servers": SERVERS, **fields}
    return parse_cluster_config(data, tmp_path, source="test.yaml", check_files=False)


def write_yaml(folder: Path, text: str) -> Path:
    path = folder / "cluster.yaml"
    path.write_text(textwrap.dedent(text))
    return path


# ----- the cases the readers disagreed on -------------------------------------------------------


@pytest.mark.parametrize("check_files", [True, False])
def test_numeric_graph_name_is_an_error_naming_the_field(tmp_path, check_files):
    path = write_yaml(
        tmp_path,
        """\
        graph_name: 2024
        part_config: parts/g.json
        servers: [{host: 127.0.0.1, port: 50051}]
        """,
    )
    with pytest.raises(ConfigError, match=r"field 'graph_name' = 2024 must be a string, not int \(quote it"):
        load_cluster_config(path, check_files=check_files)


def test_quoted_numeric_graph_name_is_the_string(tmp_path):
    path = write_yaml(tmp_path, 'graph_name: "2024"\nservers: [{host: 127.0.0.1, port: 50051}]\n')
    assert load_cluster_config(path, check_files=False).graph_name == "2024"


def test_tilde_is_expanded_in_every_path_field(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "certs").mkdir(parents=True)
    (home / "token").write_text("s3cret-token-value\n")
    monkeypatch.setenv("HOME", str(home))
    config = parse(
        tmp_path,
        part_config="~/parts/g.json",
        checkpoint={"path": "~/ckpt"},
        tls={"cert": "~/certs/s.crt", "key": "~/certs/s.key", "ca": "~/certs/ca.crt"},
        token_file="~/token",
        remote_python="~/venv/bin/python",
    )
    assert config.part_config == str(home / "parts" / "g.json")
    assert config.checkpoint.path == str(home / "ckpt")
    assert (config.tls.cert, config.tls.key, config.tls.ca) == tuple(
        str(home / "certs" / name) for name in ("s.crt", "s.key", "ca.crt")
    )
    assert config.token_file == str(home / "token") and config.token == "s3cret-token-value"
    assert config.remote_python == str(home / "venv" / "bin" / "python")
    # A program name stays as written (it is looked up on the PATH of the host it runs on).
    assert parse(tmp_path, remote_python="python3").remote_python == "python3"


@pytest.mark.parametrize("written", ["::1", "[::1]"])
def test_ipv6_hosts_with_or_without_brackets(tmp_path, written):
    servers = [{"host": written, "port": 7000, "exec_host": written, "bind_host": written}]
    config = parse_cluster_config(
        {"servers": servers, "trainer_hosts": [written]}, tmp_path, check_files=False
    )
    server = config.servers[0]
    assert (server.host, server.exec_host, server.bind_host) == ("::1", "::1", "::1")
    assert server.address == "[::1]:7000" and config.addresses == ["[::1]:7000"]
    assert config.trainer_hosts == ("::1",)


def test_ipv6_spellings_of_one_address_are_duplicates(tmp_path):
    servers = [{"host": "::1", "port": 7000}, {"host": "[0:0::1]", "port": 7000}]
    with pytest.raises(ConfigError, match=r"field 'servers\[1\]' duplicates address \[0:0::1\]:7000"):
        parse_cluster_config({"servers": servers}, tmp_path, check_files=False)


@pytest.mark.parametrize(
    "host", ["127.0.0.1:50051", "[::1]:50051", "[10.0.0.1]", "::zz", "node a", "[node-a]"]
)
def test_a_host_that_is_not_one_names_the_field_and_value(tmp_path, host):
    with pytest.raises(ConfigError) as info:
        parse_cluster_config({"servers": [{"host": host, "port": 1}]}, tmp_path, check_files=False)
    assert f"field 'servers[0].host' = {host!r} is not a host name or IP address" in str(info.value)


def test_address_formatting_and_splitting():
    assert format_address("::1", 5) == "[::1]:5" == format_address("[::1]", 5)
    assert format_address("10.0.0.1", 5) == "10.0.0.1:5"
    assert split_address("[::1]:5") == ("::1", 5)
    assert split_address("node-a:50051") == ("node-a", 50051)
    for bad in ("node-a", ":5", "node-a:x"):
        with pytest.raises(ConfigError, match=repr(bad)):
            split_address(bad)


# ----- every field -------------------------------------------------------------------------------

SERVER = {"host": "127.0.0.1", "port": 50051}


def checkpoint(**fields) -> dict:
    """The fields of a ``checkpoint`` section with a folder."""
    return {"checkpoint": {"path": "ckpt", **fields}}


# (description, fields on top of the two servers (a "servers" key replaces them), text the message holds)
BAD_FIELDS = [
    ("graph_name empty", {"graph_name": " "}, "field 'graph_name' = ' ' must be a non-empty string"),
    ("graph_name list", {"graph_name": ["a"]}, "field 'graph_name' = ['a'] must be a string"),
    ("part_config number", {"part_config": 3}, "field 'part_config' = 3 must be a string"),
    ("part_config NUL", {"part_config": "a\x00b"}, "field 'part_config' = 'a\\x00b' is not a valid path"),
    ("servers not a list", {"servers": {"host": "a"}}, "field 'servers' must be a non-empty list"),
    ("server not a mapping", {"servers": ["a:1"]}, "field 'servers[0]' must be a mapping"),
    (
        "server port bool",
        {"servers": [{**SERVER, "port": True}]},
        "field 'servers[0].port' must be an integer",
    ),
    (
        "server part_id negative",
        {"servers": [{**SERVER, "part_id": -1}]},
        "'servers[0].part_id' = -1 must be >= 0",
    ),
    (
        "exec_host number",
        {"servers": [{**SERVER, "exec_host": 5}]},
        "'servers[0].exec_host' = 5 must be a string",
    ),
    (
        "bind_host port",
        {"servers": [{**SERVER, "bind_host": "0.0.0.0:1"}]},
        "'servers[0].bind_host' = '0.0.0.0:1'",
    ),
    ("trainer_hosts empty", {"trainer_hosts": []}, "field 'trainer_hosts' must be a non-empty list of hosts"),
    ("trainer host number", {"trainer_hosts": ["a", 7]}, "field 'trainer_hosts[1]' = 7 must be a string"),
    (
        "trainers_per_host text",
        {"trainers_per_host": "2"},
        "field 'trainers_per_host' must be an integer, got '2'",
    ),
    (
        "num_trainers uneven",
        {"trainer_hosts": ["a", "b"], "num_trainers": 3},
        "'num_trainers' = 3 is not a multiple",
    ),
    ("num_trainers zero", {"num_trainers": 0}, "field 'num_trainers' = 0 must be >= 1"),
    ("master_port zero", {"master_port": 0}, "field 'master_port' = 0 is out of range 1..65535"),
    ("remote_exec number", {"remote_exec": 3}, "field 'remote_exec' = 3 must be a string"),
    ("remote_python number", {"remote_python": 3}, "field 'remote_python' = 3 must be a string"),
    ("server_args mapping", {"server_args": {"a": 1}}, "field 'server_args' must be a list of strings"),
    ("server_args nested", {"server_args": [["a"]]}, "field 'server_args' must be a list of strings"),
    (
        "rpc float retries",
        {"rpc": {"max_retries": 1.5}},
        "field 'rpc.max_retries' must be an integer, got 1.5",
    ),
    ("rpc zero chunk", {"rpc": {"chunk_bytes": 0}}, "field 'rpc.chunk_bytes' = 0 must be >= 1"),
    ("rpc text deadline", {"rpc": {"deadline_s": "3"}}, "field 'rpc.deadline_s' must be a number, got '3'"),
    ("rpc zero multiplier", {"rpc": {"backoff_multiplier": 0}}, "'rpc.backoff_multiplier' = 0 must be > 0"),
    ("rpc backoff order", {"rpc": {"backoff_max_s": 0.05}}, "'rpc.backoff_max_s' = 0.05 is below"),
    (
        "local_read word",
        {"local_read": "always"},
        "field 'local_read' = 'always' must be one of auto, on, off",
    ),
    ("local_part_id negative", {"local_part_id": -1}, "field 'local_part_id' = -1 must be >= 0"),
    (
        "background_nice bool",
        {"background_nice": True},
        "field 'background_nice' must be an integer, got True",
    ),
    ("restart yes", {"restart": True}, "field 'restart' = 'on' must be one of no, on-failure"),
    ("max_restarts negative", {"max_restarts": -1}, "field 'max_restarts' = -1 must be >= 0"),
    ("checkpoint not a mapping", {"checkpoint": "ckpt"}, "field 'checkpoint' must be a mapping, got 'ckpt'"),
    ("checkpoint unknown", {"checkpoint": {"evry_s": 1}}, "field 'checkpoint.evry_s' is not a known"),
    ("checkpoint every_s zero", checkpoint(every_s=0), "'checkpoint.every_s' = 0 must be > 0"),
    ("checkpoint every_s long", checkpoint(every_s=1e6), "'checkpoint.every_s' = 1000000.0"),
    ("checkpoint updates zero", checkpoint(every_updates=0), "'checkpoint.every_updates' = 0 must be >= 1"),
    ("checkpoint keep zero", checkpoint(keep=0), "field 'checkpoint.keep' = 0 must be >= 1"),
    (
        "checkpoint durability unknown",
        checkpoint(durability="journal"),
        "field 'checkpoint.durability' = 'journal' must be one of checkpoint, wal",
    ),
    (
        "wal without a folder",
        {"checkpoint": {"durability": "wal"}},
        "'checkpoint.path' is missing (durability",
    ),
    ("fsync without wal", checkpoint(fsync=True), "'checkpoint.fsync' applies to durability: wal only"),
    ("fsync text", checkpoint(durability="wal", fsync="yes"), "'checkpoint.fsync' must be true or false"),
    ("tls empty", {"tls": {}}, "field 'tls' names no files"),
    ("tls unknown", {"tls": {"ca": "ca", "crt": "x"}}, "field 'tls.crt' is not a known field"),
    (
        "tls client_auth text",
        {"tls": {"ca": "ca", "client_auth": "yes"}},
        "'tls.client_auth' must be true or false",
    ),
    (
        "tls client_auth no cert",
        {"tls": {"ca": "ca", "client_auth": True}},
        "field 'tls.client_auth' needs tls.ca",
    ),
    (
        "tls client_auth no ca",
        {"tls": {"cert": "c", "key": "k", "client_auth": True}},
        "'tls.client_auth' needs",
    ),
    ("tls key alone", {"tls": {"key": "k"}}, "field 'tls.cert' is missing"),
    (
        "tls server_name number",
        {"tls": {"ca": "ca", "server_name": 1}},
        "'tls.server_name' = 1 must be a string",
    ),
    ("token number", {"token": 12345}, "field 'token' must be a string, got a int"),
    ("token with space", {"token": "a b"}, "field 'token' is not valid"),
    (
        "token and file",
        {"token": "abc", "token_file": "t"},
        "field 'token' and token_file exclude each other",
    ),
    ("token_file missing", {"token_file": "nope"}, "field 'token_file' = "),
    (
        "metrics_port overflow",
        {"metrics_port": 65535},
        "field 'metrics_port' = 65535: server k uses metrics_port",
    ),
    (
        "metrics_port text",
        {"metrics_port": "9100"},
        "field 'metrics_port' must be an integer port, got '9100'",
    ),
    ("short token", {"token": "s3cret"}, "16 to 4096 characters long, got 6"),
    ("limits typo", {"limits": {"max_edges": 5}}, "field 'limits.max_edges' is not a known field"),
    ("limits zero", {"limits": {"max_sampled_edges": 0}}, "'limits.max_sampled_edges' = 0 must be >= 1"),
    ("limits rank", {"limits": {"max_tensor_dims": 9}}, "max_tensor_dims must be at most 8"),
    ("limits barrier", {"limits": {"max_barrier_timeout_s": 1e300}}, "max_barrier_timeout_s must be in"),
    (
        "chunks over the limits",
        {"rpc": {"chunk_bytes": 2048}, "limits": {"max_request_bytes": 1024}},
        "'rpc.chunk_bytes' = 2048 must fit the servers' limits",
    ),
    ("metrics_host", {"metrics_host": "a b"}, "field 'metrics_host'"),
    ("checkpoint root", {"checkpoint": {"root": 3}}, "'checkpoint.root'"),
]


@pytest.mark.parametrize("fields, expected", [c[1:] for c in BAD_FIELDS], ids=[c[0] for c in BAD_FIELDS])
def test_each_field_rejects_a_bad_value_naming_it(tmp_path, fields, expected):
    with pytest.raises(ConfigError) as info:
        parse(tmp_path, **fields)
    message = str(info.value)
    assert message.startswith("cluster config 'test.yaml': ") and "\n" not in message, message
    assert expected in message, message


def test_defaults_of_a_servers_only_config(tmp_path):
    data = {"servers": [SERVER, {"host": "127.0.0.1", "port": 50052}]}
    config = parse_cluster_config(data, tmp_path, "x", check_files=False)
    assert [s.part_id for s in config.servers] == [0, 1], "an entry without part_id serves its index"
    assert config.graph_name is None and config.part_config is None
    assert config.rpc == RpcPolicy() and config.tls is None and config.token is None
    assert config.trainer_hosts == ("127.0.0.1",) and config.num_trainers == 1
    assert config.local_read == "auto" and config.restart == "no" and config.metrics_port_of(1) is None


@pytest.mark.parametrize("missing", ["graph_name", "part_config"])
def test_launch_checks_need_graph_name_and_part_config(tmp_path, missing):
    data = {"graph_name": "g", "part_config": "g.json", "servers": [SERVER]}
    del data[missing]
    with pytest.raises(ConfigError, match=f"field '{missing}' is missing"):
        parse_cluster_config(data, tmp_path, check_files=True)
    assert parse_cluster_config(data, tmp_path, check_files=False).num_parts == 1


def full_config(folder: Path) -> ClusterConfig:
    """A config that sets every field (relative paths against ``folder``)."""
    (folder / "token").write_text("t0ken-from-the-file\n")
    return parse(
        folder,
        graph_name="g",
        part_config="parts/g.json",
        trainer_hosts="node-a",
        num_trainers=3,
        master_port=29600,
        remote_exec="docker exec {host} {command}",
        remote_python="/opt/py",
        server_args=["--num-threads", 4, 0.5],
        rpc={"deadline_s": 5, "max_retries": 0, "chunk_bytes": 1024, "backoff_max_s": 0.1},
        local_read=False,
        local_part_id=1,
        background_nice=19,
        restart="on-failure",
        max_restarts=0,
        checkpoint={
            "path": "ckpt",
            "every_updates": 10,
            "keep": 1,
            "durability": "wal",
            "fsync": True,
            "root": "named",
        },
        tls={"cert": "s.crt", "key": "s.key", "ca": "ca.crt", "client_auth": True, "server_name": "gs"},
        token_file="token",
        metrics_port=65534,
        metrics_host="0.0.0.0",
        limits={"max_sampled_edges": 1000, "memory_margin_mb": 0, "auth_cooldown_s": 5},
    )


def test_good_values_of_every_field(tmp_path):
    config = full_config(tmp_path)
    assert config.trainer_hosts == ("node-a",) and config.trainers_per_host == 3
    assert config.server_args == ("--num-threads", "4", "0.5"), "argv words: numbers as their text"
    assert config.rpc.deadline_s == 5.0 and config.rpc.max_retries == 0 and config.rpc.chunk_bytes == 1024
    assert config.local_read == "off" and config.local_part_id == 1 and config.background_nice == 19
    assert config.checkpoint.path == str(tmp_path / "ckpt") and config.checkpoint.every_updates == 10
    assert config.checkpoint.durability == "wal" and config.checkpoint.fsync
    assert config.tls.client_auth and config.tls.ca == str(tmp_path / "ca.crt")
    assert config.token == "t0ken-from-the-file" and config.metrics_port_of(1) == 65535
    security = config.channel_security()
    assert security.cert == str(tmp_path / "s.crt") and security.token == "t0ken-from-the-file"
    assert config.limits == RequestLimits(max_sampled_edges=1000, memory_margin_mb=0, auth_cooldown_s=5.0)
    assert config.checkpoint.root == str(tmp_path / "named") and config.metrics_host == "0.0.0.0"


def test_short_token_with_the_override_and_the_servers_flags(tmp_path):
    config = parse(
        tmp_path,
        part_config="g.json",
        token="s3cret",
        allow_short_token=True,
        metrics_port=9100,
        metrics_host="0.0.0.0",
        checkpoint={"root": "named"},
        limits={"max_sampled_edges": 1000, "auth_cooldown_s": 2.5},
    )
    assert config.token == "s3cret" and config.allow_short_token
    argv = server_command(config, config.servers[1], "python")
    for flag in (
        ["--allow-short-token"],
        ["--metrics-port", "9101", "--metrics-host", "0.0.0.0"],
        ["--checkpoint-root", str(tmp_path / "named")],
        ["--max-sampled-edges", "1000", "--auth-cooldown-s", "2.5"],
    ):
        assert any(argv[i : i + len(flag)] == flag for i in range(len(argv))), (flag, argv)
    assert "s3cret" not in argv
    from graphstore.launcher.cli import build_parser
    from graphstore.launcher.commands.server import limits_from_args

    args = build_parser("server").parse_args(argv[4:])
    assert limits_from_args(args) == config.limits and args.allow_short_token


def test_document_round_trip_gives_an_equal_config(tmp_path):
    config = full_config(tmp_path)
    document = config_to_mapping(config)
    assert "token" not in document, "a token from a file is written as its path"
    again = parse_cluster_config(document, tmp_path / "elsewhere", source="test.yaml", check_files=False)
    assert again == config
    inline = dataclasses.replace(config, token="inline-token-of-16+", token_file=None)
    assert parse_cluster_config(config_to_mapping(inline), tmp_path, "test.yaml", check_files=False) == inline


def test_server_spec_defaults_its_exec_and_bind_host():
    assert ServerSpec("10.0.0.1", 1, 0) == ServerSpec("10.0.0.1", 1, 0, "10.0.0.1", "10.0.0.1")
    assert ServerSpec("::1", 1, 0).address == "[::1]:1"


def test_missing_file_is_a_config_error_and_a_file_not_found_error(tmp_path):
    with pytest.raises(ConfigFileNotFoundError) as info:
        load_cluster_config(tmp_path / "nope.yaml")
    assert isinstance(info.value, ConfigError) and isinstance(info.value, FileNotFoundError)
    assert "nope.yaml" in str(info.value)


def test_reading_a_config_loads_neither_torch_nor_numpy(tmp_path):
    """``graphstore status --probe`` and ``stop`` read the config; they must stay quick to start."""
    path = write_yaml(tmp_path, "servers: [{host: '::1', port: 7000}]\n")
    code = (
        "import sys; from graphstore.config import load_cluster_config\n"
        f"assert load_cluster_config({str(path)!r}, check_files=False).addresses == ['[::1]:7000']\n"
        "assert 'torch' not in sys.modules and 'numpy' not in sys.modules, sorted(sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
