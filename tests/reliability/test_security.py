"""Shared token and TLS: every call but health checks needs the token, TLS refuses strangers, and the
cluster YAML's settings are honoured by the client, ``launch``, ``status`` (also ``--probe``) and
``stop``; servers bind 127.0.0.1 by default."""

from __future__ import annotations

import json
import socket
import sys

import numpy as np
import pytest

from graphstore.auth import ChannelSecurity, validate_token
from graphstore.client.transport import RemotePartition
from graphstore.errors import ServerError, ServerUnavailableError
from graphstore.launcher.control import SERVING, UNREACHABLE, probe_health, request_shutdown
from graphstore.rpc import RpcPolicy
from graphstore.server.server_config import ServerConfig
from tests.launcher.helpers import TRAINER_SCRIPT, server_command, start_logged
from tests.reliability.helpers import (
    ServerProc,
    cluster_dict,
    free_port_run,
    free_ports,
    run_cli,
    start_server,
    stop_all,
    wait_gone,
    wait_started,
    write_yaml,
)

TOKEN = "t0ken-for-the-reliability-tests"
FAST = RpcPolicy(deadline_s=5, max_retries=1, backoff_initial_s=0.05, connect_timeout_s=10)


def _feat_rows(remote: RemotePartition, k: int) -> np.ndarray:
    meta = remote.metadata()
    return remote.pull("feat", np.arange(meta.node_bounds[k], meta.node_bounds[k] + 5))


def test_token_is_checked_on_every_call_but_health(graph, servers, tmp_path):
    part_config, _, feat = graph
    (port,) = free_ports(1)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    server = start_server(part_config, 0, port, tmp_path, ["--token-file", str(token_file)])
    servers.append(server)
    wait_started(server)

    with RemotePartition(server.address, 0, FAST) as anonymous:
        with pytest.raises(ServerError) as missing:
            anonymous.metadata()
        assert missing.value.code == "UNAUTHENTICATED" and server.address in str(missing.value)
        assert "requires a token" in str(missing.value)
        assert anonymous.health() == SERVING  # the health service needs no token
    with RemotePartition(server.address, 0, FAST, ChannelSecurity(token="not-" + TOKEN)) as wrong:
        for call in (wrong.list_tensors, wrong.stats, lambda: wrong.pull("feat", np.arange(3))):
            with pytest.raises(ServerError) as denied:
                call()
            assert denied.value.code == "PERMISSION_DENIED"
        # Shutdown is one of the calls: without the right token the server keeps serving.
        with pytest.raises(RuntimeError, match="PERMISSION_DENIED"):
            request_shutdown(server.address, 5.0, ChannelSecurity(token="not-" + TOKEN))
        with pytest.raises(RuntimeError, match="UNAUTHENTICATED"):
            request_shutdown(server.address, 5.0)
        assert probe_health(server.address, 2.0) == SERVING
    with RemotePartition(server.address, 0, FAST, ChannelSecurity(token=TOKEN)) as right:
        meta = right.metadata()
        ids = np.arange(meta.node_bounds[0], meta.node_bounds[0] + 7)
        np.testing.assert_array_equal(right.pull("feat", ids), feat[ids])
        right.shutdown()
    assert server.proc.wait(20) == 0
    log = server.log()
    assert (
        "event=auth_denied code=UNAUTHENTICATED" in log and "event=auth_denied code=PERMISSION_DENIED" in log
    )
    assert TOKEN not in log  # the token is never logged


def test_token_validation_names_the_problem_without_echoing_it():
    with pytest.raises(ValueError, match="printable ASCII") as exc:
        validate_token("has a space")
    assert "has a space" not in str(exc.value)
    with pytest.raises(ValueError, match="characters long"):
        validate_token("")
    with pytest.raises(ValueError, match="tls_cert and tls_key"):
        ServerConfig("x.json", 0, tls_cert="a.pem").validate()
    with pytest.raises(ValueError, match="restore_latest needs checkpoint_dir"):
        ServerConfig("x.json", 0, restore_latest=True).validate()


def test_tls_and_mutual_tls(graph, certs, servers, tmp_path):
    part_config, _, feat = graph
    ports = free_ports(2)
    tls = start_server(part_config, 0, ports[0], tmp_path, ["--tls-cert", certs.cert, "--tls-key", certs.key])
    mtls = start_server(
        part_config,
        1,
        ports[1],
        tmp_path,
        ["--tls-cert", certs.cert, "--tls-key", certs.key, "--tls-ca", certs.ca, "--token", TOKEN],
    )
    servers += [tls, mtls]
    trusted = ChannelSecurity(ca=certs.ca)
    wait_started(tls, security=trusted)
    wait_started(mtls, security=ChannelSecurity(ca=certs.ca, cert=certs.cert, key=certs.key))

    with RemotePartition(tls.address, 0, FAST, trusted) as client:
        np.testing.assert_array_equal(_feat_rows(client, 0), feat[:5])
    # A plain-text client, and a client that trusts another CA, get nothing.
    for security in (None, ChannelSecurity(ca=certs.other_ca)):
        with RemotePartition(tls.address, 0, FAST, security) as stranger:
            with pytest.raises(ServerUnavailableError) as exc:
                stranger.metadata()
            assert tls.address in str(exc.value)
    assert probe_health(tls.address, 2.0) == UNREACHABLE  # no TLS: no answer
    with pytest.raises(RuntimeError, match="TLS setting"):  # not mistaken for "not running"
        request_shutdown(tls.address, 2.0)
    assert probe_health(tls.address, 2.0, security=trusted) == SERVING
    probe = run_cli("status", "--probe", tls.address, "--tls-ca", certs.ca, "--timeout", "2")
    assert probe.returncode == 0 and f"{tls.address} SERVING" in probe.stdout
    wrong_ca = run_cli("status", "--probe", tls.address, "--tls-ca", certs.other_ca, "--timeout", "1")
    assert wrong_ca.returncode == 1 and UNREACHABLE in wrong_ca.stdout

    # Mutual TLS: no client certificate, no connection; with one (and the token), rows come back.
    with RemotePartition(mtls.address, 1, FAST, ChannelSecurity(ca=certs.ca, token=TOKEN)) as no_cert:
        with pytest.raises(ServerUnavailableError):
            no_cert.metadata()
    full = ChannelSecurity(ca=certs.ca, cert=certs.cert, key=certs.key, token=TOKEN)
    with RemotePartition(mtls.address, 1, FAST, full) as client:
        meta = client.metadata()
        np.testing.assert_array_equal(
            _feat_rows(client, 1), feat[meta.node_bounds[1] : meta.node_bounds[1] + 5]
        )


def test_cluster_yaml_security_is_honoured_by_launch_status_probe_stop(graph, certs, tmp_path, launcher):
    """One YAML with token_file + TLS (mutual) + metrics: launch runs trainers that initialize() from it,
    and status / probe / stop reach servers started with the same settings."""
    part_config, _, _ = graph
    token_file = tmp_path / "cluster.token"
    token_file.write_text(TOKEN)
    ports = free_ports(2)
    metrics_base = free_port_run(2)
    tls = {"cert": certs.cert, "key": certs.key, "ca": certs.ca, "client_auth": True}
    config = write_yaml(
        tmp_path / "secure.yaml",
        cluster_dict(
            part_config,
            ports,
            token_file=str(token_file),
            tls=tls,
            metrics_port=metrics_base,
            trainers_per_host=2,
            local_read="off",
        ),
    )
    out = tmp_path / "out"
    run = launcher(["--config", str(config), "--"] + [sys.executable, TRAINER_SCRIPT, "--out", str(out)])
    assert run.wait(timeout_s=180) == 0, run.output
    assert TOKEN not in run.output  # not on any command line launch printed
    for rank in range(2):
        assert json.loads((out / f"result-{rank}.json").read_text())["steps"] == 3

    # status, probe and stop against servers started by hand with the same settings.
    servers = []
    try:
        for k in range(2):
            args = ["--token-file", str(token_file), "--tls-cert", certs.cert, "--tls-key", certs.key]
            args += ["--tls-ca", certs.ca, "--metrics-port", str(metrics_base + k)]
            servers.append(start_server(part_config, k, ports[k], tmp_path, args))
        security = ChannelSecurity(ca=certs.ca, cert=certs.cert, key=certs.key, token=TOKEN)
        for server in servers:
            wait_started(server, security=security)
        status = run_cli("status", "--config", str(config), "--json")
        assert status.returncode == 0, status.stdout + status.stderr
        report = json.loads(status.stdout)
        assert [s["health"] for s in report["servers"]] == [SERVING, SERVING]
        assert [s["part_id"] for s in report["servers"]] == [0, 1] and not report["servers"][0]["error"]
        # The metrics endpoints answered over HTTPS (certificate checked against the config's CA).
        assert all(s["metrics_error"] is None and s["metrics"] is not None for s in report["servers"])
        probe = run_cli("status", "--probe", servers[0].address, "--config", str(config))
        assert probe.returncode == 0 and SERVING in probe.stdout
        assert run_cli("status", "--probe", servers[0].address, "--timeout", "1").returncode == 1
        stop = run_cli("stop", "--config", str(config))
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert [s.proc.wait(20) for s in servers] == [0, 0]
    finally:
        stop_all(servers)
    assert wait_gone([s.proc.pid for s in servers]) == []


def _non_loopback_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET: no packet is sent for a UDP connect
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_servers_bind_loopback_by_default(graph, servers, tmp_path):
    assert ServerConfig("x.json", 0).host == "127.0.0.1"
    other = _non_loopback_address()
    if other is None:
        pytest.skip("this host has no non-loopback IPv4 address to try")
    part_config, _, _ = graph
    (port,) = free_ports(1)
    # No --host: the server's own default.
    log = tmp_path / "default-host.log"
    proc = start_logged(server_command(part_config, 0, port), log)
    server = ServerProc(0, port, (), tmp_path, proc=proc, log_path=log)
    servers.append(server)
    wait_started(server)
    assert probe_health(f"127.0.0.1:{port}", 2.0) == SERVING
    assert probe_health(f"{other}:{port}", 1.0) == UNREACHABLE
