"""Servers on "other machines": two network namespaces joined to a third by veth pairs.

``graphstore launch`` runs in the third namespace with ``--remote-exec 'ip netns exec {host} {command}'``
(the code path of ssh to separate machines): each server starts in its own namespace and binds that
namespace's address; the trainers run beside launch and reach the servers only over the veth links.
Needs root (``ip netns add``); skipped cleanly when that is not permitted.

    ns A: server-0 at 10.231.1.2 --veth-- 10.231.1.1  ns C: launch + 2 trainers
    ns B: server-1 at 10.231.2.2 --veth-- 10.231.2.1  ns C
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid

import pytest
import yaml

from tests.launcher.helpers import TRAINER_SCRIPT, wait_for_pid_files, wait_gone
from tests.utils.netns import (
    add_namespace,
    add_veth,
    delete_namespaces,
    ip,
    namespace_pids,
    netns_exec,
    require_netns,
)

pytestmark = pytest.mark.netns

REMOTE_EXEC = "ip netns exec {host} {command}"
SERVER_PORT = 50051


class Namespaces:
    """Creates the three namespaces and two veth links; ``delete()`` ends their processes and removes them."""

    def __init__(self):
        suffix = uuid.uuid4().hex[:6]
        self.a, self.b, self.c = (f"gs{suffix}{role}" for role in "abc")
        self.created: list[str] = []
        self.addresses = {self.a: "10.231.1.2", self.b: "10.231.2.2"}

    def create(self) -> None:
        for name in (self.a, self.b, self.c):
            add_namespace(name, self.created)
        for index, (name, subnet) in enumerate(((self.a, "10.231.1"), (self.b, "10.231.2"))):
            add_veth((name, f"{name}v", f"{subnet}.2/24"), (self.c, f"{self.c}{index}", f"{subnet}.1/24"))

    def delete(self) -> None:
        delete_namespaces(self.created)


@pytest.fixture
def namespaces():
    require_netns()
    spaces = Namespaces()
    try:
        spaces.create()
    except subprocess.CalledProcessError as exc:
        spaces.delete()
        pytest.skip(f"network namespaces not permitted here: {exc.stderr.strip()}")
    try:
        yield spaces
    finally:
        spaces.delete()
        listed = ip("netns", "list", check=False).stdout
        assert not any(name in listed for name in spaces.created), listed


def write_multihost_config(tmp_path, part_config: str, spaces: Namespaces):
    config = {
        "graph_name": "testgraph",
        "part_config": part_config,
        "servers": [
            {"host": spaces.addresses[ns], "port": SERVER_PORT, "part_id": k, "exec_host": ns}
            for k, ns in enumerate((spaces.a, spaces.b))
        ],
        "trainers_per_host": 2,
        "local_read": "off",  # every read crosses a veth link
        "rpc": {"connect_timeout_s": 60, "deadline_s": 30},
    }
    path = tmp_path / "multihost.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_servers_in_two_namespaces_trainers_in_a_third(namespaces, small_graph, tmp_path, launcher):
    part_config, expected_feat = small_graph
    config = write_multihost_config(tmp_path, part_config, namespaces)
    out = tmp_path / "out"
    run = launcher(
        ["--config", str(config), "--remote-exec", REMOTE_EXEC, "--"]
        + [sys.executable, TRAINER_SCRIPT, "--out", str(out), "--expect-feat", expected_feat],
        prefix=tuple(netns_exec(namespaces.c)),
    )
    code = run.wait(timeout_s=180)
    assert code == 0, run.output
    output = run.output
    assert f"started server-0 on {namespaces.a}" in output and f"started server-1 on {namespaces.b}" in output
    assert f"ip netns exec {namespaces.a} " in output
    assert "serving partition 0 of testgraph at 10.231.1.2:50051" in output
    assert "serving partition 1 of testgraph at 10.231.2.2:50051" in output
    for rank in range(2):
        result = json.loads((out / f"result-{rank}.json").read_text())
        assert result["features_checked"] > 0 and result["steps"] == 3
        assert result["env"]["WORLD_SIZE"] == "2"

    assert wait_gone(run.child_pids()) == []
    for name in namespaces.created:
        assert namespace_pids(name) == [], f"processes left in {name}"


def test_trainer_failure_ends_servers_in_other_namespaces(namespaces, small_graph, tmp_path, launcher):
    part_config, _ = small_graph
    config = write_multihost_config(tmp_path, part_config, namespaces)
    out = tmp_path / "pids"
    run = launcher(
        ["--config", str(config), "--remote-exec", REMOTE_EXEC, "--grace-period", "5", "--"]
        + [sys.executable, TRAINER_SCRIPT, "--mode", "sleep", "--out", str(out)],
        prefix=tuple(netns_exec(namespaces.c)),
    )
    pids = wait_for_pid_files(out, 4, alive=run.proc)
    assert all(namespace_pids(ns) for ns in (namespaces.a, namespaces.b))  # the servers run there
    run.send(signal.SIGTERM)
    assert run.wait(timeout_s=60) == 128 + signal.SIGTERM, run.output
    assert wait_gone(list(pids.values()) + run.child_pids()) == []
    for name in namespaces.created:
        assert namespace_pids(name) == [], f"processes left in {name}"
