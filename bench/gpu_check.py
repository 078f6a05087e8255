"""Every GPU check in one prepared run, for a machine lent with a GPU for a few minutes: the ``gpu`` tests,
GraphSAGE accuracy on Cora on the CPU and on the GPU (fp32, bf16, fp16 AMP; CPU- and GPU-sampled), the
loader benchmark on a generated 1M-node graph (``bench/gpu_loader.py``: batches/s, epoch time, GPU busy
share, stage profile; CPU path vs the graph held for the GPU; fp32 vs bf16), and 2 servers + 2 trainers
sharing the GPU under ``graphstore launch`` with the remote feature cache. Every log, each step's result
file and a ``summary.json`` go into one archive, ``OUT/gpu-check.tar.gz`` (``summary.json`` also beside
it), within ``--budget-s`` (steps that would not fit are skipped and say so).

    make gpu-wheels        # here, beforehand: the wheels the GPU machine's Python lacks, into .whl/
    make gpu-check         # on the GPU machine: installs them and the project, then this script
    make gpu-check-dry     # the same steps on the CPU with small graphs (a test runs it in make test)

``--dry`` runs every step on the CPU: the GPU's variants become their CPU counterparts (``placement
device`` on the CPU, fp32 only), the big graph has ``--dry-nodes`` nodes, one seed per variant.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from common import GpuBusy

REPO = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "graphstore.launcher.cli"]


@dataclass
class Plan:
    """What one run does: the GPU run's settings, or the dry run's."""

    device: str
    placements: tuple[str, ...]  # GPU-fed variants (the CPU path "none" is always measured too)
    amps: tuple[str, ...]
    seeds: tuple[int, ...]
    big_nodes: int
    bench_epochs: int
    profile_batches: int
    launch_epochs: int
    parallel: int
    launch_variants: tuple[tuple[str, str], ...]  # (placement, amp)
    cache_fraction: float = 0.2
    cora_flags: tuple[str, ...] = ()


GPU_PLAN = Plan(
    device="cuda:0",
    placements=("pinned", "device"),
    amps=("none", "bf16", "fp16"),
    seeds=(0, 1, 2),
    big_nodes=1_000_000,
    bench_epochs=3,
    profile_batches=20,
    launch_epochs=2,
    parallel=5,
    launch_variants=(("none", "none"), ("pinned", "none"), ("pinned", "bf16")),
)


def dry_plan(nodes: int) -> Plan:
    return Plan(
        device="cpu",
        placements=("device",),
        amps=("none",),
        seeds=(0,),
        big_nodes=nodes,
        bench_epochs=1,
        profile_batches=2,
        launch_epochs=1,
        parallel=2,
        launch_variants=(("device", "none"),),
        cora_flags=("--epochs", "10", "--eval-every", "0"),
    )


class Runner:
    """Runs the steps' commands with logs, timeouts and the run's time budget."""

    def __init__(self, workdir: Path, budget_s: float):
        self.workdir = workdir
        self.logs = workdir / "logs"
        self.results = workdir / "results"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.results.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        self.budget_s = budget_s
        self.steps: dict[str, dict] = {}

    def left_s(self) -> float:
        return self.budget_s - (time.monotonic() - self.started)

    def start(self, name: str, cmd: list[str], env: dict | None = None) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "w")  # noqa: SIM115 - closed when the process is waited for
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            start_new_session=True,
        )
        proc.log = log  # type: ignore[attr-defined]
        proc.step_name = name  # type: ignore[attr-defined]
        proc.step_started = time.monotonic()  # type: ignore[attr-defined]
        return proc

    def wait(self, proc: subprocess.Popen, timeout_s: float) -> int:
        limit = max(1.0, min(timeout_s, self.left_s()))
        try:
            rc = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = 124
        proc.log.close()  # type: ignore[attr-defined]
        self.steps[proc.step_name] = {  # type: ignore[attr-defined]
            "rc": rc,
            "seconds": round(time.monotonic() - proc.step_started, 2),  # type: ignore[attr-defined]
        }
        return rc

    def run(self, name: str, cmd: list[str], timeout_s: float, env: dict | None = None) -> int:
        if self.left_s() < 5:
            self.steps[name] = {"rc": None, "skipped": "out of time"}
            return -1
        return self.wait(self.start(name, cmd, env), timeout_s)

    def run_many(self, jobs: list[tuple[str, list[str]]], parallel: int, timeout_s: float) -> None:
        pending = list(jobs)
        running: list[subprocess.Popen] = []
        while pending or running:
            while pending and len(running) < parallel and self.left_s() > 5:
                name, cmd = pending.pop(0)
                running.append(self.start(name, cmd))
            if not running:
                for name, _ in pending:
                    self.steps[name] = {"rc": None, "skipped": "out of time"}
                return
            proc = running.pop(0)
            self.wait(proc, timeout_s)


def environment(plan: Plan) -> dict:
    import torch

    info = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "cpus": os.cpu_count(),
        "device": plan.device,
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
        info["nccl"] = torch.distributed.is_nccl_available()
    for module in ("grpc", "google.protobuf", "numpy"):
        try:
            info[module] = __import__(module, fromlist=["__version__"]).__version__
        except ImportError as exc:
            info[module] = f"missing: {exc}"
    return info


def prepare_graphs(runner: Runner, plan: Plan) -> tuple[subprocess.Popen, Path, Path]:
    """Cora in 2 parts now; the big graph generated and partitioned in the background."""
    data = runner.workdir / "data"
    cora = data / "cora"
    runner.run(
        "partition_cora",
        [*CLI, "partition", "--graph", "datasets/cora.npz", "--name", "cora", "--num-parts", "2"]
        + ["--balance-ntypes", "train_mask", "--out", str(cora), "--overwrite"],
        120,
    )
    big = data / "big"
    script = (
        f"{' '.join(CLI)} generate --num-nodes {plan.big_nodes} --avg-degree 20 --feat-dim 100 "
        f"--num-classes 16 --seed 0 --out {data}/big.npz --overwrite && "
        f"{' '.join(CLI)} partition --graph {data}/big.npz --name big --num-parts 2 "
        f"--balance-ntypes train_mask --out {big} --overwrite"
    )
    proc = runner.start("big_graph", ["bash", "-c", script])
    return proc, cora / "cora.json", big / "big.json"


def start_gpu_tests(runner: Runner) -> subprocess.Popen:
    """The ``gpu`` tests, in the background (they share the GPU with the Cora runs, not with timings)."""
    junit = runner.results / "gpu_tests.xml"
    return runner.start(
        "gpu_tests",
        [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-rs", "-p", "no:cacheprovider", "tests"]
        + [f"--junitxml={junit}"],
    )


def junit_counts(path: Path) -> dict:
    """Passed / failed / errors / skipped and the failing tests of a junit XML file."""
    import xml.etree.ElementTree as ElementTree

    if not path.exists():
        return {"error": "no junit file"}
    root = ElementTree.parse(path).getroot()
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "failing": []}
    for case in root.iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None:
            counts["failed"] += 1
            counts["failing"].append(name)
        elif case.find("error") is not None:
            counts["errors"] += 1
            counts["failing"].append(name)
        elif case.find("skipped") is not None:
            counts["skipped"] += 1
        else:
            counts["passed"] += 1
    return counts


def cora_accuracy(runner: Runner, plan: Plan, cora_config: Path) -> dict:
    """Test accuracy of GraphSAGE on Cora per variant and seed (CPU, then the GPU's variants)."""
    variants = {"cpu": ["--device", "cpu"]}
    if plan.device != "cpu":
        variants["gpu-cpu-sampled/fp32"] = ["--device", plan.device, "--placement", "none"]
    for placement in plan.placements:
        # every AMP type with the graph in pinned memory (UVA); fp32 with it in GPU memory
        for amp in plan.amps if placement == plan.placements[0] else plan.amps[:1]:
            label = {"none": "fp32"}.get(amp, amp)
            variants[f"gpu-{placement}/{label}"] = [
                "--device",
                plan.device,
                "--placement",
                placement,
                "--amp",
                amp,
            ]
    jobs, outputs = [], {}
    for variant, flags in variants.items():
        full = variant in ("cpu", "gpu-cpu-sampled/fp32", f"gpu-{plan.placements[0]}/fp32")
        seeds = plan.seeds if full else plan.seeds[:2]
        for seed in seeds:
            name = f"cora_{variant.replace('/', '_')}_seed{seed}"
            metrics = runner.results / f"{name}.json"
            outputs.setdefault(variant, []).append(metrics)
            jobs.append(
                (
                    name,
                    [sys.executable, "examples/train_dist.py", "--config", "configs/train-cora.yaml"]
                    + ["--graph-name", "cora", "--part-config", str(cora_config), "--seed", str(seed)]
                    + ["--save-model", "", "--metrics-json", str(metrics), "--progress", "off", *flags]
                    + list(plan.cora_flags),
                )
            )
    runner.run_many(jobs, plan.parallel, 240)
    table = {}
    for variant, files in outputs.items():
        accuracies = [_test_accuracy(f) for f in files]
        accuracies = [a for a in accuracies if a is not None]
        table[variant] = {
            "test_acc": accuracies,
            "mean": statistics.mean(accuracies) if accuracies else None,
        }
    cpu_mean = table["cpu"]["mean"]
    for row in table.values():
        row["vs_cpu_points"] = (
            None if row["mean"] is None or cpu_mean is None else round(100 * (row["mean"] - cpu_mean), 2)
        )
    return table


def _test_accuracy(path: Path) -> float | None:
    if not path.exists():
        return None
    results = json.loads(path.read_text())
    for key in ("test_acc", "test_accuracy"):
        if key in results:
            return float(results[key])
    final = results.get("final", {})
    return float(final["test"]) if "test" in final else None


def loader_bench(runner: Runner, plan: Plan, big_config: Path) -> dict:
    out = runner.results / "gpu_loader.json"
    amps = "none,bf16" if plan.device != "cpu" else "none"
    runner.run(
        "loader_bench",
        [sys.executable, "bench/gpu_loader.py", "--part-config", str(big_config), "--device", plan.device]
        + ["--variants", ",".join(("none", *plan.placements)), "--amp", amps]
        + ["--epochs", str(plan.bench_epochs), "--profile-batches", str(plan.profile_batches)]
        + ["--out", str(out)],
        300,
    )
    if not out.exists():
        return {"error": "no results (see logs/loader_bench.log)"}
    report = json.loads(out.read_text())
    return {
        "device": report.get("device"),
        "ratios": report.get("ratios"),
        "variants": [
            {
                key: v.get(key)
                for key in ("placement", "amp", "batches_per_s", "epoch_s", "gpu_busy_share", "held_bytes")
            }
            | {"profile_ms": v.get("profile")}
            for v in report.get("variants", [])
        ],
    }


def launch_runs(runner: Runner, plan: Plan, big_config: Path) -> dict:
    """2 servers + 2 trainers on one device under ``graphstore launch``, per (placement, amp)."""
    from graphstore.launcher.hosts import free_ports

    out = {}
    for placement, amp in plan.launch_variants:
        ports = free_ports(2)
        cluster = runner.workdir / f"cluster-{placement}-{amp}.yaml"
        cluster.write_text(
            "graph_name: big\n"
            f"part_config: {big_config}\n"
            "servers:\n"
            f"  - {{host: 127.0.0.1, port: {ports[0]}, part_id: 0}}\n"
            f"  - {{host: 127.0.0.1, port: {ports[1]}, part_id: 1}}\n"
            "trainers_per_host: 2\n"
            "rpc: {deadline_s: 60, connect_timeout_s: 120, max_retries: 5}\n"
            "local_read: auto\n"
        )
        name = f"launch_{placement}_{amp}"
        metrics = runner.results / f"{name}.json"
        cmd = [*CLI, "launch", "--config", str(cluster), "--num-trainers", "2", "--"]
        cmd += [sys.executable, "examples/train_dist.py", "--config", "configs/train-large.yaml"]
        cmd += ["--graph-name", "big", "--device", plan.device, "--dist-backend", "gloo"]
        cmd += ["--placement", placement, "--amp", amp, "--epochs", str(plan.launch_epochs)]
        cmd += ["--cache-remote-features", str(plan.cache_fraction), "--eval-max-nodes", "5000"]
        cmd += ["--save-model", "", "--metrics-json", str(metrics), "--progress", "off"]
        with GpuBusy(plan.device, 0.02) as busy:
            rc = runner.run(name, cmd, 240)
        row = {"rc": rc, "gpu_busy_share": busy.share()}
        if metrics.exists():
            results = json.loads(metrics.read_text())
            epochs = results.get("epochs", [])
            row.update(
                {
                    "test_acc": _test_accuracy(metrics),
                    "epoch_s": [e.get("epoch_time_s") for e in epochs],
                    "batches_per_s_per_trainer": [e.get("batches_per_s") for e in epochs],
                    "feature_cache": results.get("feature_cache"),
                }
            )
        out[f"{placement}/{amp}"] = row
    return out


def pack(runner: Runner, out_dir: Path, summary: dict) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    text = json.dumps(summary, indent=2, default=str)
    (runner.workdir / "summary.json").write_text(text)
    (out_dir / "summary.json").write_text(text)
    archive = out_dir / "gpu-check.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for folder in (runner.logs, runner.results):
            tar.add(folder, arcname=folder.name)
        tar.add(runner.workdir / "summary.json", arcname="summary.json")
    return archive


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out", default=os.environ.get("OUT") or "gpu-check-out", help="where the archive goes"
    )
    parser.add_argument("--workdir", default="/tmp/gpu-check", help="graphs, logs and results")
    parser.add_argument("--dry", action="store_true", help="every step on the CPU with small graphs")
    parser.add_argument("--dry-nodes", type=int, default=20_000, help="the dry run's big graph")
    parser.add_argument("--budget-s", type=float, default=540.0, help="the whole run's time budget")
    parser.add_argument(
        "--steps", default="tests,cora,bench,launch", help="comma-separated: tests, cora, bench, launch"
    )
    args = parser.parse_args(argv)
    plan = dry_plan(args.dry_nodes) if args.dry else GPU_PLAN
    steps = set(args.steps.split(","))
    runner = Runner(Path(args.workdir), args.budget_s)
    summary: dict = {"mode": "dry" if args.dry else "gpu", "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    summary["environment"] = environment(plan)
    runner.run("nvidia_smi", ["bash", "-c", "nvidia-smi || true"], 30)
    big_proc, cora_config, big_config = prepare_graphs(runner, plan)
    tests = start_gpu_tests(runner) if "tests" in steps else None
    if "cora" in steps:
        summary["cora"] = cora_accuracy(runner, plan, cora_config)
    if tests is not None:
        runner.wait(tests, 300)
        summary["gpu_tests"] = junit_counts(runner.results / "gpu_tests.xml")
    runner.wait(big_proc, 400)
    if "bench" in steps:
        summary["loader_bench"] = loader_bench(runner, plan, big_config)
    if "launch" in steps:
        summary["launch"] = launch_runs(runner, plan, big_config)
    summary["steps"] = runner.steps
    summary["seconds"] = round(time.monotonic() - runner.started, 1)
    archive = pack(runner, Path(args.out), summary)
    failed = [name for name, step in runner.steps.items() if step.get("rc") not in (0,)]
    print(json.dumps({"archive": str(archive), "seconds": summary["seconds"], "not_ok": failed}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
