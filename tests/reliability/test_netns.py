"""A network cut between a trainer and its servers (network namespaces joined by a veth pair; the link is
set down, then up): calls end with UNAVAILABLE or DEADLINE_EXCEEDED instead of hanging, naming the
server, and once the link is back the same client process goes on reading correct rows.
Needs root (``ip netns``); skipped cleanly where that is not permitted.

    ns S: two servers at 10.233.1.2 --veth-- 10.233.1.1  ns C: the client
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.launcher.helpers import kill_pids, server_command
from tests.reliability.helpers import REPO, write_yaml
from tests.utils.netns import add_namespace, add_veth, delete_namespaces, ip, netns_exec, require_netns
from tests.utils.wait import wait_until

pytestmark = pytest.mark.netns

CLIENT = str(Path(__file__).with_name("cut_client.py"))
SERVER_IP, CLIENT_IP = "10.233.1.2", "10.233.1.1"
PORTS = (50061, 50062)
RPC = {
    "deadline_s": 2,
    "max_retries": 3,
    "backoff_initial_s": 0.05,
    "backoff_max_s": 0.5,
    "connect_timeout_s": 30,
}


@pytest.fixture
def link():
    """Namespaces S and C joined by a veth pair; yields ``(server_ns, client_ns, client_side_device)``."""
    require_netns()
    suffix = uuid.uuid4().hex[:6]
    server_ns, client_ns = f"gsr{suffix}s", f"gsr{suffix}c"
    created = []
    outside = f"gsr{suffix}b"
    try:
        for name in (server_ns, client_ns):
            add_namespace(name, created)
        add_veth((server_ns, f"gsr{suffix}a", f"{SERVER_IP}/24"), (client_ns, outside, f"{CLIENT_IP}/24"))
    except subprocess.CalledProcessError as exc:
        delete_namespaces(created)
        pytest.skip(f"network namespaces not permitted here: {exc.stderr.strip()}")
    try:
        yield server_ns, client_ns, outside
    finally:
        delete_namespaces(created)


def _entries(log: Path) -> list[dict]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def test_network_cut_fails_calls_in_bounded_time_and_the_client_recovers(link, graph, tmp_path):
    server_ns, client_ns, device = link
    part_config, _, _ = graph
    expect = Path(part_config).parent.parent / "feat_by_global_id.npy"
    procs = []
    try:
        for k, port in enumerate(PORTS):
            log = open(tmp_path / f"server-{k}.log", "w")
            procs.append(
                subprocess.Popen(
                    [
                        "ip",
                        "netns",
                        "exec",
                        server_ns,
                        *server_command(part_config, k, port, "--host", SERVER_IP),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=REPO,
                    start_new_session=True,
                )
            )
        config = write_yaml(
            tmp_path / "cut.yaml",
            {
                "graph_name": "testgraph",
                "part_config": part_config,
                "servers": [{"host": SERVER_IP, "port": port, "part_id": k} for k, port in enumerate(PORTS)],
                "rpc": RPC,
                "local_read": "off",
            },
        )
        calls, stop = tmp_path / "calls.jsonl", tmp_path / "stop"
        client_log = open(tmp_path / "client.log", "w")
        client = subprocess.Popen(
            [*netns_exec(client_ns), sys.executable, CLIENT, "--config", str(config)]
            + ["--expect-feat", str(expect), "--log", str(calls), "--stop", str(stop)],
            stdout=client_log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            start_new_session=True,
        )
        procs.append(client)
        ok = lambda: sum(1 for e in _entries(calls) if e.get("ok"))  # noqa: E731
        failed = lambda: [e for e in _entries(calls) if e.get("ok") is False]  # noqa: E731
        wait_until(lambda: ok() >= 20, 60, "20 calls before the cut", alive=client)

        ip("-n", client_ns, "link", "set", device, "down")
        # Calls during the cut end with an error instead of hanging: the client logs them (liveness).
        wait_until(lambda: len(failed()) >= 3, 60, "3 failed calls during the cut", alive=client)
        ip("-n", client_ns, "link", "set", device, "up")
        before_recovery = ok()
        wait_until(
            lambda: ok() >= before_recovery + 20, 60, "20 calls after the link came back", alive=client
        )
        stop.write_text("")
        assert client.wait(60) == 0, (tmp_path / "client.log").read_text()
    finally:
        for proc in procs:
            if proc.poll() is None:
                kill_pids([proc.pid])
            proc.wait(10)

    entries = _entries(calls)
    errors = [e for e in entries if e.get("ok") is False]
    assert errors and {e["code"] for e in errors} <= {"UNAVAILABLE", "DEADLINE_EXCEEDED"}, errors
    assert all(e["server"] in {f"{SERVER_IP}:{p}" for p in PORTS} for e in errors)
    assert len({e["pid"] for e in entries}) == 1  # one client process throughout: no restart
    assert entries[-1]["ok"] is True
