"""docker-compose.yml and the Dockerfile, without a Docker engine.

The compose file is parsed and its structure checked (services, health checks, depends_on conditions,
the shared volume); then every service's command and every health-check command runs for real on
loopback, in the order compose would run them: service names map to 127.0.0.1, each server's port to a
free port, ``/data`` to a temporary folder and ``/app`` (the image's working directory) to the repository.
The trainer must finish with exit code 0 and the servers must stop cleanly.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.launcher.helpers import REPO, TRAINER_SCRIPT, end_process_group, free_ports

COMPOSE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"
TRAIN_EXAMPLE = "examples/train_dist.py"


def load_compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def command_argv(command) -> list[str]:
    """A compose ``command`` (list, or string split like compose does) as an argument list."""
    return list(command) if isinstance(command, list) else shlex.split(command)


def healthcheck_argv(test) -> list[str]:
    """A compose healthcheck ``test`` (``["CMD", ...]``, ``["CMD-SHELL", "..."]`` or a string) as argv."""
    if isinstance(test, str):
        return ["sh", "-c", test]
    kind, *rest = test
    if kind == "CMD":
        return rest
    if kind == "CMD-SHELL":
        return ["sh", "-c", rest[0]]
    raise AssertionError(f"unsupported healthcheck test {test!r}")


def start_order(services: dict) -> list[str]:
    """Services in dependency order (compose starts a service after everything it depends on)."""
    order: list[str] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in order:
            return
        assert name not in visiting, f"depends_on cycle through {name}"
        visiting.add(name)
        for dependency in services[name].get("depends_on", {}) or {}:
            visit(dependency)
        order.append(name)

    for name in services:
        visit(name)
    return order


def server_port(service: dict) -> int:
    argv = command_argv(service["command"])
    return int(argv[argv.index("--port") + 1])


def test_compose_structure():
    compose = load_compose()
    services = compose["services"]
    servers = sorted(name for name in services if re.fullmatch(r"server-\d+", name))
    assert servers == ["server-0", "server-1"]
    assert {"partition", "trainer"} <= set(services)
    assert "graph-data" in compose["volumes"]

    for name, service in services.items():
        assert service["image"] == "graphstore:latest", name
        assert "graph-data:/data" in service["volumes"], name
        assert service["build"]["context"] == "."
        assert {"TORCH_INDEX_URL", "TORCH_SPEC"} <= set(service["build"]["args"])

    partition = " ".join(command_argv(services["partition"]["command"]))
    assert (
        "graphstore partition" in partition
        and "--num-parts 2" in partition
        and "--out /data/cora" in partition
    )
    assert services["partition"].get("restart") == "no"

    for part_id, name in enumerate(servers):
        service = services[name]
        argv = command_argv(service["command"])
        assert argv[:2] == ["graphstore", "server"]
        assert argv[argv.index("--part-id") + 1] == str(part_id)
        assert argv[argv.index("--part-config") + 1] == "/data/cora/cora.json"
        assert argv[argv.index("--host") + 1] == "0.0.0.0"  # reachable from the trainer's container
        port = server_port(service)
        assert healthcheck_argv(service["healthcheck"]["test"]) == [
            "graphstore",
            "status",
            "--probe",
            f"localhost:{port}",
        ]
        assert service["depends_on"] == {"partition": {"condition": "service_completed_successfully"}}

    trainer = services["trainer"]
    argv = command_argv(trainer["command"])
    assert argv[:2] == ["python", TRAIN_EXAMPLE]
    for flag, value in (("--graph-name", "cora"), ("--part-config", "/data/cora/cora.json")):
        assert argv[argv.index(flag) + 1] == value
    assert int(argv[argv.index("--epochs") + 1]) >= 1
    assert trainer["depends_on"] == {name: {"condition": "service_healthy"} for name in servers}
    env = trainer["environment"]
    assert env["GRAPHSTORE_CONFIG"].startswith("/app/configs/")
    for key in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        assert key in env

    # The trainer's cluster config names the servers by service name and port.
    cluster = yaml.safe_load((REPO / env["GRAPHSTORE_CONFIG"].removeprefix("/app/")).read_text())
    assert [(s["host"], s["port"]) for s in cluster["servers"]] == [
        (name, server_port(services[name])) for name in servers
    ]
    assert cluster["part_config"] == "/data/cora/cora.json"


def test_dockerfile_structure():
    lines = [
        line.strip()
        for line in DOCKERFILE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "FROM python:3.11-slim"
    args = {line.split()[1].split("=")[0] for line in lines if line.startswith("ARG ")}
    assert {"TORCH_INDEX_URL", "TORCH_SPEC"} <= args
    runs = " ".join(line for line in lines if line.startswith("RUN "))
    assert 'pip install --index-url "${TORCH_INDEX_URL}" "${TORCH_SPEC}"' in runs
    assert "pip install ." in runs
    assert runs.index("TORCH_INDEX_URL") < runs.index("pip install .")  # CPU torch before the package
    assert any(line.startswith("WORKDIR /app") for line in lines)
    # Everything the image copies exists, and every package folder of pyproject.toml is copied.
    copied = set()
    for line in lines:
        if line.startswith("COPY "):
            sources = line.split()[1:-1]
            for source in sources:
                assert (REPO / source).exists(), f"Dockerfile copies missing {source}"
                copied.add(source.rstrip("/"))
    package_dirs = set(
        re.findall(r'"graphstore[.\w]*"\s*=\s*"([\w/]+)"', (REPO / "pyproject.toml").read_text())
    )
    assert {d.split("/")[0] for d in package_dirs} <= copied
    assert {"examples", "configs", "datasets", "pyproject.toml", "README.md"} <= copied


class ComposeOnLoopback:
    """Runs compose services as local processes: the mapping of names, ports and volumes."""

    def __init__(self, compose: dict, tmp: Path):
        self.services = compose["services"]
        self.data = tmp / "data"
        self.data.mkdir()
        self.tmp = tmp
        servers = [name for name in self.services if re.fullmatch(r"server-\d+", name)]
        ports = free_ports(len(servers) + 1)
        # (service, container port) -> loopback port
        self.ports = {
            (name, server_port(self.services[name])): port
            for name, port in zip(servers, ports[:-1], strict=True)
        }
        self.master_port = ports[-1]
        self.env = dict(os.environ)
        # `graphstore` and `python` resolve to this environment, as they do in the image.
        self.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self.env.get('PATH', '')}"
        self.env["PYTHONUNBUFFERED"] = "1"

    def rewrite(self, text: str, service: str) -> str:
        text = re.sub(r"(?<![\w./-])/data(?=/|\b)", str(self.data), text)
        text = re.sub(r"(?<![\w./-])/app/", f"{REPO}/", text)
        text = text.replace("0.0.0.0", "127.0.0.1")
        for (name, port), mapped in self.ports.items():
            if name == service:
                text = re.sub(rf"\blocalhost:{port}\b", f"127.0.0.1:{mapped}", text)
                text = text if text != str(port) else str(mapped)
        return text

    def argv(self, argv: list[str], service: str) -> list[str]:
        argv = [self.rewrite(word, service) for word in argv]
        if service == "trainer" and TRAIN_EXAMPLE in argv and not (REPO / TRAIN_EXAMPLE).exists():
            # Until the example exists, a short trainer of the tests runs in its place, through the same
            # initialize() path and with the same arguments.
            argv[argv.index(TRAIN_EXAMPLE)] = TRAINER_SCRIPT
        return argv

    def environment(self, service: str) -> dict[str, str]:
        env = dict(self.env)
        for key, value in (self.services[service].get("environment") or {}).items():
            value = str(value)
            if key == "GRAPHSTORE_CONFIG":
                value = str(self.cluster_config(Path(self.rewrite(value, service))))
            elif key == "MASTER_PORT":
                value = str(self.master_port)
            env[key] = self.rewrite(value, service)
        return env

    def cluster_config(self, path: Path) -> Path:
        """The trainer's cluster YAML with service names and ports as they are on loopback."""
        config = yaml.safe_load(path.read_text())
        for server in config["servers"]:
            server["port"] = self.ports[(server["host"], server["port"])]
            server["host"] = "127.0.0.1"
        config["part_config"] = self.rewrite(config["part_config"], "trainer")
        mapped = self.tmp / path.name
        mapped.write_text(yaml.safe_dump(config))
        return mapped

    def run(self, service: str, argv: list[str], timeout_s: float) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.argv(argv, service),
            env=self.environment(service),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )

    def start(self, service: str, log: Path) -> subprocess.Popen:
        with open(log, "w") as handle:
            return subprocess.Popen(
                self.argv(command_argv(self.services[service]["command"]), service),
                env=self.environment(service),
                cwd=REPO,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )


def test_compose_services_run_on_loopback(tmp_path):
    compose = load_compose()
    loop = ComposeOnLoopback(compose, tmp_path)
    services = compose["services"]
    running: dict[str, subprocess.Popen] = {}
    try:
        for name in start_order(services):
            service = services[name]
            if "healthcheck" in service:
                proc = loop.start(name, tmp_path / f"{name}.log")
                running[name] = proc
                check = healthcheck_argv(service["healthcheck"]["test"])
                deadline = time.monotonic() + 60
                while True:
                    result = loop.run(name, check, timeout_s=30)
                    if result.returncode == 0:
                        assert "SERVING" in result.stdout
                        break
                    assert proc.poll() is None, f"{name} exited: {(tmp_path / f'{name}.log').read_text()}"
                    assert time.monotonic() < deadline, (
                        f"{name} never healthy: {result.stdout}{result.stderr}"
                    )
                    time.sleep(0.2)
            else:
                result = loop.run(name, command_argv(service["command"]), timeout_s=240)
                assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"
                if name == "partition":
                    assert (loop.data / "cora" / "cora.json").is_file()
                    # A second run of the one-shot service (compose up again) keeps the existing data.
                    again = loop.run(name, command_argv(service["command"]), timeout_s=60)
                    assert again.returncode == 0
        # `docker compose down`: SIGTERM to each server, which exits 0.
        for name, proc in running.items():
            proc.terminate()
            assert proc.wait(timeout=30) == 0, (tmp_path / f"{name}.log").read_text()
    finally:
        for proc in running.values():
            end_process_group(proc)


@pytest.mark.parametrize("service", ["server-0", "server-1"])
def test_healthcheck_fails_when_server_is_down(tmp_path, service):
    compose = load_compose()
    loop = ComposeOnLoopback(compose, tmp_path)
    check = healthcheck_argv(compose["services"][service]["healthcheck"]["test"])
    result = loop.run(service, check + ["--timeout", "1"], timeout_s=30)
    assert result.returncode == 1 and "UNREACHABLE" in result.stdout
