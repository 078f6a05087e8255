"""End-to-end training figures (issue 8), printed as JSON: the examples under ``graphstore launch`` with
2 partition servers and 2 trainers on this machine, next to the baselines they must beat.

Sections (``--sections``, all by default):

- ``cora``: ``examples/train_dist.py`` with ``configs/train-cora.yaml`` on Cora (2 METIS partitions),
  distributed and standalone, one run of each per seed: test accuracy per run, the means, and the
  distributed - standalone difference in points.
- ``generated``: a ``graphstore generate`` graph (``--num-nodes``, average degree 20, 100-d features),
  2 METIS partitions stored as float32 and again as float16 (``--feat-dtype float16``), with
  ``configs/train-large.yaml``: GraphSAGE on float32 features (epoch time, batches/s, training nodes/s,
  test accuracy, feature bytes pulled per epoch), the features-only MLP trained the same way, and
  GraphSAGE on float16 features (accuracy and bytes next to float32).
- ``embedding``: ``examples/train_embedding.py`` on the same graph, learned embeddings (SparseAdagrad)
  vs the same model on frozen random embeddings.

    python bench/e2e.py                                     # 100k-node graph, Cora with 3 seeds
    python bench/e2e.py --num-nodes 1000000 --out e2e.json  # the 1M-node figures of the issue
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

from graphstore.launcher.hosts import free_ports

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "graphstore.launcher.cli"]
SECTIONS = ("cora", "generated", "embedding")
CLUSTER_VARIABLES = ("GRAPHSTORE_CONFIG", "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK")


def log(message: str) -> None:
    print(f"[e2e] {message}", file=sys.stderr, flush=True)


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLUSTER_VARIABLES}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run(command: list[str], log_path: Path, timeout_s: float) -> None:
    """Run a command with its output in ``log_path``.

    Raises:
        RuntimeError: a non-zero exit (with the output's tail).
    """
    with open(log_path, "w") as handle:
        code = subprocess.call(
            command,
            stdout=handle,
            stderr=subprocess.STDOUT,
            cwd=str(REPO),
            env=clean_env(),
            timeout=timeout_s,
        )
    if code != 0:
        tail = log_path.read_text()[-3000:]
        raise RuntimeError(f"{' '.join(command[:6])} ... exited {code}; log {log_path}:\n{tail}")


def partition(graph: Path, name: str, out: Path, feat_dtype: str, log_dir: Path) -> Path:
    config = out / f"{name}.json"
    if not config.is_file():
        command = [*CLI, "partition", "--graph", str(graph), "--name", name, "--num-parts", "2"]
        command += ["--method", "metis", "--out", str(out), "--overwrite", "--feat-dtype", feat_dtype]
        log(f"partitioning {graph.name} -> {out} ({feat_dtype})")
        run(command, log_dir / f"partition-{name}.log", 1800)
    return config


def train(
    script: str,
    graph_name: str,
    part_config: Path,
    args: list[str],
    workdir: Path,
    tag: str,
    distributed: bool,
    timeout_s: float,
) -> dict:
    """One run of an example; returns its metrics JSON."""
    metrics = workdir / f"{tag}.json"
    if metrics.exists():
        metrics.unlink()
    trainer = [sys.executable, str(REPO / "examples" / script), "--graph-name", graph_name]
    trainer += ["--part-config", str(part_config), *args, "--metrics-json", str(metrics), "--save-model", ""]
    if distributed:
        cluster = {
            "graph_name": graph_name,
            "part_config": str(part_config),
            "servers": [{"host": "127.0.0.1", "port": p, "part_id": k} for k, p in enumerate(free_ports(2))],
            "trainers_per_host": 2,
            "rpc": {"deadline_s": 120, "connect_timeout_s": 300},
        }
        cluster_path = workdir / f"{tag}-cluster.yaml"
        cluster_path.write_text(yaml.safe_dump(cluster, sort_keys=False))
        command = [*CLI, "launch", "--config", str(cluster_path), "--", *trainer]
    else:
        command = trainer
    log(f"{tag}: {'2 servers + 2 trainers' if distributed else 'standalone'}")
    started = time.perf_counter()
    run(command, workdir / f"{tag}.log", timeout_s)
    result = json.loads(metrics.read_text())
    result["wall_s"] = time.perf_counter() - started
    log(f"{tag}: test accuracy {result['test_acc']:.4f} in {result['wall_s']:.0f} s")
    return result


def throughput(result: dict) -> dict:
    """Per-epoch speed of a run, skipping the first epoch when there are more (warm-up)."""
    epochs = result["epochs"][1:] or result["epochs"]
    return {
        "epoch_time_s": statistics.median(e["epoch_time_s"] for e in epochs),
        "batches_per_s_per_trainer": statistics.median(e["batches_per_s"] for e in epochs),
        "train_nodes_per_s": statistics.median(e.get("seeds_per_s", 0.0) for e in epochs),
        "feature_bytes_per_epoch": result["epochs"][-1].get("feature_bytes"),
        "test_acc": result["test_acc"],
        "val_acc": result["val_acc"],
    }


def bench_cora(args, workdir: Path) -> dict:
    part_config = partition(REPO / "datasets" / "cora.npz", "cora", workdir / "cora", "float32", workdir)
    seeds = [int(s) for s in args.cora_seeds.split(",")]
    out: dict = {"seeds": seeds, "distributed_test_acc": [], "standalone_test_acc": []}
    common = ["--config", str(REPO / "configs" / "train-cora.yaml")]
    for seed in seeds:
        for mode in ("distributed", "standalone"):
            result = train(
                "train_dist.py",
                "cora",
                part_config,
                [*common, "--seed", str(seed)],
                workdir,
                f"cora-{mode}-{seed}",
                mode == "distributed",
                args.timeout,
            )
            out[f"{mode}_test_acc"].append(result["test_acc"])
    out["distributed_mean"] = statistics.mean(out["distributed_test_acc"])
    out["standalone_mean"] = statistics.mean(out["standalone_test_acc"])
    out["difference_points"] = 100 * (out["distributed_mean"] - out["standalone_mean"])
    return out


def generated_graph(args, workdir: Path) -> tuple[str, Path]:
    name = f"gen{args.num_nodes // 1000}k"
    graph = workdir / f"{name}.npz"
    if not graph.is_file():
        log(f"generating {graph}")
        command = [*CLI, "generate", "--num-nodes", str(args.num_nodes), "--avg-degree", "20"]
        command += ["--feat-dim", "100", "--seed", "0", "--out", str(graph), "--overwrite"]
        run(command, workdir / f"generate-{name}.log", 1800)
    return name, graph


def bench_generated(args, workdir: Path) -> dict:
    name, graph = generated_graph(args, workdir)
    f32 = partition(graph, name, workdir / f"{name}-float32", "float32", workdir)
    f16 = partition(graph, name, workdir / f"{name}-float16", "float16", workdir)
    common = ["--config", str(REPO / "configs" / "train-large.yaml"), "--epochs", str(args.epochs)]
    runs = {
        "graphsage_float32": train(
            "train_dist.py", name, f32, common, workdir, f"{name}-sage-f32", True, args.timeout
        ),
        "mlp_float32": train(
            "train_dist.py",
            name,
            f32,
            [*common, "--model", "mlp"],
            workdir,
            f"{name}-mlp-f32",
            True,
            args.timeout,
        ),
        "graphsage_float16": train(
            "train_dist.py", name, f16, common, workdir, f"{name}-sage-f16", True, args.timeout
        ),
    }
    out = {key: throughput(result) for key, result in runs.items()}
    out["graph"] = {"name": name, "num_nodes": args.num_nodes, "avg_degree": 20, "feat_dim": 100}
    out["gnn_minus_mlp_points"] = 100 * (
        out["graphsage_float32"]["test_acc"] - out["mlp_float32"]["test_acc"]
    )
    out["float16_minus_float32_points"] = 100 * (
        out["graphsage_float16"]["test_acc"] - out["graphsage_float32"]["test_acc"]
    )
    out["float16_feature_bytes_ratio"] = (
        out["graphsage_float16"]["feature_bytes_per_epoch"]
        / out["graphsage_float32"]["feature_bytes_per_epoch"]
    )
    return out


def bench_embedding(args, workdir: Path) -> dict:
    name, graph = generated_graph(args, workdir)
    f32 = partition(graph, name, workdir / f"{name}-float32", "float32", workdir)
    common = ["--config", str(REPO / "configs" / "train-large.yaml"), "--epochs", str(args.embedding_epochs)]
    common += ["--hidden", "128", "--emb-dim", str(args.emb_dim)]
    learned = train(
        "train_embedding.py", name, f32, common, workdir, f"{name}-emb-learned", True, args.timeout
    )
    frozen = train(
        "train_embedding.py",
        name,
        f32,
        [*common, "--freeze-embeddings"],
        workdir,
        f"{name}-emb-frozen",
        True,
        args.timeout,
    )
    return {
        "learned": throughput(learned),
        "frozen": throughput(frozen),
        "learned_minus_frozen_points": 100 * (learned["test_acc"] - frozen["test_acc"]),
    }


def figures(results: dict) -> dict:
    """The headline numbers (what ``bench/run_all.py`` plots)."""
    out = {}
    cora = results.get("cora")
    if cora:
        out["cora_distributed_test_acc_mean"] = cora["distributed_mean"]
        out["cora_standalone_test_acc_mean"] = cora["standalone_mean"]
    gen = results.get("generated")
    if gen:
        out["gnn_epoch_time_s"] = gen["graphsage_float32"]["epoch_time_s"]
        out["gnn_batches_per_s_per_trainer"] = gen["graphsage_float32"]["batches_per_s_per_trainer"]
        out["gnn_test_acc"] = gen["graphsage_float32"]["test_acc"]
        out["mlp_test_acc"] = gen["mlp_float32"]["test_acc"]
        out["gnn_float16_test_acc"] = gen["graphsage_float16"]["test_acc"]
        out["float16_feature_bytes_ratio"] = gen["float16_feature_bytes_ratio"]
    emb = results.get("embedding")
    if emb:
        out["embedding_learned_test_acc"] = emb["learned"]["test_acc"]
        out["embedding_frozen_test_acc"] = emb["frozen"]["test_acc"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated of {SECTIONS}")
    parser.add_argument("--cora-seeds", default="0,1,2")
    parser.add_argument("--num-nodes", type=int, default=100_000, help="nodes of the generated graph")
    parser.add_argument("--epochs", type=int, default=2, help="epochs of the generated-graph runs")
    parser.add_argument("--embedding-epochs", type=int, default=3)
    parser.add_argument("--emb-dim", type=int, default=64)
    parser.add_argument("--workdir", default="/tmp/graphstore-bench-e2e", help="graphs, partitions, logs")
    parser.add_argument("--fresh", action="store_true", help="delete the workdir first")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args(argv)
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {SECTIONS}")
    workdir = Path(args.workdir)
    if args.fresh and workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: dict = {"benchmark": "e2e", "trainers": 2, "servers": 2, "cpu_count": os.cpu_count()}
    runners = {"cora": bench_cora, "generated": bench_generated, "embedding": bench_embedding}
    for section in sections:
        results[section] = runners[section](args, workdir)
    results["figures"] = figures(results)
    results["seconds"] = time.perf_counter() - started
    text = json.dumps(results)
    print(text)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
