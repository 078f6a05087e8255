"""Run every benchmark in ``bench/`` (``make bench``), merge their JSON into ``bench/out/results.json``
and plot each benchmark's figures into ``bench/out/results.png`` (``bench/out/`` is not tracked: the
figures of a run are its own; DGL's are measured beside graphstore's by ``make bench-dgl``).

Each ``bench/NAME.py`` prints one JSON object and accepts ``--out FILE``; it runs here with the small
arguments of :data:`SMALL_ARGS` (its own defaults otherwise), in a child process with a time limit. A
benchmark that fails or times out is recorded with its error and the tail of its output; the others
still run. The plot shows, per benchmark, its headline numbers: the numeric entries of a top-level
``figures`` (or ``summary``) object when it has one, else the numbers whose keys name a rate, a
time, a ratio or an accuracy.

    python bench/run_all.py                        # everything
    python bench/run_all.py --only loader,e2e      # some of them
    python bench/run_all.py --plot-only            # redraw the plot from the results file
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent

# Arguments that keep each benchmark to a few minutes on a 2-core machine.
SMALL_ARGS: dict[str, list[str]] = {
    "loader": ["--graphs", "200k"],
    "partition": ["--repeats", "1"],
    "optim": ["--repeats", "2"],
    "e2e": ["--num-nodes", "50000", "--cora-seeds", "0", "--epochs", "6", "--embedding-epochs", "3"],
    "durability": ["--seconds", "3"],
    "kill_soak": ["--kills", "3", "--interval-s", "2"],
    "replicas": ["--runs", "2"],
    "replica_throughput": ["--seconds", "3"],
}
DEFAULT_TIMEOUT_S = 1200.0
# Keys whose numbers are worth a bar in the plot.
HEADLINE = re.compile(
    r"(per_s|mb_s|mbps|gbps|ratio|speedup|acc|seconds|time|_ms$|_s$|rss|cut)",
    re.IGNORECASE,
)
MAX_BARS = 14


def is_benchmark(path: Path) -> bool:
    """Whether a ``bench/*.py`` is a benchmark script (it has a ``__main__`` block), not one of the
    helper modules the benchmarks import (``anchor``, ``common``)."""
    return 'if __name__ == "__main__":' in path.read_text()


def discover(only: set[str] | None) -> list[Path]:
    """The benchmark scripts (every ``bench/*.py`` with a ``__main__`` block but this one), sorted by name."""
    scripts = sorted(p for p in BENCH_DIR.glob("*.py") if p.name != Path(__file__).name and is_benchmark(p))
    if only:
        unknown = only - {p.stem for p in scripts}
        if unknown:
            raise ValueError(f"unknown benchmark(s) {sorted(unknown)}; have {[p.stem for p in scripts]}")
        scripts = [p for p in scripts if p.stem in only]
    return scripts


def last_json_object(text: str):
    """The last line of ``text`` that parses as a JSON object, else None."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def run_benchmark(script: Path, timeout_s: float) -> dict:
    """Run one benchmark; returns ``{"result": ..., "seconds": ...}`` or ``{"error": ..., ...}``."""
    args = SMALL_ARGS.get(script.stem, [])
    with tempfile.TemporaryDirectory(prefix=f"bench-{script.stem}-") as folder:
        out_file = Path(folder) / "out.json"
        command = [sys.executable, str(script), *args, "--out", str(out_file)]
        print(f"[bench] {script.stem}: {' '.join(command[1:])}", file=sys.stderr, flush=True)
        started = time.perf_counter()
        try:
            proc = subprocess.run(
                command,
                cwd=str(REPO),
                capture_output=True,
                text=True,
                timeout=timeout_s,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            tail = (exc.stderr or b"")[-2000:]
            return {
                "error": f"timed out after {timeout_s:.0f} s",
                "command": command,
                "stderr_tail": tail.decode() if isinstance(tail, bytes) else tail,
            }
        seconds = time.perf_counter() - started
        result = None
        if out_file.is_file():
            try:
                result = json.loads(out_file.read_text())
            except json.JSONDecodeError:
                result = None
        if result is None:
            result = last_json_object(proc.stdout)
        if proc.returncode != 0 or result is None:
            return {
                "error": f"exit code {proc.returncode}" if proc.returncode else "no JSON on stdout",
                "command": command,
                "seconds": seconds,
                "stderr_tail": proc.stderr[-2000:],
            }
        print(f"[bench] {script.stem}: done in {seconds:.0f} s", file=sys.stderr, flush=True)
        return {"result": result, "seconds": seconds, "command": command}


def machine_info() -> dict:
    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }
    try:
        with open("/proc/meminfo") as handle:
            total_kb = int(handle.readline().split()[1])
        info["memory_gb"] = round(total_kb / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    try:
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except ImportError:
        pass
    return info


def flatten_numbers(obj, prefix: str = "") -> list[tuple[str, float]]:
    """Every finite number in a JSON value, keyed by its path (``a.b[0].c``)."""
    out: list[tuple[str, float]] = []
    if isinstance(obj, bool):
        return out
    if isinstance(obj, (int, float)):
        if math.isfinite(obj):
            out.append((prefix, float(obj)))
        return out
    if isinstance(obj, dict):
        for key, value in obj.items():
            out.extend(flatten_numbers(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(obj, list) and len(obj) <= 16:
        for index, value in enumerate(obj):
            out.extend(flatten_numbers(value, f"{prefix}[{index}]"))
    return out


# Per benchmark: the panel's unit and the (label, JSON path) pairs it shows, figures of one unit that
# the benchmark measured in the same run (DGL's figures come from bench/dgl/side_by_side.py alone).
PANELS = {
    "server": (
        "MB/s",
        [
            ("pull 10k rows, 200k graph", "graphs[0].pull_10000.pull_MBps"),
            ("raw-bytes gRPC baseline, 200k", "graphs[0].pull_10000.raw_baseline_MBps"),
            ("pull 10k rows, 1M graph", "graphs[1].pull_10000.pull_MBps"),
            ("raw-bytes gRPC baseline, 1M", "graphs[1].pull_10000.raw_baseline_MBps"),
        ],
    ),
    "client": (
        "MB/s",
        [
            ("DistTensor read, 2 servers concurrent", "mb_per_s.concurrent"),
            ("same, one server after the other", "mb_per_s.sequential"),
            ("raw-bytes gRPC baseline", "mb_per_s.raw_1_server"),
            ("co-located partition 0 + remote 1", "mb_per_s.colocated_mixed"),
        ],
    ),
    "partition": (
        "seconds, 1M nodes into 4 parts",
        [
            ("METIS, end to end", "results[0].metis.end_to_end_s"),
            ("METIS + train/in-degree balance", "results[0].metis_balanced.end_to_end_s"),
            ("random", "results[0].random.end_to_end_s"),
        ],
    ),
    "loader": (
        "batches/s, 2-layer [25,10], batch 1024, 200k graph",
        [
            ("sequential", "results[0].two_layer.sequential_batches_per_s"),
            ("prefetch", "results[0].two_layer.prefetch_batches_per_s"),
        ],
    ),
    "optim": (
        "steps/s, 1024 ids x dim 64, 200k rows",
        [
            ("SparseAdagrad, 1 trainer", "results[0].steps_per_s"),
            ("SparseAdagrad, 1 trainer, no process group", "results[1].steps_per_s"),
            ("SparseAdagrad, 2 trainers (each)", "results[2].steps_per_s"),
        ],
    ),
    "e2e": (
        "test accuracy, Cora, mean of 3 seeds",
        [
            ("2 servers + 2 trainers", "figures.cora_distributed_test_acc_mean"),
            ("standalone", "figures.cora_standalone_test_acc_mean"),
        ],
    ),
}


def headline_figures(result, name: str = "") -> tuple[str, list[tuple[str, float]]]:
    """The unit and the (label, value) pairs to plot for one benchmark.

    Benchmarks named in :data:`PANELS` show their chosen figures; any other shows its ``figures`` /
    ``summary`` section, or else the numbers whose key looks like a rate or a time.
    """
    numbers = dict(flatten_numbers(result))
    if name in PANELS:
        unit, rows = PANELS[name]
        chosen = [(label, numbers[path]) for label, path in rows if path in numbers]
        if chosen:
            return unit, chosen
    if isinstance(result, dict):
        for key in ("figures", "summary"):
            if isinstance(result.get(key), dict):
                found = flatten_numbers(result[key])
                if found:
                    return "", found[:MAX_BARS]
    found = [(k, v) for k, v in numbers.items() if HEADLINE.search(k.rsplit(".", 1)[-1])]
    return "", found[:MAX_BARS]


def plot(results: dict, path: Path) -> None:
    """One horizontal bar chart per benchmark (log scale when the values span > 100x)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    benchmarks = results["benchmarks"]
    panels = [(name, *headline_figures(entry["result"], name)) for name, entry in benchmarks.items()]
    panels = [panel for panel in panels if panel[2]] or [("no results", "", [])]
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(11, 1.6 + 0.42 * sum(max(3, len(f)) for _, _, f in panels))
    )
    axes = [axes] if len(panels) == 1 else list(axes)
    for ax, (name, unit, figures) in zip(axes, panels, strict=True):
        ax.set_title(f"{name}: {unit}" if unit else name, loc="left", fontsize=11, fontweight="bold")
        if not figures:
            ax.axis("off")
            continue
        labels = [label if len(label) <= 60 else "…" + label[-59:] for label, _ in figures]
        values = [value for _, value in figures]
        bars = ax.barh(range(len(values)), values, color="#4C72B0")
        ax.set_yticks(range(len(values)), labels, fontsize=8)
        ax.invert_yaxis()
        positive = [v for v in values if v > 0]
        if positive and min(values) > 0 and max(positive) / min(positive) > 100:
            ax.set_xscale("log")
        for bar, value in zip(bars, values, strict=True):
            ax.text(
                bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {value:,.4g}", va="center", fontsize=7
            )
    meta = results["meta"]
    fig.suptitle(
        f"graphstore benchmarks, {meta['date']} ({meta.get('cpu_count')} CPUs, {meta.get('processor')})",
        y=0.998,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated benchmark names (default: all)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per benchmark")
    parser.add_argument("--results", default=str(BENCH_DIR / "out" / "results.json"))
    parser.add_argument("--plot", default=str(BENCH_DIR / "out" / "results.png"))
    parser.add_argument("--plot-only", action="store_true", help="redraw the plot from --results")
    parser.add_argument("--out", help="also write the merged JSON here")
    args = parser.parse_args(argv)
    results_path = Path(args.results)
    if args.plot_only:
        results = json.loads(results_path.read_text())
    else:
        only = {name.strip() for name in args.only.split(",") if name.strip()} if args.only else None
        results = {"meta": machine_info(), "benchmarks": {}}
        if only and results_path.is_file():
            # Keep the other benchmarks' latest results when re-running a few.
            previous = json.loads(results_path.read_text())
            results["benchmarks"].update(previous.get("benchmarks", {}))
        for script in discover(only):
            results["benchmarks"][script.stem] = run_benchmark(script, args.timeout)
        results_path.parent.mkdir(parents=True, exist_ok=True)
        results_path.write_text(json.dumps(results, indent=1))
        if args.out:
            Path(args.out).write_text(json.dumps(results, indent=1))
    ok = {name: entry for name, entry in results["benchmarks"].items() if "result" in entry}
    plot({"meta": results["meta"], "benchmarks": ok}, Path(args.plot))
    failed = sorted(set(results["benchmarks"]) - set(ok))
    summary = {
        "results": str(results_path),
        "plot": args.plot,
        "ok": sorted(ok),
        "failed": failed,
        "meta": results["meta"],
    }
    print(json.dumps(summary))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
