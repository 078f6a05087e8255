"""Token guessing is bounded: tokens have at least 16 characters unless allowed shorter, a peer that
fails too often is refused RESOURCE_EXHAUSTED for a cool-down (the right token too), and the metrics
endpoint binds loopback and asks for the token."""

from __future__ import annotations

import grpc
import pytest

from graphstore.auth import ChannelSecurity, validate_token
from graphstore.auth_limiter import AuthFailureLimiter, peer_host
from graphstore.client.transport import RemotePartition
from graphstore.errors import ServerError
from graphstore.launcher.control import fetch_metrics_text
from graphstore.rpc import RpcPolicy
from tests.reliability.helpers import free_ports, start_server, wait_started

TOKEN = "t0ken-for-the-auth-limit-tests"
FAST = RpcPolicy(deadline_s=5, max_retries=0, connect_timeout_s=10)


def test_short_tokens_need_an_explicit_override():
    with pytest.raises(ValueError, match="16 to 4096 characters .* allow_short_token"):
        validate_token("short-token")
    assert validate_token("short-token", allow_short=True) == "short-token"
    assert validate_token("x" * 16) == "x" * 16


def test_limiter_blocks_a_host_after_its_burst_for_the_cool_down():
    now = [0.0]
    limiter = AuthFailureLimiter(burst=3, cooldown_s=30.0, clock=lambda: now[0])
    assert [limiter.failed("ipv4:10.0.0.1:5000") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.failed("ipv4:10.0.0.1:5001") == 30.0  # another port, the same host
    assert limiter.blocked_for("ipv4:10.0.0.2:5000") == 0.0  # other hosts are not affected
    now[0] += 10
    assert limiter.blocked_for("ipv4:10.0.0.1:6000") == 20.0
    now[0] += 21
    assert limiter.blocked_for("ipv4:10.0.0.1:6000") == 0.0
    assert peer_host("ipv6:[::1]:5000") == "::1" and peer_host("unix:/tmp/s") == "unix:/tmp/s"


def test_guessing_is_cut_off_and_metrics_need_the_token(graph, servers, tmp_path):
    part_config = graph[0]
    port, metrics_port = free_ports(2)
    args = ["--token", TOKEN, "--auth-failure-burst", "5", "--auth-cooldown-s", "60"]
    args += ["--metrics-port", str(metrics_port)]
    server = start_server(part_config, 0, port, tmp_path, args)
    servers.append(server)
    wait_started(server, security=ChannelSecurity(token=TOKEN))
    # Metrics: loopback only (the default), and only with the token.
    assert "graphstore_rpc_requests_total" in fetch_metrics_text(
        "127.0.0.1", metrics_port, security=ChannelSecurity(token=TOKEN)
    )
    with pytest.raises(ValueError, match="401"):
        fetch_metrics_text("127.0.0.1", metrics_port)
    assert f"metrics_port={metrics_port}" in server.log()
    codes = []
    with RemotePartition(server.address, 0, FAST, ChannelSecurity(token="not-the-token-guessed")) as guesser:
        for _ in range(8):
            with pytest.raises(ServerError) as exc:
                guesser.list_tensors()
            codes.append(exc.value.code)
    assert codes[:5] == ["PERMISSION_DENIED"] * 5
    assert codes[5:] == ["RESOURCE_EXHAUSTED"] * 3
    # The right token from the same host waits out the cool-down too: guessing cannot go on.
    with RemotePartition(server.address, 0, FAST, ChannelSecurity(token=TOKEN)) as right:
        with pytest.raises(ServerError, match="too many calls with a missing or wrong token") as exc:
            right.list_tensors()
        assert exc.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED.name
        assert right.health() == "SERVING"  # health checks are exempt
