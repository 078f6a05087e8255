"""docker-compose.yml under a real Docker engine (``make compose-test``; not part of ``make test``).

The image is built once (only the ``partition`` service builds it; every service runs it); then, in one
compose project: ``up --exit-code-from trainer`` runs partition -> healthy servers -> trainer and
returns the trainer's exit code; a second ``up`` reuses the partitions; two trainers form one job; a
server killed mid-training makes the trainer exit 1 with one line naming it; a server that restarts
mid-training is waited for and training goes on; a read replica killed mid-training
(``docker-compose.replicas.yml``) leaves the trainer to finish with exit 0; ``down -v`` leaves no
container, network or volume.

Runs only with ``GRAPHSTORE_COMPOSE_TEST=1`` (what ``make compose-test`` sets) and skips cleanly when no
Docker daemon answers or the base image (``BASE_IMAGE``, default ``python:3.11-slim``) is not there.
Build settings come from the environment: ``BASE_IMAGE``, ``TORCH_INDEX_URL``, ``TORCH_SPEC``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from graphstore.config import load_cluster_config
from tests.launcher.helpers import REPO
from tests.utils.wait import wait_until

COMPOSE = REPO / "docker-compose.yml"
TWO_TRAINERS = REPO / "docker-compose.2-trainers.yml"
REPLICAS = REPO / "docker-compose.replicas.yml"
OPT_IN = "GRAPHSTORE_COMPOSE_TEST"
DEFAULT_BASE_IMAGE = "python:3.11-slim"
ERROR_LINE = re.compile(r"^train_dist\.py: error: server server-1:50052: UNAVAILABLE: .+$")


def _docker(*args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout_s, cwd=REPO)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return None


def _skip_reason() -> str | None:
    if os.environ.get(OPT_IN) != "1":
        return f"docker compose runs under `make compose-test` ({OPT_IN}=1)"
    version = _docker("compose", "version")
    if version is None or version.returncode != 0:
        return "needs the docker command with its compose plugin"
    info = _docker("info", "--format", "{{.ServerVersion}}")
    if info is None or info.returncode != 0:
        return "no Docker daemon answers"
    base = os.environ.get("BASE_IMAGE") or DEFAULT_BASE_IMAGE
    found = _docker("image", "inspect", base)
    if found is None or found.returncode != 0:
        return f"the base image {base} is not here (docker pull {base}, or set BASE_IMAGE)"
    return None


_REASON = _skip_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")


class Project:
    """One compose project (a unique name) over the repository's compose files."""

    def __init__(self, tmp: Path):
        self.name = f"gs-test-{uuid.uuid4().hex[:8]}"
        self.tmp = tmp

    def compose(self, *args: str, files: tuple[Path, ...] = (COMPOSE,), timeout_s: float = 300.0):
        """``docker compose -p NAME -f ... ARGS``; the result, whatever its exit code."""
        chosen = [word for path in files for word in ("-f", str(path))]
        result = _docker("compose", "-p", self.name, *chosen, *args, timeout_s=timeout_s)
        assert result is not None, f"docker compose {' '.join(args)} did not finish in {timeout_s} s"
        return result

    def trainer_override(self, epochs: int) -> Path:
        """A compose file giving the trainer ``epochs`` epochs (time to act while it trains)."""
        path = self.tmp / f"trainer-{epochs}-epochs.yml"
        command = ["python", "examples/train_dist.py", "--graph-name", "cora", "--epochs", str(epochs)]
        path.write_text(
            yaml.safe_dump({"services": {"trainer": {"command": [*command, "--save-model", ""]}}})
        )
        return path

    def logs(self, service: str, timestamps: bool = False) -> str:
        args = ["logs", "--no-log-prefix", "--no-color", *(["--timestamps"] if timestamps else []), service]
        return self.compose(*args, timeout_s=60).stdout

    def states(self) -> dict[str, dict]:
        """``{service: {"State": ..., "ExitCode": ...}}`` of the project's containers."""
        out = self.compose("ps", "--all", "--format", "json", timeout_s=60).stdout.strip()
        rows = json.loads(out) if out.startswith("[") else [json.loads(line) for line in out.splitlines()]
        return {row["Service"]: row for row in rows}

    def resources(self) -> dict[str, list[str]]:
        """The project's containers, networks and volumes that Docker still has."""
        label = f"label=com.docker.compose.project={self.name}"
        found = {}
        for kind, args in (
            ("containers", ("ps", "--all", "--quiet", "--filter", label)),
            ("networks", ("network", "ls", "--quiet", "--filter", label)),
            ("volumes", ("volume", "ls", "--quiet", "--filter", label)),
        ):
            result = _docker(*args)
            found[kind] = result.stdout.split() if result is not None else ["<docker did not answer>"]
        return found

    def training(self, epochs: int) -> tuple[Path, ...]:
        """``up --detach`` with a trainer of ``epochs`` epochs, returned once it is past epoch 2; the
        compose files used (stop them with ``compose("stop", files=...)``)."""
        files = (COMPOSE, self.trainer_override(epochs))
        up = self.compose("up", "--detach", files=files, timeout_s=600)
        assert up.returncode == 0, up.stderr[-4000:]
        wait_until(lambda: "epoch   2" in self.logs("trainer"), 180, "trainer epoch 2", interval_s=0.5)
        return files


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The built image and a compose project, removed with its volume at the end."""
    stack = Project(tmp_path_factory.mktemp("compose"))
    try:
        build = stack.compose("build", timeout_s=1800)
        assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
        built = re.findall(r"^\s*(\S+)\s+Built\s*$", build.stdout + build.stderr, re.M)
        assert built == ["partition"], f"one service builds the image, got {built}"
        images = stack.compose("config", "--images", timeout_s=60).stdout.split()
        assert len(images) == 4 and len(set(images)) == 1, images
        yield stack
    finally:
        stack.compose("down", "--volumes", "--remove-orphans", "--timeout", "20", timeout_s=180)


def _seconds(timestamp: str) -> float:
    """A ``docker logs --timestamps`` stamp (RFC 3339, nanoseconds, UTC) as epoch seconds."""
    stamp = re.sub(r"(\.\d{6})\d*", r"\1", timestamp).replace("Z", "+00:00")
    return datetime.fromisoformat(stamp).timestamp()


def test_up_returns_the_trainers_exit_code_after_partition_and_healthy_servers(project):
    started = time.time()
    up = project.compose("up", "--exit-code-from", "trainer", timeout_s=600)
    assert up.returncode == 0, up.stdout[-4000:] + up.stderr[-4000:]
    states = project.states()
    assert states["partition"]["ExitCode"] == 0 and states["trainer"]["ExitCode"] == 0
    assert "config: /data/cora/cora.json" in project.logs("partition")
    assert re.search(r"^test accuracy: 0\.\d{4}$", project.logs("trainer"), re.M)
    # From `up` to the trainer's first batch: its first line comes right before the first batch, the
    # epoch-0 line once that epoch (one batch of Cora's training nodes) is done.
    stamped = project.logs("trainer", timestamps=True).splitlines()
    ready = next(line for line in stamped if " graph cora: " in line)
    first = next(line for line in stamped if " epoch   0 " in line)
    print(
        f"\ncompose up -> trainer's first line {_seconds(ready.split()[0]) - started:.1f} s, "
        f"-> first batch done {_seconds(first.split()[0]) - started:.1f} s, "
        f"-> trainer exit code returned {time.time() - started:.1f} s"
    )


def test_a_second_up_reuses_the_partitions(project):
    up = project.compose("up", "--exit-code-from", "trainer", timeout_s=600)
    assert up.returncode == 0, up.stdout[-4000:] + up.stderr[-4000:]
    assert "partitions exist at /data/cora: reusing them" in project.logs("partition")


def test_two_trainers_form_one_job(project):
    files = (COMPOSE, TWO_TRAINERS)
    up = project.compose("up", "--exit-code-from", "trainer", files=files, timeout_s=600)
    assert up.returncode == 0, up.stdout[-4000:] + up.stderr[-4000:]
    assert "2 trainer(s), distributed" in project.logs("trainer")
    assert project.states()["trainer-1"]["ExitCode"] == 0
    project.compose("rm", "--force", "--stop", "trainer-1", files=files)


def test_a_killed_server_fails_the_trainer_with_one_line_naming_it(project):
    files = project.training(epochs=100000)
    try:
        killed = time.monotonic()
        assert project.compose("kill", "server-1", files=files).returncode == 0
        # Bounded by the trainer's retry budget (configs/compose.yaml), plus start-up slack.
        policy = load_cluster_config(REPO / "configs" / "compose.yaml", check_files=False).rpc
        budget = policy.deadline_s + policy.max_retries * policy.backoff_max_s + 30
        waited = project.compose("wait", "trainer", files=files, timeout_s=budget)
        print(f"\ntrainer exited {time.monotonic() - killed:.1f} s after `docker compose kill server-1`")
        assert waited.returncode == 1, waited.stdout + waited.stderr
        lines = project.logs("trainer").splitlines()
        last_epoch = max(i for i, line in enumerate(lines) if line.startswith("epoch "))
        after = [line for line in lines[last_epoch + 1 :] if line.strip()]
        assert len(after) == 1 and ERROR_LINE.match(after[0]), "\n".join(lines[-40:])
    finally:
        project.compose("stop", files=files, timeout_s=120)


def test_in_the_foreground_a_killed_server_ends_the_run_with_the_trainer_stopped_by_sigterm(project):
    """``up --exit-code-from`` stops every container once one exits; the trainer (under ``init: true``)
    ends on the stop signal instead of ignoring it as a PID 1 would (then SIGKILL, 137)."""
    files = (COMPOSE, project.trainer_override(epochs=100000))
    # Fresh containers: the trainer's log must not hold an earlier test's epochs.
    project.compose("rm", "--force", "--stop", files=files, timeout_s=120)
    chosen = [word for path in files for word in ("-f", str(path))]
    up = subprocess.Popen(
        ["docker", "compose", "-p", project.name, *chosen, "up", "--exit-code-from", "trainer"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: "epoch   2" in project.logs("trainer"), 300, "trainer epoch 2", interval_s=0.5)
        assert project.compose("kill", "server-1", files=files).returncode == 0
        assert up.wait(timeout=120) == 128 + signal.SIGTERM
        assert project.states()["trainer"]["ExitCode"] == 128 + signal.SIGTERM
    finally:
        if up.poll() is None:
            up.kill()
            up.wait(30)
        project.compose("stop", files=files, timeout_s=120)


def test_a_restarted_server_is_waited_for_and_training_goes_on(project):
    files = project.training(epochs=60)
    try:
        assert project.compose("kill", "server-1", files=files).returncode == 0
        assert project.compose("start", "server-1", files=files).returncode == 0
        waited = project.compose("wait", "trainer", files=files, timeout_s=600)
        trainer = project.logs("trainer")
        assert waited.returncode == 0, trainer[-4000:]
        assert "epoch  59" in trainer and re.search(r"^test accuracy: 0\.\d{4}$", trainer, re.M)
        server = project.logs("server-1")
        # Started twice, each time from the latest checkpoint under checkpoint.path, if any.
        assert server.count("serving partition 1 of cora") >= 2
        assert server.count("root=/data/checkpoints") >= 2 or server.count("restored_from=/data") >= 1, server
    finally:
        project.compose("stop", files=files, timeout_s=120)


def test_a_killed_read_replica_does_not_stop_the_trainer(project):
    """With a read replica per partition (docker-compose.replicas.yml, every read over RPC), killing a
    replica mid-training moves its partition's reads to the owner: the trainer finishes, exit 0."""
    files = (COMPOSE, REPLICAS, project.trainer_override(epochs=40))
    project.compose("rm", "--force", "--stop", files=files, timeout_s=120)  # a fresh trainer log
    try:
        up = project.compose("up", "--detach", files=files, timeout_s=600)
        assert up.returncode == 0, up.stderr[-4000:]
        wait_until(lambda: "epoch   2" in project.logs("trainer"), 300, "trainer epoch 2", interval_s=0.5)
        replica_log = project.compose("logs", "--no-log-prefix", "server-1-r1", files=files, timeout_s=60)
        assert "--read-replica" in replica_log.stdout, replica_log.stdout[-3000:]
        assert project.compose("kill", "server-1-r1", files=files).returncode == 0
        killed = time.monotonic()
        epochs_before = project.logs("trainer").count("\nepoch ")
        assert "epoch  39" not in project.logs("trainer"), "the replica died after training ended"
        waited = project.compose("wait", "trainer", files=files, timeout_s=600)
        trainer = project.logs("trainer")
        assert waited.returncode == 0, trainer[-4000:]
        accuracy = re.search(r"^test accuracy: 0\.\d{4}$", trainer, re.M)
        assert "epoch  39" in trainer and accuracy
        print(
            f"\n`docker compose kill server-1-r1` after about {epochs_before} of 40 epochs; the trainer "
            f"exited {waited.returncode} {time.monotonic() - killed:.1f} s later ({accuracy.group(0)})"
        )
        state = project.compose("ps", "--all", "--format", "{{.State}}", "server-1-r1", files=files)
        assert state.stdout.strip() == "exited", state.stdout
    finally:
        project.compose("stop", files=files, timeout_s=120)
        project.compose("rm", "--force", "server-0-r1", "server-1-r1", files=files, timeout_s=120)


def test_down_with_volumes_leaves_nothing(project):
    assert project.resources()["volumes"], "the partition volume exists before down"
    down = project.compose("down", "--volumes", "--remove-orphans", "--timeout", "20", timeout_s=180)
    assert down.returncode == 0, down.stderr
    assert project.resources() == {"containers": [], "networks": [], "volumes": []}
