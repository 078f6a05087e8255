"""The Kubernetes manifests (``deploy/k8s``), rendered by ``kubectl kustomize``, against the cluster config
their pods read: names, ports, partition count, volumes, environment, Secrets.

No cluster runs here: each overlay is rendered and checked by what its pods would do. The servers'
command runs as ``graphstore servers --dry-run`` with the pod's name, so the test sees the exact
``graphstore server`` each pod starts.
"""

from __future__ import annotations

import os
import posixpath
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

from graphstore.config import config_to_mapping, parse_cluster_config
from graphstore.launcher.cli import build_parser
from tests.launcher.helpers import CLI, REPO

K8S = REPO / "deploy" / "k8s"
OVERLAYS = ("base", "overlays/tls", "overlays/pytorchjob", "overlays/replicas")

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="needs kubectl (kubectl kustomize)")


class Rendered:
    """One rendered overlay: its resources, and the cluster config its ConfigMap holds."""

    def __init__(self, overlay: str):
        result = subprocess.run(
            ["kubectl", "kustomize", str(K8S / overlay)], capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr
        self.resources = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
        (self.config_map,) = self.all("ConfigMap")
        self.cluster_text = self.config_map["data"]["cluster.yaml"]
        self.config = parse_cluster_config(yaml.safe_load(self.cluster_text), "/", check_files=False)

    def all(self, kind: str) -> list[dict]:
        return [r for r in self.resources if r["kind"] == kind]

    def one(self, kind: str, name: str) -> dict:
        (found,) = [r for r in self.all(kind) if r["metadata"]["name"] == name]
        return found


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request) -> Rendered:
    return Rendered(request.param)


def _container(pod_spec: dict, name: str) -> dict:
    (found,) = [c for c in pod_spec["containers"] if c["name"] == name]
    return found


def _mount_path(
    pod_spec: dict, container: dict, *, config_map: str = "", secret: str = "", claim: str = ""
) -> str:
    """Where ``container`` mounts the volume backed by that ConfigMap / Secret / claim."""
    for volume in pod_spec["volumes"]:
        backing = (
            volume.get("configMap", {}).get("name") == config_map
            if config_map
            else volume.get("secret", {}).get("secretName") == secret
            if secret
            else volume.get("persistentVolumeClaim", {}).get("claimName") == claim
        )
        if backing:
            (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
            return mount["mountPath"]
    raise AssertionError(f"no volume of {config_map or secret or claim} in the pod")


def _env(container: dict) -> dict[str, object]:
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container.get("env", [])}


def _config_path(rendered: Rendered, pod_spec: dict, container: dict) -> str:
    return posixpath.join(
        _mount_path(pod_spec, container, config_map=rendered.config_map["metadata"]["name"]), "cluster.yaml"
    )


def _pod_specs_talking_to_servers(rendered: Rendered) -> list[tuple[dict, dict]]:
    """``(pod spec, container)`` of the servers and of every trainer."""
    sts = rendered.one("StatefulSet", "server")["spec"]["template"]["spec"]
    pods = [(sts, _container(sts, "server"))]
    for job in rendered.all("Job"):
        if job["metadata"]["name"] == "trainer":
            spec = job["spec"]["template"]["spec"]
            pods.append((spec, _container(spec, "trainer")))
    for job in rendered.all("PyTorchJob"):
        for replica in job["spec"]["pytorchReplicaSpecs"].values():
            spec = replica["template"]["spec"]
            pods.append((spec, _container(spec, "pytorch")))
    return pods


def test_each_server_pod_runs_the_server_the_config_names_for_it(rendered, tmp_path):
    config, sts = rendered.config, rendered.one("StatefulSet", "server")
    service = rendered.one("Service", sts["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None", "stable pod names need a headless Service"
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert all(labels.get(k) == v for k, v in service["spec"]["selector"].items())
    assert sts["spec"]["replicas"] == len(config.all_servers)  # owners and read replicas
    pod = sts["spec"]["template"]["spec"]
    server = _container(pod, "server")
    (grpc_port,) = [p["containerPort"] for p in server["ports"] if p["name"] == "grpc"]
    argv = [*server["command"], *server["args"]]
    assert argv[:2] == ["graphstore", "servers"] and argv[argv.index("--config") + 1] == _config_path(
        rendered, pod, server
    )
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(rendered.cluster_text)
    pod_names = {f"{sts['metadata']['name']}-{k}" for k in range(sts["spec"]["replicas"])}
    for spec in config.all_servers:
        pod_name = spec.host.split(".")[0]
        # Trainers dial POD.SERVICE, the name the headless Service gives pod POD.
        assert pod_name in pod_names and spec.port == grpc_port
        assert spec.host == f"{pod_name}.{service['metadata']['name']}"
        assert service["spec"]["ports"][0]["port"] == spec.port
        pod_argv = [pod_name if word == "$(POD_NAME)" else word for word in argv[2:]]
        pod_argv[pod_argv.index("--config") + 1] = str(cluster)
        dry = subprocess.run(
            [*CLI, "servers", *pod_argv, "--dry-run"], capture_output=True, text=True, timeout=60
        )
        assert dry.returncode == 0, dry.stderr
        (line,) = dry.stdout.splitlines()
        started = shlex.split(line)
        assert started[started.index("--part-id") + 1] == str(spec.part_id)
        assert started[started.index("--port") + 1] == str(grpc_port)
        assert started[started.index("--host") + 1] == "0.0.0.0"
        if spec.is_read_replica:  # no writable state: nothing to restore or checkpoint
            assert "--read-replica" in started and "--checkpoint-dir" not in started
        else:
            assert "--restore-latest" in started and "--checkpoint-dir" in started
    assert _env(server)["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    for probe in (server["readinessProbe"], server["livenessProbe"]):
        if "grpc" in probe:
            assert probe["grpc"]["port"] == grpc_port and config.tls is None
        else:  # `graphstore status --probe`, which speaks TLS with the config's CA and server name
            command = probe["exec"]["command"]
            assert (
                command[0] == "graphstore"
                and command[command.index("--probe") + 1] == f"127.0.0.1:{grpc_port}"
            )
            assert command[command.index("--config") + 1] == _config_path(rendered, pod, server)
            build_parser(only="status").parse_args(command[1:])


def test_partitions_land_where_the_servers_read_them(rendered):
    config = rendered.config
    job = rendered.one("Job", "graphstore-partition")["spec"]["template"]["spec"]
    partition = _container(job, "partition")
    claim = job["volumes"][0]["persistentVolumeClaim"]["claimName"]
    assert rendered.one("PersistentVolumeClaim", claim)
    data = _mount_path(job, partition, claim=claim)
    command = shlex.split(partition["args"][0].split(" else ")[1].split("; fi")[0])
    assert command[:2] == ["graphstore", "partition"]
    assert command[command.index("--out") + 1] == posixpath.dirname(config.part_config)
    assert command[command.index("--num-parts") + 1] == str(config.num_parts)
    assert command[command.index("--name") + 1] == config.graph_name
    assert (REPO / posixpath.relpath(command[command.index("--graph") + 1], "/app")).is_file()
    assert f"test -f {config.part_config}" in partition["args"][0], "a second run keeps the partitions"
    sts = rendered.one("StatefulSet", "server")["spec"]["template"]["spec"]
    assert _mount_path(sts, _container(sts, "server"), claim=claim) == data
    (wait,) = sts["initContainers"]
    assert _mount_path(sts, wait, claim=claim) == data and f"test -f {config.part_config}" in wait["args"][0]
    assert config.part_config.startswith(data + "/") and config.checkpoint.path.startswith(data + "/")


def test_trainers_run_torchrun_against_the_same_cluster_config(rendered):
    config = rendered.config
    for pod, container in _pod_specs_talking_to_servers(rendered)[1:]:
        assert _env(container)["GRAPHSTORE_CONFIG"] == _config_path(rendered, pod, container)
        argv = [*container["command"], *container["args"]]
        assert argv[0] == "torchrun"
        script = next(word for word in argv if word.endswith(".py"))
        assert (REPO / script).is_file()
        assert f"--graph-name={config.graph_name}" in argv
    for job in rendered.all("Job"):
        if job["metadata"]["name"] != "trainer":
            continue
        spec = job["spec"]
        assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"]
        pod = spec["template"]["spec"]
        args = dict(
            word.split("=", 1) for word in _container(pod, "trainer")["args"] if word.startswith("--")
        )
        assert int(args["--nnodes"]) == spec["completions"]
        service = rendered.one("Service", pod["subdomain"])
        assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"]
        assert service["spec"]["selector"] == {"job-name": job["metadata"]["name"]}
        host, port = args["--rdzv-endpoint"].rsplit(":", 1)
        assert host == f"{job['metadata']['name']}-0.{pod['subdomain']}"  # index 0's pod
        assert int(port) == service["spec"]["ports"][0]["port"]


def test_token_and_tls_come_from_secrets_mounted_where_the_config_says(rendered):
    config = rendered.config
    for pod, container in _pod_specs_talking_to_servers(rendered):
        assert _env(container)["GRAPHSTORE_TOKEN"] == {
            "secretKeyRef": {"name": "graphstore-token", "key": "token"}
        }, container["name"]
        if config.tls is None:
            continue
        mount = _mount_path(pod, container, secret="graphstore-tls")
        for path, key in (
            (config.tls.ca, "ca.crt"),
            (config.tls.cert, "tls.crt"),
            (config.tls.key, "tls.key"),
        ):
            assert path == posixpath.join(mount, key)
    if config.tls is not None:
        # The tls component's config is the base's plus its tls section, nothing else.
        base = config_to_mapping(Rendered("base").config)
        assert {k: v for k, v in config_to_mapping(config).items() if k != "tls"} == {
            k: v for k, v in base.items() if k != "tls"
        }


def test_every_pod_uses_the_image_and_the_generated_config_map(rendered):
    name = rendered.config_map["metadata"]["name"]
    assert name.startswith("graphstore-cluster-"), "the generated name carries the content hash"
    images = set()
    for resource in rendered.resources:
        text = yaml.safe_dump(resource)
        images.update(line.split("image:")[1].strip() for line in text.splitlines() if "image:" in line)
        assert "name: graphstore-cluster\n" not in text, f"{resource['kind']} misses the generated name"
    assert images == {"graphstore:latest"}


def test_dry_run_needs_no_cluster_files(tmp_path):
    """The servers' dry run above reads a config whose TLS files exist only in the pod."""
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(Rendered("overlays/tls").cluster_text)
    env = {k: v for k, v in os.environ.items() if k != "SLURMD_NODENAME"}
    dry = subprocess.run(
        [*CLI, "servers", "--config", str(cluster), "--hostname", "server-1", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert dry.returncode == 0, dry.stderr
    assert "--tls-cert /etc/graphstore-tls/tls.crt" in dry.stdout and sys.executable in dry.stdout
