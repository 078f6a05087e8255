"""Compare two checkouts of graphstore on the same benchmarks: before / after a change, alternating.

Each checkout is a folder holding the project with its own virtual environment (``.venv``), e.g. a
``git worktree`` of the older commit with ``make install`` run in it. For ``--runs`` rounds, this script
runs every chosen benchmark once in the *before* checkout and once in the *after* one (the order swaps
every round, so a drift in the machine's load falls on both sides), reads the JSON each run writes, and
prints the median of every throughput figure (keys ending in ``per_s``, and the ``mb_per_s`` table) on
both sides, the ratio after / before of the medians and the median of the per-round ratios.

    python bench/ab.py --before ../old --after . --runs 5 --graph /tmp/g200k.npz
    python bench/ab.py --before ../old --after . --bench loader --runs 5 --out ab.json

A benchmark's arguments are those of :data:`BENCH_ARGS` (small, fixed, the same on both sides); the
graph is the one given (``../shared/bench/anchor_graph.py --num-nodes 200000 --avg-degree 20
--feat-dim 100`` for the project's 200k graph). Only figures present on both sides are compared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_ARGS: dict[str, list[str]] = {
    "client": ["--graph", "{graph}", "--repeats", "10"],
    "loader": ["--graphs", "200k", "--graph-200k", "{graph}", "--overlap-repeats", "3"],
    "optim": ["--graph", "{graph}", "--repeats", "2"],
}


def throughput_figures(result, prefix: str = "") -> dict[str, float]:
    """The throughput figures of a benchmark's JSON: numeric leaves whose key ends in ``per_s``, and
    every entry under a key ending in ``per_s`` (e.g. ``mb_per_s: {concurrent: ...}``).

    Args:
        result: the parsed JSON (dicts, lists and numbers).
        prefix: the path of ``result`` inside the whole document (dotted; list items by index).

    Returns:
        ``{dotted path: value}``.
    """
    figures: dict[str, float] = {}
    if isinstance(result, dict):
        items = result.items()
    else:
        items = enumerate(result) if isinstance(result, list) else ()
    for key, value in items:
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)) and _is_rate(path):
            figures[path] = float(value)
        elif isinstance(value, (dict, list)):
            figures.update(throughput_figures(value, path))
    return figures


def _is_rate(path: str) -> bool:
    parts = path.split(".")
    return parts[-1].endswith("per_s") or (len(parts) > 1 and parts[-2].endswith("per_s"))


def compare(before: list[dict[str, float]], after: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Medians and ratios of the figures both sides have.

    Args:
        before, after: one ``{figure: value}`` per round, same number of rounds on both sides.

    Returns:
        ``{figure: {before, after, ratio, paired_ratio}}``: the medians over rounds, the ratio of the
        medians (after / before) and the median of the rounds' own after / before ratios.

    Raises:
        ValueError: if the two sides have a different number of rounds, or none.
    """
    if len(before) != len(after) or not before:
        raise ValueError(f"need the same number of rounds on both sides, got {len(before)} and {len(after)}")
    common = set.intersection(*(set(r) for r in before + after))
    table = {}
    for name in sorted(common):
        b = statistics.median(r[name] for r in before)
        a = statistics.median(r[name] for r in after)
        paired = [ra[name] / rb[name] for rb, ra in zip(before, after, strict=True) if rb[name] > 0]
        table[name] = {
            "before": b,
            "after": a,
            "ratio": a / b if b > 0 else float("nan"),
            "paired_ratio": statistics.median(paired) if paired else float("nan"),
        }
    return table


def run_bench(checkout: Path, bench: str, graph: str, workdir: Path) -> dict[str, float]:
    """Run ``bench/<bench>.py`` of one checkout with its own venv and return its throughput figures.

    Raises:
        RuntimeError: the benchmark failed (its output's tail in the message).
    """
    python = checkout / ".venv" / "bin" / "python"
    out = workdir / f"{bench}.json"
    args = [a.format(graph=graph) for a in BENCH_ARGS[bench]]
    command = [str(python), str(checkout / "bench" / f"{bench}.py"), *args, "--out", str(out)]
    command += ["--workdir", str(workdir / "work")]
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-2000:]
        raise RuntimeError(f"{bench} in {checkout} exited {done.returncode}: {tail}")
    return throughput_figures(json.loads(out.read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", type=Path, required=True, help="checkout (with .venv) of the old version")
    parser.add_argument("--after", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--bench", default=",".join(BENCH_ARGS), help="comma-separated benchmarks")
    parser.add_argument("--graph", default="/tmp/g200k.npz", help="anchor graph .npz")
    parser.add_argument("--runs", type=int, default=5, help="rounds (each runs both sides once)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args(argv)
    benches = [b for b in args.bench.split(",") if b]
    unknown = set(benches) - set(BENCH_ARGS)
    if unknown:
        parser.error(f"unknown --bench {sorted(unknown)}; known: {sorted(BENCH_ARGS)}")
    if args.runs < 1:
        parser.error(f"--runs must be >= 1, got {args.runs}")
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    rounds: dict[str, dict[str, list]] = {b: {"before": [], "after": []} for b in benches}
    loads = []
    with tempfile.TemporaryDirectory(prefix="graphstore-ab-") as tmp:
        for run in range(args.runs):
            order = ["before", "after"] if run % 2 == 0 else ["after", "before"]
            for bench in benches:
                for side in order:
                    workdir = Path(tmp) / side / bench
                    workdir.mkdir(parents=True, exist_ok=True)
                    started = time.perf_counter()
                    rounds[bench][side].append(run_bench(sides[side], bench, args.graph, workdir))
                    loads.append(os.getloadavg()[0])
                    print(
                        f"round {run + 1}/{args.runs} {bench} {side}: {time.perf_counter() - started:.0f} s",
                        file=sys.stderr,
                    )
    report = {
        "before": str(sides["before"]),
        "after": str(sides["after"]),
        "graph": args.graph,
        "runs": args.runs,
        "load_average_1min": {"min": min(loads), "max": max(loads)},
        "figures": {b: compare(rounds[b]["before"], rounds[b]["after"]) for b in benches},
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text)
    for bench, table in report["figures"].items():
        for name, row in table.items():
            print(
                f"{bench:7s} {name:60s} {row['before']:12.1f} {row['after']:12.1f}"
                f"  x{row['ratio']:.3f} (paired x{row['paired_ratio']:.3f})",
                file=sys.stderr,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
