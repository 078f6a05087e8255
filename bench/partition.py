"""Benchmark ``partition_graph`` on the shared benchmark graph: time, peak memory and edge cut.

For each partition count it runs, each in a fresh child process (so peak RSS is that run's own):
METIS without balance constraints, METIS balancing training nodes and in-edges (what DGL's
``partition_graph`` balances by default), and random assignment. It reports METIS-alone time,
end-to-end time with files written (wall clock, and CPU time, which other jobs on the machine do not
inflate), peak RSS, edge cut, and the METIS / random cut ratio measured in the same run. DGL's
partitioner is measured beside graphstore's by ``make bench-dgl`` (``bench/dgl/side_by_side.py``).

    python bench/partition.py                              # 200k-node graph, 2 and 4 parts, 3 repeats
    python bench/partition.py --num-nodes 1000000 --repeats 1 --out bench/results/partition.json

The graph comes from ``../shared/bench/anchor_graph.py`` (cached in ``--cache-dir``) or ``--graph``.
Prints one json object on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from anchor import make_anchor_graph
from common import emit_report

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

VARIANTS = {
    "metis": {"part_method": "metis"},
    "metis_balanced": {"part_method": "metis", "balance_ntypes": "train_mask", "balance_edges": True},
    "random": {"part_method": "random"},
}


def run_child(graph_path: str, num_parts: int, variant: str, work_dir: str) -> dict:
    """One end-to-end partition run in this process (called in a fresh child)."""
    from graphstore.partition import partition_graph

    out = os.path.join(work_dir, f"{variant}-{num_parts}")
    cpu_start = time.process_time()
    start = time.perf_counter()
    result = partition_graph(graph_path, "bench", num_parts, out, overwrite=True, **VARIANTS[variant])
    end_to_end = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    shutil.rmtree(out, ignore_errors=True)
    return {
        "variant": variant,
        "num_parts": num_parts,
        "end_to_end_s": end_to_end,
        "end_to_end_cpu_s": cpu,
        "metis_s": result.timings.get("metis", 0.0),
        "symmetrize_s": result.timings.get("symmetrize", 0.0),
        "timings": result.timings,
        # the partitioner's own figure: it resets the kernel's peak mark per phase, so ru_maxrss
        # afterwards covers only its last phase
        "peak_rss_gb": result.peak_rss_bytes / 2**30,
        "phase_peak_rss_gb": {k: round(v / 2**30, 3) for k, v in result.phase_peak_rss_bytes.items()},
        "edge_cut": result.edge_cut,
        "part_nodes": result.part_nodes,
        "part_edges": result.part_edges,
        "part_train_nodes": result.part_train_nodes,
    }


def spawn(graph_path: str, num_parts: int, variant: str, work_dir: str) -> dict:
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        graph_path,
        str(num_parts),
        variant,
        work_dir,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, check=False)
    if proc.returncode != 0:
        raise RuntimeError(
            f"child {variant}/{num_parts} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ensure_graph(args: argparse.Namespace) -> str:
    if args.graph:
        if not os.path.isfile(args.graph):
            raise FileNotFoundError(f"--graph {args.graph!r} not found")
        return args.graph
    os.makedirs(args.cache_dir, exist_ok=True)
    path = os.path.join(args.cache_dir, f"anchor_{args.num_nodes}.npz")
    make_anchor_graph(path, args.num_nodes)
    return path


def median_of(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graph", default=None, help="input .npz (default: the anchor graph of --num-nodes)")
    parser.add_argument("--num-nodes", type=int, default=200_000, help="anchor graph size (default 200000)")
    parser.add_argument("--parts", default="2,4", help="comma-separated partition counts (default 2,4)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per configuration; medians reported")
    parser.add_argument("--cache-dir", default=os.path.join(tempfile.gettempdir(), "graphstore-bench"))
    parser.add_argument("--out", default=None, help="also write the json here")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        graph_path, num_parts, variant, work_dir = args.child
        print(json.dumps(run_child(graph_path, int(num_parts), variant, work_dir)))
        return 0
    if args.repeats < 1:
        raise SystemExit(f"--repeats must be >= 1, got {args.repeats}")

    graph_path = ensure_graph(args)
    load_before = os.getloadavg()
    parts_list = [int(p) for p in args.parts.split(",")]
    results = []
    with tempfile.TemporaryDirectory(
        prefix="gs-bench-partition-", dir=args.cache_dir if not args.graph else None
    ) as work:
        for num_parts in parts_list:
            row: dict = {"num_parts": num_parts}
            for variant in VARIANTS:
                runs = [spawn(graph_path, num_parts, variant, work) for _ in range(args.repeats)]
                row[variant] = {
                    "end_to_end_s": round(median_of(runs, "end_to_end_s"), 2),
                    # single-threaded, so CPU time is what the wall time would be on an idle machine
                    "end_to_end_cpu_s": round(median_of(runs, "end_to_end_cpu_s"), 2),
                    "metis_s": round(median_of(runs, "metis_s"), 2),
                    "symmetrize_s": round(median_of(runs, "symmetrize_s"), 2),
                    "peak_rss_gb": round(max(r["peak_rss_gb"] for r in runs), 2),
                    "edge_cut": round(median_of(runs, "edge_cut"), 4),
                    "steps_s": runs[len(runs) // 2]["timings"],
                    "part_nodes": runs[0]["part_nodes"],
                    "part_edges": runs[0]["part_edges"],
                    "part_train_nodes": runs[0]["part_train_nodes"],
                }
                print(
                    f"{num_parts} parts {variant}: {row[variant]['end_to_end_s']}s, "
                    f"cut {row[variant]['edge_cut']}",
                    file=sys.stderr,
                )
            random_cut = row["random"]["edge_cut"]
            row["cut_ratio_metis_vs_random"] = round(row["metis"]["edge_cut"] / random_cut, 4)
            row["cut_ratio_balanced_vs_random"] = round(row["metis_balanced"]["edge_cut"] / random_cut, 4)
            results.append(row)

    report = {
        "benchmark": "partition",
        "graph": os.path.abspath(graph_path),
        "repeats": args.repeats,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            # other jobs on the machine slow every figure; the 1-minute load average says how much
            "loadavg_1m_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        },
        "results": results,
    }
    emit_report(report, args.out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
