"""docker-compose.yml and the Dockerfile, by what they do.

Without Docker: the compose file is loaded and resolved the way compose resolves it (the ``<<`` merge of
the shared blocks, ``${VAR:-default}`` variables) and its references checked (one service builds the one
image every service runs, dependencies and their conditions, volumes, build arguments the Dockerfile
takes, the servers' cluster config naming each server service where it listens); the image is built by
carrying out the Dockerfile's steps here (``tests/launcher/image.py``); then every service's command and
every health-check command runs on loopback in the order compose would run them: service names map to
127.0.0.1, each server's port to a free port, ``/data`` to a temporary folder and ``/app`` to the built
image's working directory.

With the docker command, ``docker compose config`` must agree with that resolution. Running the stack
under a Docker engine is ``tests/launcher/test_compose_docker.py`` (``make compose-test``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.launcher.helpers import REPO, end_process_group, free_ports
from tests.launcher.image import DOCKERFILE, LocalImage, build_local_image, instructions
from tests.utils.wait import wait_until

COMPOSE = REPO / "docker-compose.yml"
CONDITIONS = ("service_started", "service_healthy", "service_completed_successfully")
_VARIABLE = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")


def interpolate(value, env: dict[str, str]):
    """Compose's variable substitution (``${VAR}``, ``${VAR:-default}``) through a loaded document."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if isinstance(value, str):
        return _VARIABLE.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), value)
    return value


def load_compose(env: dict[str, str] | None = None) -> dict:
    """docker-compose.yml as compose resolves it with the variables of ``env`` (none set by default)."""
    return interpolate(yaml.safe_load(COMPOSE.read_text()), env or {})


def command_argv(command) -> list[str]:
    """A compose ``command`` (list, or string split like compose does) as an argument list."""
    return [str(word) for word in command] if isinstance(command, list) else shlex.split(command)


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


def image_workdir() -> str:
    """The final stage's working directory (where the services' ``/app`` paths point)."""
    return [rest for keyword, rest in instructions(DOCKERFILE.read_text()) if keyword == "WORKDIR"][-1]


def image_file(path: str) -> Path:
    """The checkout's copy of a file the image holds under its working directory (``/app/configs/...``)."""
    assert Path(path).is_relative_to(image_workdir()), f"{path} is outside the image's {image_workdir()}"
    return REPO / Path(path).relative_to(image_workdir())


def served_host(service: dict) -> tuple[str, str] | None:
    """``(config path, host)`` of a service running ``graphstore servers --config C --hostname H``."""
    argv = command_argv(service.get("command", []))
    if argv[:2] != ["graphstore", "servers"]:
        return None
    return argv[argv.index("--config") + 1], argv[argv.index("--hostname") + 1]


def dockerfile_args() -> set[str]:
    return {rest.split("=")[0] for keyword, rest in instructions(DOCKERFILE.read_text()) if keyword == "ARG"}


def test_compose_config_resolves():
    compose = load_compose()
    services = compose["services"]
    assert "$" not in json.dumps(compose), "every variable has a value or a default"
    declared_volumes = set(compose.get("volumes") or {})
    start_order(services)  # no cycle
    # One image, built once by one service, run by every service.
    builders = [name for name, service in services.items() if "build" in service]
    assert len(builders) == 1, f"services that build the image: {builders}"
    assert len({service["image"] for service in services.values()}) == 1
    build = services[builders[0]]["build"]
    assert (REPO / build["context"] / build.get("dockerfile", "Dockerfile")).is_file()
    unknown = set(build.get("args") or {}) - dockerfile_args()
    assert not unknown, f"build args the Dockerfile does not declare: {unknown}"
    assert {"BASE_IMAGE", "TORCH_INDEX_URL", "TORCH_SPEC"} <= set(build["args"])
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert source.startswith((".", "/")) or source in declared_volumes, f"{name}: volume {source}"
        for dependency, spec in (service.get("depends_on") or {}).items():
            assert dependency in services, f"{name} depends on a missing service {dependency}"
            condition = spec["condition"]
            assert condition in CONDITIONS, (name, condition)
            if condition == "service_healthy":
                assert "healthcheck" in services[dependency], f"{name} waits for {dependency} to be healthy"
            if condition == "service_completed_successfully":
                # A restarting one-shot service never completes: its dependants would never start; an
                # attached one ends `up --exit-code-from trainer` when it exits 0.
                assert services[dependency].get("restart", "no") == "no", dependency
                assert services[dependency].get("attach") is False, dependency
    # Every server a trainer's cluster config names is a service that runs that entry of the same file
    # (`graphstore servers --hostname HOST`), exposes its port and probes it.
    for name, service in services.items():
        env = service.get("environment") or {}
        if "GRAPHSTORE_CONFIG" not in env:
            continue
        cluster = yaml.safe_load(image_file(env["GRAPHSTORE_CONFIG"]).read_text())
        for server in cluster["servers"]:
            target = services[server["host"]]
            assert served_host(target) == (env["GRAPHSTORE_CONFIG"], server["host"])
            assert str(server["port"]) in map(str, target["expose"])
            assert f"localhost:{server['port']}" in healthcheck_argv(target["healthcheck"]["test"])
            assert server["host"] in service["depends_on"], f"{name} starts before {server['host']}"
        assert 0 <= int(env["RANK"]) < int(env["WORLD_SIZE"])


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> LocalImage:
    """The Dockerfile's steps carried out here (a missing COPY source or a failing RUN fails it)."""
    return build_local_image(tmp_path_factory.mktemp("image"))


def test_image_runs_its_default_command(image):
    result = image.run(image.cmd)
    assert result.returncode == 0 and "partition" in result.stdout and "server" in result.stdout


def _package_modules() -> list[str]:
    """Every module of the package, from pyproject.toml's package folders (what the checkout imports)."""
    package_dirs = re.findall(r'"(graphstore[\w.]*)"\s*=\s*"([\w/]+)"', (REPO / "pyproject.toml").read_text())
    assert package_dirs, "no package-dir mapping found in pyproject.toml"
    modules = set()
    for package, folder in package_dirs:
        for path in (REPO / folder).rglob("*.py"):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            modules.add(".".join((package, *parts)).removesuffix(".__init__"))
    return sorted(modules)


def test_image_package_holds_every_module(image):
    script = (
        "import importlib, sys\n"
        "missing = []\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError as exc:\n"
        "        missing.append(f'{name}: {exc}')\n"
        "print('\\n'.join(missing))\n"
    )
    result = image.run(["python", "-c", script, *_package_modules()], timeout_s=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "", f"modules the image's package cannot import:\n{result.stdout}"


class ComposeOnLoopback:
    """Runs compose services as local processes: the mapping of names, ports and volumes.

    ``graphstore`` and ``python`` are this checkout's (the image's own package is checked by
    ``test_image_package_holds_every_module``); everything else under ``/app`` is the built image's.
    """

    def __init__(self, compose: dict, tmp: Path, workdir: Path):
        self.services = compose["services"]
        self.workdir = workdir
        self.data = tmp / "data"
        self.data.mkdir()
        self.tmp = tmp
        self.config_path = next(
            env["GRAPHSTORE_CONFIG"]
            for env in (service.get("environment") or {} for service in self.services.values())
            if "GRAPHSTORE_CONFIG" in env
        )
        cluster = yaml.safe_load((workdir / Path(self.config_path).relative_to(image_workdir())).read_text())
        ports = free_ports(len(cluster["servers"]) + 1)
        # (service, container port) -> loopback port
        self.ports = {
            (s["host"], s["port"]): port for s, port in zip(cluster["servers"], ports, strict=False)
        }
        self.master_port = ports[-1]
        self.mapped_config = self.cluster_config(cluster)
        self.env = dict(os.environ)
        self.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self.env.get('PATH', '')}"
        self.env["PYTHONUNBUFFERED"] = "1"

    def rewrite(self, text: str, service: str) -> str:
        if text == self.config_path:
            return str(self.mapped_config)
        text = re.sub(r"(?<![\w./-])/data(?=/|\b)", str(self.data), text)
        text = re.sub(r"(?<![\w./-])/app/", f"{self.workdir}/", text)
        text = text.replace("0.0.0.0", "127.0.0.1")
        for (name, port), mapped in self.ports.items():
            if name == service:
                text = re.sub(rf"\blocalhost:{port}\b", f"127.0.0.1:{mapped}", text)
        return text

    def argv(self, argv: list[str], service: str) -> list[str]:
        return [self.rewrite(word, service) for word in argv]

    def environment(self, service: str) -> dict[str, str]:
        env = dict(self.env)
        for key, value in (self.services[service].get("environment") or {}).items():
            if key == "MASTER_PORT":
                env[key] = str(self.master_port)
            elif str(value) in self.services:  # another service's name (MASTER_ADDR=trainer)
                env[key] = "127.0.0.1"
            else:
                env[key] = self.rewrite(str(value), service)
        return env

    def cluster_config(self, cluster: dict) -> Path:
        """The services' cluster YAML as it is on loopback: each server at 127.0.0.1 on its own free
        port, still selected by its service name (``exec_host``); paths under ``/data`` mapped."""
        for server in cluster["servers"]:
            server["port"] = self.ports[(server["host"], server["port"])]
            server["exec_host"] = server["host"]
            server["host"] = server["bind_host"] = "127.0.0.1"
        cluster["part_config"] = self.rewrite(cluster["part_config"], "")
        if cluster.get("checkpoint", {}).get("path"):
            cluster["checkpoint"]["path"] = self.rewrite(cluster["checkpoint"]["path"], "")
        mapped = self.tmp / "cluster-on-loopback.yaml"
        mapped.write_text(yaml.safe_dump(cluster))
        return mapped

    def run(self, service: str, argv: list[str], timeout_s: float) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.argv(argv, service),
            env=self.environment(service),
            cwd=self.workdir,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )

    def start(self, service: str, log: Path) -> subprocess.Popen:
        with open(log, "w") as handle:
            return subprocess.Popen(
                self.argv(command_argv(self.services[service]["command"]), service),
                env=self.environment(service),
                cwd=self.workdir,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )


def test_compose_services_run_on_loopback(image, tmp_path):
    compose = load_compose()
    loop = ComposeOnLoopback(compose, tmp_path, image.workdir)
    services = compose["services"]
    running: dict[str, subprocess.Popen] = {}
    try:
        for name in start_order(services):
            service = services[name]
            if "healthcheck" in service:
                proc = loop.start(name, tmp_path / f"{name}.log")
                running[name] = proc
                check = healthcheck_argv(service["healthcheck"]["test"])
                result = wait_until(
                    lambda name=name, check=check: _healthy(loop.run(name, check, timeout_s=30)),
                    60,
                    f"{name} to be healthy",
                    alive=proc,
                    interval_s=0.2,
                )
                assert "SERVING" in result.stdout
            else:
                result = loop.run(name, command_argv(service["command"]), timeout_s=240)
                assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"
                if name == "partition":
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


def _healthy(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess | None:
    return result if result.returncode == 0 else None


@pytest.mark.parametrize("service", ["server-0", "server-1"])
def test_healthcheck_fails_when_server_is_down(tmp_path, service):
    compose = load_compose()
    loop = ComposeOnLoopback(compose, tmp_path, REPO)
    check = healthcheck_argv(compose["services"][service]["healthcheck"]["test"])
    result = loop.run(service, check + ["--timeout", "1"], timeout_s=30)
    assert result.returncode == 1 and "UNREACHABLE" in result.stdout


# ----- with Docker ---------------------------------------------------------------------------------


def _docker(*args: str, timeout_s: float = 30.0) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout_s, cwd=REPO)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return None


def _without_build_variables() -> dict[str, str]:
    variables = ("TORCH_INDEX_URL", "TORCH_SPEC", "BASE_IMAGE", "GRAPHSTORE_IMAGE")
    return {k: v for k, v in os.environ.items() if k not in variables}


def test_docker_compose_config_agrees_with_the_resolution():
    version = _docker("compose", "version")
    if version is None or version.returncode != 0:
        pytest.skip("needs the docker command with its compose plugin")
    result = subprocess.run(
        ["docker", "compose", "-f", str(COMPOSE), "config", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=_without_build_variables(),
    )
    assert result.returncode == 0, result.stderr
    resolved, ours = json.loads(result.stdout)["services"], load_compose()["services"]
    assert set(resolved) == set(ours)
    for name, service in ours.items():
        theirs = resolved[name]
        assert theirs["command"] == command_argv(service["command"]), name
        assert theirs["image"] == service["image"] and ("build" in theirs) == ("build" in service), name
        if "build" in service:
            assert theirs["build"]["args"] == service["build"]["args"], name
        assert theirs.get("attach", True) == service.get("attach", True), name
        assert {k: v["condition"] for k, v in (theirs.get("depends_on") or {}).items()} == {
            k: v["condition"] for k, v in (service.get("depends_on") or {}).items()
        }, name
        assert [f"{v['source']}:{v['target']}" for v in theirs["volumes"]] == service["volumes"], name
        assert (theirs.get("environment") or {}) == {
            k: str(v) for k, v in (service.get("environment") or {}).items()
        }
