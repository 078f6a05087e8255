"""graphstore and DGL's ``dgl.distributed`` side by side, in one run, on the same graph (``make bench-dgl``).

Every DGL figure comes from DGL running here: ``worker.py --system dgl`` under ``.venv-dgl``'s
interpreter (DGL 2.1.0 and torch 2.2.1, built by ``make bench-dgl``), next to ``worker.py --system
graphstore`` under the project's. Both partition the same ``graphstore generate`` graph (.npz) in 2
with METIS (each with its own partitioner), start their own 2 partition servers on loopback, and run
the same workload functions (``workloads.py``, ``epoch.py``) with a client co-located with
partition 0. The systems alternate (graphstore first in odd runs, DGL first in even ones) for
``--runs`` runs; each run's figures are paired and the median ratio with its spread is reported.

Sections per run: ``partition`` (time and peak memory of each partitioner process), ``client``
(DistTensor pulls, sampling, SparseAdagrad steps: one client process), ``epoch`` (one GraphSAGE
epoch, 2 servers + 2 trainers). Without the partition section, each system's partitions are made
once, untimed, where they are missing or were made from another graph file (the stamp of
``bench/common.py``, the benchmarks' partition-cache rule).
Writes ``bench/results/<date>-<host>.json`` and prints the table.

    python bench/dgl/side_by_side.py --runs 1 --quick          # smoke: 20k nodes, a few calls each
    python bench/dgl/side_by_side.py --runs 7                  # the full comparison (200k nodes)
    python bench/dgl/side_by_side.py --runs 3 --workloads 'pull/mixed/*,graphsage_epoch'   # some
    python bench/dgl/side_by_side.py --runs 5 --headline --cpu-list 0-1 --train-frac 0.55  # the README's
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path

from machine import git_commit, load, machine
from processes import dgl_shared_memory_files, exit_on_signals, remove_shared_memory, run_measured
from quiet import (
    DEFAULT_GATE_WINDOW_S,
    DEFAULT_LOAD_THRESHOLD,
    DEFAULT_LOAD_WAIT_S,
    DEFAULT_MAX_OTHER_SHARE,
    GATES,
    BackgroundLoad,
    TurnMeter,
    wait_for_load,
    wait_for_quiet,
)
from report import metrics, summarize, table
from system_graphstore import NUM_PARTS, partition_command
from workloads import HEADLINE, selected

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.append(str(HERE.parent))  # bench/common.py: the benchmarks' one partition-cache rule
from common import clear_source_stamp, partitions_current, source_stamp, write_source_stamp  # noqa: E402

WORKER = HERE / "worker.py"
SYSTEMS = ("graphstore", "dgl")
SECTIONS = ("partition", "client", "epoch")
GRAPH_NAME = "bench"
PART_METHOD = "metis"
DEFAULT_TRAIN_FRAC = 0.1  # graphstore generate's own default
TIMEOUT_S = {"partition": 1800.0, "client": 1800.0, "epoch": 2400.0}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=7, help="alternations of the two systems")
    parser.add_argument(
        "--quick", action="store_true", help="smoke mode: small graph, a few calls per workload"
    )
    parser.add_argument("--num-nodes", type=int, help="graph size (default 200,000; 20,000 with --quick)")
    parser.add_argument(
        "--train-frac",
        type=float,
        default=DEFAULT_TRAIN_FRAC,
        help="share of the nodes in the training set (graphstore generate --train-frac): the epoch's "
        "length; 0.55 gives ~54 batches per trainer on 200k nodes (default %(default)s)",
    )
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"comma-separated: {', '.join(SECTIONS)}"
    )
    parser.add_argument(
        "--workloads",
        help="comma-separated shell patterns of the figures' workloads to run, e.g. 'pull/mixed/*,"
        "graphsage_epoch' (default: all; a section none of whose workloads matches is skipped)",
    )
    parser.add_argument(
        "--headline",
        action="store_true",
        help="the README's figures only (make bench-dgl-publish): " + ", ".join(HEADLINE),
    )
    parser.add_argument(
        "--dgl-python",
        default=str(REPO / ".venv-dgl" / "bin" / "python"),
        help="interpreter with DGL (make bench-dgl builds .venv-dgl)",
    )
    parser.add_argument("--workdir", default="/tmp/graphstore-bench-dgl", help="graph, partitions and logs")
    parser.add_argument("--results-dir", default=str(REPO / "bench" / "results"))
    parser.add_argument("--seed", type=int, default=0)
    quiet = parser.add_argument_group("quiet machine (bench/dgl/quiet.py says why these defaults)")
    quiet.add_argument(
        "--gate",
        choices=GATES,
        default="cpu",
        help="before each turn, wait until other processes used at most --max-other-share of the machine "
        "over the last --gate-window-s (cpu), or until the 1-minute load average is under "
        "--load-threshold (load); default %(default)s",
    )
    quiet.add_argument(
        "--gate-window-s", type=float, default=DEFAULT_GATE_WINDOW_S, help="the cpu gate's window"
    )
    quiet.add_argument(
        "--load-threshold",
        type=float,
        default=DEFAULT_LOAD_THRESHOLD,
        help="the load gate's 1-minute load average (0: no gate of either kind)",
    )
    quiet.add_argument(
        "--load-wait-s", type=float, default=DEFAULT_LOAD_WAIT_S, help="the longest wait for the gate"
    )
    quiet.add_argument(
        "--max-other-share",
        type=float,
        default=DEFAULT_MAX_OTHER_SHARE,
        help="a turn in which other processes used more than this share of all cores is invalid, and "
        "so is its pair (left out of the medians, counted in the table)",
    )
    quiet.add_argument(
        "--cpu-list",
        help="core placement: every process of both systems runs under `taskset -c LIST` (e.g. 0, 0-1); "
        "default: unpinned",
    )
    quiet.add_argument(
        "--background-threads",
        type=int,
        default=0,
        help="the contention variant: this many busy-looping processes run through every turn "
        "(their CPU time is reported, not counted as other work)",
    )
    quiet.add_argument("--background-cpus", help="cores the background processes are pinned to (e.g. 1)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    if not 0.0 <= args.max_other_share <= 1.0:
        parser.error(f"--max-other-share must be within [0, 1], got {args.max_other_share}")
    if args.background_threads < 0:
        parser.error(f"--background-threads must be >= 0, got {args.background_threads}")
    if not 0.0 < args.train_frac < 0.9:
        parser.error(f"--train-frac must be within (0, 0.9) (validation takes 0.1), got {args.train_frac}")
    if args.gate_window_s <= 0:
        parser.error(f"--gate-window-s must be > 0, got {args.gate_window_s}")
    if args.load_threshold <= 0:
        args.gate = "none"
    if args.headline and args.workloads:
        parser.error("--headline chooses the workloads itself: leave out --workloads")
    args.background_cpu_set = parse_cpu_list(args.background_cpus, "--background-cpus", parser)
    parse_cpu_list(args.cpu_list, "--cpu-list", parser)
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(args.sections) - set(SECTIONS))
    if unknown:
        parser.error(f"--sections: unknown {unknown}; choose from {list(SECTIONS)}")
    args.patterns = [p.strip() for p in args.workloads.split(",") if p.strip()] if args.workloads else None
    if args.headline:
        args.patterns = list(HEADLINE)
    args.sections = [
        section
        for section in args.sections
        if any(m.section == section and selected(m.workload, args.patterns) for m in metrics())
    ]
    if not args.sections:
        parser.error(f"--workloads {args.workloads!r} matches no workload of the sections chosen")
    if args.num_nodes is None:
        args.num_nodes = 20_000 if args.quick else 200_000
    if not Path(args.dgl_python).is_file():
        parser.error(
            f"--dgl-python {args.dgl_python!r} does not exist: run `make bench-dgl` to build .venv-dgl"
        )
    return args


def parse_cpu_list(text: str | None, flag: str, parser: argparse.ArgumentParser) -> set[int] | None:
    """``0,2-3`` as ``{0, 2, 3}`` (None for None); a core this machine lacks is a usage error."""
    if not text:
        return None
    cores = set()
    try:
        for part in text.split(","):
            low, _, high = part.partition("-")
            cores.update(range(int(low), int(high or low) + 1))
    except ValueError:
        parser.error(f"{flag}: not a CPU list: {text!r} (e.g. 0 or 0-1 or 0,2)")
    missing = sorted(cores - os.sched_getaffinity(0))
    if not cores or missing:
        parser.error(f"{flag} {text!r}: cores {missing or '(none)'} are not available here")
    return cores


def log(message: str) -> None:
    print(f"[bench-dgl] {message}", file=sys.stderr, flush=True)


def graph_file_name(num_nodes: int, seed: int, train_frac: float) -> str:
    """The generated graph's file name: its size, seed and training share.

    >>> graph_file_name(200_000, 0, 0.55)
    'graph-200000-seed0-train0.55.npz'
    """
    return f"graph-{num_nodes}-seed{seed}-train{train_frac:g}.npz"


def generate_graph(args) -> Path:
    """The ``graphstore generate`` graph of this size and training share at the work folder, made once."""
    path = Path(args.workdir) / graph_file_name(args.num_nodes, args.seed, args.train_frac)
    if not path.is_file():
        log(f"generating {path}")
        cli = str(Path(sys.executable).with_name("graphstore"))
        subprocess.run(
            [
                cli,
                "generate",
                "--num-nodes",
                str(args.num_nodes),
                "--avg-degree",
                "20",
                "--feat-dim",
                "100",
                "--num-classes",
                "16",
                "--seed",
                str(args.seed),
                "--train-frac",
                str(args.train_frac),
                "--out",
                str(path),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return path


def interpreter(system: str, args) -> str:
    return args.dgl_python if system == "dgl" else sys.executable


def part_config(system: str, args) -> Path:
    return Path(args.workdir) / "parts" / system / f"{GRAPH_NAME}.json"


def run_section(section: str, system: str, label: str, graph: Path, args) -> dict:
    """One section of one system; returns the worker's output (``results`` and ``versions``).

    A partition section stamps the partitions it made (``bench/common.py``'s ``source_stamp``) once its
    partitioner succeeded, and removes the stamp before it starts.

    Args:
        label: the logs' folder under ``<workdir>/logs`` (``run1``, ``prepare``).

    Raises:
        RuntimeError: the worker failed (the tail of its log in the message).
    """
    folder = Path(args.workdir) / "logs" / label / f"{section}-{system}"
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "result.json"
    out.unlink(missing_ok=True)
    config = part_config(system, args)
    if section == "partition" and system == "graphstore":
        command = partition_command(str(graph), GRAPH_NAME, str(config.parent))
    else:
        command = [
            interpreter(system, args),
            str(WORKER),
            "--system",
            system,
            section,
            "--graph-name",
            GRAPH_NAME,
            "--graph",
            str(graph),
            "--part-config",
            str(config),
            "--part-dir",
            str(config.parent),
            "--log-dir",
            str(folder),
            "--seed",
            str(args.seed),
            "--out",
            str(out),
        ]
        if args.quick:
            command.append("--quick")
        if args.patterns and section == "client":
            command += ["--workloads", ",".join(args.patterns)]
    if args.cpu_list:
        command = ["taskset", "-c", args.cpu_list, *command]
    shm_before = dgl_shared_memory_files(GRAPH_NAME)
    log_path = folder / "output.log"
    if section == "partition":
        clear_source_stamp(config.parent)
    try:
        outcome = run_measured(command, env=None, log_path=log_path, timeout_s=TIMEOUT_S[section])
    finally:
        remove_shared_memory(dgl_shared_memory_files(GRAPH_NAME) - shm_before)
    if outcome["returncode"] != 0:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{section} of {system} exited {outcome['returncode']}; {log_path}:\n{tail}")
    if section != "partition":
        return json.loads(out.read_text())
    write_source_stamp(config.parent, partition_stamp(graph))
    if system == "graphstore":
        stats = json.loads(log_path.read_text().strip().splitlines()[-1])
        seconds, versions = stats["total_seconds"], {}
    else:
        output = json.loads(out.read_text())
        seconds, versions = output["results"]["total_seconds"], output["versions"]
    figures = {
        "seconds": seconds,
        "peak_rss_bytes": outcome["peak_rss_bytes"],
        "process_wall_s": outcome["wall_s"],
    }
    return {"system": system, "versions": versions, "results": {"partition": figures}}


def partition_stamp(graph: Path) -> dict:
    """The stamp of either system's partitions of ``graph`` (each system's are in a folder of its own)."""
    return source_stamp(graph, GRAPH_NAME, NUM_PARTS, part_method=PART_METHOD)


def ensure_partitions(graph: Path, args) -> None:
    """Each system's partitions of ``graph``, made now (untimed, with the partition section's commands)
    where they are missing or stamped with another graph file; for runs without the partition section.

    Raises:
        RuntimeError: a partitioner failed (its log's tail in the message).
    """
    stamp = partition_stamp(graph)
    for system in SYSTEMS:
        if partitions_current(part_config(system, args).parent, stamp):
            continue
        log(f"partitioning {graph.name} for {system} (untimed: the partition section is not run)")
        start = time.perf_counter()
        run_section("partition", system, "prepare", graph, args)
        log(f"  {time.perf_counter() - start:.1f} s")


def gate(args) -> dict:
    """The gate before a turn (``--gate``); returns its reading."""
    if args.gate == "cpu":
        reading = wait_for_quiet(args.max_other_share, args.gate_window_s, args.load_wait_s)
        if not reading["gate_passed"]:
            share = reading["other_share"]
            log(f"  other processes used {share or 0:.1%} of the machine after {reading['waited_s']:.0f} s")
        return reading
    if args.gate == "load":
        reading = wait_for_load(args.load_threshold, args.load_wait_s)
        if not reading["gate_passed"]:
            log(f"  load {reading['load_1m']:.2f} still >= threshold after {reading['waited_s']:.0f} s")
        return {"kind": "load", **reading}
    return {"kind": "none", "waited_s": 0.0, "gate_passed": True}


def measured_turn(section: str, system: str, run: int, graph: Path, args) -> dict:
    """One turn behind the gate, under the CPU accounting (and the background load, if asked).

    Returns:
        ``run_section``'s output with ``quiet``: the gate's reading and the turn's ``TurnAccount``.
    """
    reading = gate(args)
    with BackgroundLoad(args.background_threads, args.background_cpu_set) as background:
        with TurnMeter(args.max_other_share, background_pids=background.pids) as meter:
            output = run_section(section, system, f"run{run}", graph, args)
    account = meter.account.to_json()
    if not account["valid"]:
        log(f"  invalid: other processes used {account['other_share']:.1%} of the machine")
    return {**output, "quiet": {"gate": reading, "account": account}}


def run_all(args, graph: Path, after_each_run) -> tuple[dict, list[dict]]:
    """Every run, alternating the systems; returns ``(per-section runs, errors)``.

    ``after_each_run(runs, errors)`` is called after each run (the results file is rewritten then).
    """
    runs = {section: [] for section in args.sections}
    errors = []
    for run in range(args.runs):
        order = SYSTEMS if run % 2 == 0 else SYSTEMS[::-1]
        for section in SECTIONS:
            if section not in args.sections:
                continue
            outputs = {}
            for system in order:
                log(f"run {run + 1}/{args.runs}: {section} on {system}")
                start = time.perf_counter()
                try:
                    outputs[system] = measured_turn(section, system, run, graph, args)
                except (RuntimeError, TimeoutError, OSError, ValueError, KeyError) as exc:
                    outputs[system] = None
                    errors.append({"run": run, "section": section, "system": system, "error": str(exc)})
                    log(f"  failed: {str(exc).splitlines()[0]}")
                elapsed = time.perf_counter() - start
                waited = ((outputs[system] or {}).get("quiet") or {}).get("gate", {}).get("waited_s", 0.0)
                log(f"  {elapsed:.1f} s (gate {waited:.1f} s, turn {elapsed - waited:.1f} s)")
            runs[section].append(outputs)
        after_each_run(runs, errors)
    return runs, errors


def versions_of(runs: dict) -> dict:
    """The versions each system's workers reported (the first that did)."""
    found = {}
    for outputs_per_run in runs.values():
        for outputs in outputs_per_run:
            for system, output in outputs.items():
                if output and output.get("versions") and system not in found:
                    found[system] = output["versions"]
    return found


def write_report(args, path: Path, runs: dict, errors: list, started: str, load_before: dict) -> dict:
    """Summarize the runs so far and (re)write the results file; returns the summary."""
    summary = {
        m.key: summarize(m, runs[m.section])
        for m in metrics()
        if m.section in runs and selected(m.workload, args.patterns)
    }
    report = {
        "benchmark": "graphstore vs dgl.distributed, side by side",
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "started": started,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "settings": {
            "runs": args.runs,
            "runs_done": len(next(iter(runs.values()), [])),
            "quick": args.quick,
            "num_nodes": args.num_nodes,
            "avg_degree": 20,
            "feat_dim": 100,
            "num_classes": 16,
            "seed": args.seed,
            "train_frac": args.train_frac,
            "graph": graph_file_name(args.num_nodes, args.seed, args.train_frac),
            "partitions": NUM_PARTS,
            "part_method": PART_METHOD,
            "sections": args.sections,
            "workloads": args.patterns,
            "placement": f"taskset -c {args.cpu_list}" if args.cpu_list else "unpinned",
            "gate": args.gate,
            "gate_window_s": args.gate_window_s,
            "load_threshold": args.load_threshold,
            "load_wait_s": args.load_wait_s,
            "max_other_share": args.max_other_share,
            "background": {
                "threads": args.background_threads,
                "cpus": args.background_cpus or "unpinned",
            },
        },
        "versions": {**versions_of(runs), "graphstore_commit": git_commit(REPO)},
        "machine": machine(),
        "load": {"before": load_before, "after": load()},
        "summary": summary,
        "errors": errors,
        "runs": runs,
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=1) + "\n")
    tmp.replace(path)
    return summary


def main(argv=None) -> int:
    exit_on_signals()
    args = parse_args(argv)
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    graph = generate_graph(args)
    if "partition" not in args.sections:
        ensure_partitions(graph, args)
    results_dir = Path(args.results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    partial = (args.patterns or len(args.sections) < len(SECTIONS)) and not args.headline
    suffix = (
        ("-quick" if args.quick else "")
        + ("-headline" if args.headline else "")
        + ("-partial" if partial else "")
        + (f"-contended{args.background_threads}" if args.background_threads else "")
    )
    path = results_dir / f"{time.strftime('%Y-%m-%d')}-{socket.gethostname()}{suffix}.json"
    if path.exists() and not suffix:  # a full run never replaces an earlier one of the same day
        path = path.with_name(f"{time.strftime('%Y-%m-%d-%H%M')}-{socket.gethostname()}.json")
    load_before = load()
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")

    def after_each_run(runs, errors):
        write_report(args, path, runs, errors, started, load_before)

    runs, errors = run_all(args, graph, after_each_run)
    print(table(write_report(args, path, runs, errors, started, load_before)))
    print(f"results: {path}")
    if errors:
        print(f"{len(errors)} section(s) failed; see 'errors' in the results file")
    return 1 if errors else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        traceback.print_exc()
        sys.exit(130)
