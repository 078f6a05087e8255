"""``make demo`` / ``make demo-large``: the whole pipeline on this machine, from a fresh clone.

    python -m graphstore.launcher.demo            # Cora: partition in 2 with METIS, 2 servers + 2 trainers
    python -m graphstore.launcher.demo --large    # a generated 1M-node graph, the same way

Steps: (large only: ``graphstore generate`` the graph, kept in ``demo_out/`` for the next run), ``graphstore
partition`` into 2 METIS partitions under ``demo_out/`` (overwritten every run), a cluster YAML from
``configs/demo-cora.yaml`` / ``configs/demo-large.yaml`` (moved to free ports when those are taken), then
``graphstore launch`` running ``examples/train_dist.py`` with ``configs/train-cora.yaml`` /
``configs/train-large.yaml``; the trainers print per-epoch loss, accuracy, time and throughput, and the
demo ends with a summary of validation and test accuracy. Exits with launch's exit code.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from graphstore.config import config_to_mapping, load_cluster_config
from graphstore.launcher.hosts import free_port, port_accepts_connections

CLI = [sys.executable, "-m", "graphstore.launcher.cli"]


@dataclass(frozen=True)
class DemoSpec:
    """One demo: the graph, its cluster YAML and its training settings.

    Attributes:
        graph_name: the graph's name.
        cluster_config: cluster YAML template, relative to the repository.
        train_config: training YAML of ``examples/train_dist.py``, relative to the repository.
        generate_args: ``graphstore generate`` arguments (None: the graph is a file of the repository).
        source: the input graph relative to the repository (when not generated).
    """

    graph_name: str
    cluster_config: str
    train_config: str
    generate_args: tuple[str, ...] | None = None
    source: str | None = None


CORA = DemoSpec("cora", "configs/demo-cora.yaml", "configs/train-cora.yaml", source="datasets/cora.npz")
LARGE = DemoSpec(
    "g1m",
    "configs/demo-large.yaml",
    "configs/train-large.yaml",
    generate_args=("--num-nodes", "1000000", "--avg-degree", "20", "--feat-dim", "100", "--seed", "0"),
)


def find_repo() -> Path:
    """The repository checkout (the current folder, else the one this module is installed from).

    Raises:
        FileNotFoundError: when neither has ``examples/train_dist.py``.
    """
    for candidate in (Path.cwd(), Path(__file__).resolve().parents[1]):
        if (candidate / "examples" / "train_dist.py").is_file():
            return candidate
    raise FileNotFoundError(
        "the demo runs from a graphstore checkout (examples/train_dist.py not found in "
        f"{Path.cwd()} or {Path(__file__).resolve().parents[1]})"
    )


def write_cluster_config(template: Path, part_config: Path, out: Path) -> Path:
    """The demo's cluster YAML: ``template`` with the freshly written partitions and free ports.

    Args:
        template: the cluster YAML to start from (read with the one cluster-config parser).
        part_config: the partition config the servers serve.
        out: where to write the result.

    Returns:
        ``out``.

    Raises:
        graphstore.errors.ConfigError: an invalid template (the message names the field).
    """
    config = load_cluster_config(template, check_files=False)
    taken: set[int] = set()
    servers = []
    for server in config.servers:
        port = server.port
        while port in taken or port_accepts_connections(server.host, port):
            port = free_port(server.bind_host)
        taken.add(port)
        servers.append(dataclasses.replace(server, port=port))
    config = dataclasses.replace(config, part_config=str(part_config.resolve()), servers=tuple(servers))
    out.write_text(yaml.safe_dump(config_to_mapping(config), sort_keys=False))
    return out


def run_step(title: str, command: list[str], cwd: Path) -> None:
    """Run one pipeline step, its output going straight to the terminal.

    Raises:
        SystemExit: with the step's exit code when it fails.
    """
    print(f"[demo] {title}", flush=True)
    code = subprocess.call(command, cwd=str(cwd))
    if code != 0:
        print(f"[demo] {title} failed with exit code {code}", flush=True)
        raise SystemExit(code)


def prepare_graph(spec: DemoSpec, repo: Path, out: Path) -> Path:
    """The input graph: the repository's file, or a generated one (reused when already generated)."""
    if spec.generate_args is None:
        path = repo / spec.source
        if not path.is_file():
            raise FileNotFoundError(f"demo graph {path} is missing from the checkout")
        return path
    path = out / f"{spec.graph_name}.npz"
    stamp = out / f"{spec.graph_name}.npz.args"
    if path.is_file() and stamp.is_file() and stamp.read_text() == " ".join(spec.generate_args):
        print(f"[demo] reusing the generated graph {path}", flush=True)
        return path
    run_step(
        f"generating {spec.graph_name} ({' '.join(spec.generate_args)})",
        [*CLI, "generate", *spec.generate_args, "--out", str(path), "--overwrite"],
        repo,
    )
    stamp.write_text(" ".join(spec.generate_args))
    return path


def run_demo(spec: DemoSpec, out: Path, extra_train_args: list[str]) -> int:
    """Partition, launch, train, report. Returns launch's exit code."""
    repo = find_repo()
    out = out if out.is_absolute() else repo / out
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    graph = prepare_graph(spec, repo, out)
    parts = out / spec.graph_name
    run_step(
        f"partitioning {graph.name} into 2 parts with METIS",
        [
            *CLI,
            "partition",
            "--graph",
            str(graph),
            "--name",
            spec.graph_name,
            "--num-parts",
            "2",
            "--method",
            "metis",
            "--out",
            str(parts),
            "--overwrite",
        ],
        repo,
    )
    part_config = parts / f"{spec.graph_name}.json"
    cluster = write_cluster_config(
        repo / spec.cluster_config, part_config, out / f"{spec.graph_name}-cluster.yaml"
    )
    metrics = out / f"{spec.graph_name}-metrics.json"
    if metrics.exists():
        metrics.unlink()
    trainer = [
        sys.executable,
        str(repo / "examples" / "train_dist.py"),
        "--graph-name",
        spec.graph_name,
        "--part-config",
        str(part_config),
        "--config",
        str(repo / spec.train_config),
        "--save-model",
        str(out / f"{spec.graph_name}-graphsage.pt"),
        "--metrics-json",
        str(metrics),
        *extra_train_args,
    ]
    print(f"[demo] launching 2 servers + 2 trainers ({cluster})", flush=True)
    code = subprocess.call([*CLI, "launch", "--config", str(cluster), "--", *trainer], cwd=str(repo))
    elapsed = time.perf_counter() - started
    if code != 0:
        print(f"[demo] graphstore launch failed with exit code {code} after {elapsed:.1f} s", flush=True)
        return code
    results = json.loads(metrics.read_text())
    epochs = results["epochs"]
    print("[demo] ---------------------------------------------------------------", flush=True)
    if len(epochs) <= 5:
        times = " / ".join(f"{e['epoch_time_s']:.2f}" for e in epochs) + " s"
    else:
        rest = statistics.median(e["epoch_time_s"] for e in epochs[1:])
        times = f"{epochs[0]['epoch_time_s']:.2f} s, then median {rest:.2f} s"
    last = epochs[-1]
    print(
        f"[demo] {spec.graph_name}: {len(epochs)} epochs on {results['world_size']} trainers; epoch times "
        f"{times} (the first one warms up); last epoch {last['batches_per_s']:.2f} batches/s per trainer, "
        f"{last['seeds_per_s']:,.0f} training nodes/s in all",
        flush=True,
    )
    print(f"[demo] validation accuracy: {results['val_acc']:.4f}", flush=True)
    print(f"[demo] test accuracy: {results['test_acc']:.4f}", flush=True)
    print(f"[demo] done in {elapsed:.1f} s; outputs in {out}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="the generated 1M-node graph instead of Cora")
    parser.add_argument("--out", default="demo_out", help="output folder (default: demo_out)")
    parser.add_argument(
        "train_args", nargs="*", help="extra train_dist.py flags after --, e.g. -- --epochs 3 --seed 1"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    return run_demo(LARGE if args.large else CORA, Path(args.out), list(args.train_args))


if __name__ == "__main__":
    sys.exit(main())
