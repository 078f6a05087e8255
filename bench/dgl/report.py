"""Ratios of the side-by-side runs: which figure each workload is judged by, and the tables.

A ratio above 1 always means graphstore did better: graphstore ÷ DGL for a throughput, DGL ÷
graphstore for a time or a memory peak. Each run pairs one graphstore measurement with one DGL
measurement taken next to it; the summary is the median of the per-run ratios and their spread.

Each row is judged by every check that applies to it, and is *met* only when all hold (issue 37):

- its target ratio over DGL (``TARGETS``);
- for the small calls (``SMALL_CALLS``: the remote pulls of 1k and 10k rows, 1 and 4 threads, and the
  1-hop sample), graphstore at >= ``CEILING_SHARE`` of the bare gRPC call with the same sizes measured
  in the same turn (``grpc_ceiling.py``); both figures are printed;
- for a mixed pull, graphstore's mixed rows/s at least its remote rows/s at the same size and threads
  (the median of the per-run ratios, both measured in the same turn).

Run as a script, it renders a results file of ``side_by_side.py`` (the README's performance table is
this output, pasted as is), recomputing the summary from the file's per-run figures:

    python bench/dgl/report.py --results bench/results/2026-11-25-vm.json --markdown
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from epoch import BATCH_SIZE
from quiet import pair_is_judged, pair_is_valid
from workloads import ADAGRAD_ROWS, LOCALITIES, PULL_ROWS, PULL_THREADS, selected

# The project's targets (issues 21 and 37) for the ratio's median, by workload prefix.
TARGETS = {"pull/": 1.2, "sample/": 1.5, "adagrad/": 2.0, "graphsage_epoch": 1.3}
# The small calls, each judged by its bare gRPC ceiling too (grpc_ceiling.py): graphstore's median
# per-run share of the ceiling must reach CEILING_SHARE, whatever the ratio over DGL.
SMALL_CALLS = ("pull/remote/1000/*", "pull/remote/10000/*", "sample/1hop")
CEILING_SHARE = 0.8
# A DGL median this many times away (either way) from the previous results file's flags the row: DGL
# loses far more than graphstore when it shares the cores, so a jump on DGL's side is a sign of load.
DRIFT_FACTOR = 2.0
SYSTEM_NAMES = {"graphstore": "graphstore", "dgl": "DGL"}


@dataclass(frozen=True)
class Metric:
    """One compared figure: ``results[section][workload][field]`` of each system's output."""

    section: str
    workload: str
    field: str
    unit: str
    higher_is_better: bool

    @property
    def key(self) -> str:
        return f"{self.workload}:{self.field}"

    def ratio(self, graphstore: float, dgl: float) -> float:
        """graphstore's advantage: > 1 when graphstore is faster (or smaller)."""
        return graphstore / dgl if self.higher_is_better else dgl / graphstore


def metrics() -> list[Metric]:
    """Every compared figure, in the table's order."""
    rows = [
        Metric("client", f"pull/{locality}/{count}/{threads}t", "rows_per_s", "rows/s", True)
        for locality in LOCALITIES
        for count in PULL_ROWS
        for threads in PULL_THREADS
    ]
    rows += [
        Metric("client", "sample/1hop", "seeds_per_s", "seeds/s", True),
        Metric("client", "sample/2hop", "batches_per_s", "batches/s", True),
        Metric("client", "sample/2hop+feat", "batches_per_s", "batches/s", True),
    ]
    rows += [Metric("client", f"adagrad/{count}", "steps_per_s", "steps/s", True) for count in ADAGRAD_ROWS]
    rows += [
        Metric("partition", "partition", "seconds", "s", False),
        Metric("partition", "partition", "peak_rss_bytes", "bytes", False),
        Metric("epoch", "graphsage_epoch", "epoch_s", "s", False),
    ]
    return rows


def quartiles(values: list[float]) -> tuple[float, float]:
    """First and third quartiles (the values themselves for fewer than 2)."""
    if len(values) < 2:
        return values[0], values[0]
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def summarize(metric: Metric, runs: list[dict]) -> dict:
    """The per-run values and ratios of ``metric`` and their median, min–max and IQR.

    Args:
        runs: per run, ``{"graphstore": output or None, "dgl": output or None}`` of its section.

    Returns:
        The summary entry; ``invalid_pairs`` counts the runs left out because another process used
        the machine during one of the two turns (``quiet.pair_is_valid``).
    """
    pairs = []
    ceilings, ceiling_shares, mixed_shares = [], [], []
    invalid = unjudged = 0
    for run in runs:
        if not pair_is_valid(run):
            invalid += 1
            continue
        unjudged += not pair_is_judged(run)
        try:
            values = [
                run[system]["results"][metric.workload][metric.field] for system in ("graphstore", "dgl")
            ]
        except (KeyError, TypeError):
            continue
        pairs.append(values)
        ceiling = ceiling_of(metric, run.get("graphstore"))
        if ceiling:
            ceilings.append(ceiling)
            ceiling_shares.append(values[0] / ceiling)
        remote = remote_of(metric, run.get("graphstore"))
        if remote:
            mixed_shares.append(values[0] / remote)
    if not pairs:
        return {"unit": metric.unit, "runs": 0, "invalid_pairs": invalid, "unjudged_pairs": unjudged}
    ratios = [metric.ratio(gs, dgl) for gs, dgl in pairs]
    q1, q3 = quartiles(ratios)
    extra = {}
    if ceilings:
        extra.update(
            ceiling_median=statistics.median(ceilings),
            ceiling_over_dgl=statistics.median(ceilings) / statistics.median(dgl for _, dgl in pairs),
            ceiling_shares=ceiling_shares,
            graphstore_over_ceiling=statistics.median(ceiling_shares),
        )
    if mixed_shares:
        extra.update(mixed_over_remote=mixed_shares, mixed_over_remote_median=statistics.median(mixed_shares))
    return {
        **extra,
        "unit": metric.unit,
        "higher_is_better": metric.higher_is_better,
        "runs": len(pairs),
        "invalid_pairs": invalid,
        "unjudged_pairs": unjudged,
        "graphstore_median": statistics.median(gs for gs, _ in pairs),
        "dgl_median": statistics.median(dgl for _, dgl in pairs),
        "graphstore": [gs for gs, _ in pairs],
        "dgl": [dgl for _, dgl in pairs],
        "ratios": ratios,
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "ratio_q1": q1,
        "ratio_q3": q3,
    }


def ceiling_key(workload: str) -> str | None:
    """The results key of the bare-gRPC ceiling of a workload (None: a workload without one).

    >>> ceiling_key("pull/remote/1000/4t"), ceiling_key("sample/1hop"), ceiling_key("pull/mixed/1000/1t")
    ('ceiling/1000/4t', 'ceiling/sample/1hop', None)
    """
    parts = workload.split("/")
    if parts[:2] == ["pull", "remote"]:
        return f"ceiling/{parts[2]}/{parts[3]}"
    return "ceiling/sample/1hop" if workload == "sample/1hop" else None


def ceiling_of(metric: Metric, output: dict | None) -> float | None:
    """The bare-gRPC ceiling graphstore's turn measured for this workload's calls (None if none)."""
    key = ceiling_key(metric.workload)
    entry = output.get("results", {}).get(key) if output and key else None
    return entry.get(metric.field) if entry else None


def remote_of(metric: Metric, output: dict | None) -> float | None:
    """For a mixed pull, the same turn's remote pull of the same size and threads (None otherwise)."""
    parts = metric.workload.split("/")
    if not output or parts[:2] != ["pull", "mixed"]:
        return None
    entry = output.get("results", {}).get("/".join(["pull", "remote", *parts[2:]]))
    return entry.get(metric.field) if entry else None


def is_small_call(key: str) -> bool:
    """Whether a summary key's workload is one of the small calls judged by their gRPC ceiling."""
    return selected(key.split(":", 1)[0], list(SMALL_CALLS))


def checks(key: str, entry: dict) -> list[tuple[str, bool]]:
    """Each check a row is judged by, in words, and whether it holds (see the module's docstring).

    A small call whose ceiling was not measured fails its ceiling check; a mixed pull whose remote
    counterpart was not measured has no mixed check.
    """
    found = []
    target = target_of(key)
    if target is not None:
        found.append((f"≥ {target:g}x DGL", entry["ratio_median"] >= target))
    if is_small_call(key):
        share = entry.get("graphstore_over_ceiling")
        found.append((f"≥ {CEILING_SHARE:g}x ceiling", share is not None and share >= CEILING_SHARE))
    if "mixed_over_remote_median" in entry:
        found.append(("mixed ≥ remote", entry["mixed_over_remote_median"] >= 1.0))
    return found


def verdict(key: str, entry: dict) -> tuple[str, bool | None]:
    """The checks a row is judged by, in words, and whether all hold (None: nothing to judge)."""
    found = checks(key, entry)
    if not found:
        return "", None
    return "; ".join(text for text, _ in found), all(ok for _, ok in found)


def ceiling_words(entry: dict) -> str:
    """The ceiling figure and graphstore's share of it (empty where no ceiling was measured).

    >>> ceiling_words({"unit": "rows/s", "ceiling_median": 2.5e6, "graphstore_over_ceiling": 0.84})
    '2.50M rows/s (graphstore 0.84x)'
    """
    if "ceiling_median" not in entry:
        return ""
    share = entry["graphstore_over_ceiling"]
    return f"{human(entry['ceiling_median'], entry['unit'])} (graphstore {share:.2f}x)"


def human(value: float, unit: str) -> str:
    """A short figure: ``1.23M rows/s``, ``4.56 s``, ``1.2 GB``."""
    if unit == "bytes":
        return f"{value / 1e9:.2f} GB"
    if unit == "s":
        return f"{value:.2f} s"
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.2f}{suffix} {unit}"
    return f"{value:.2f} {unit}"


def table(summary: dict[str, dict]) -> str:
    """The ratio table: per figure, both medians and the median ratio with its min–max and IQR."""
    header = (
        f"{'workload':<34} {'graphstore':>18} {'DGL':>18} {'ratio':>7}  {'min-max':>13}  {'IQR':>13}  runs"
        "  invalid  target"
    )
    lines = [header, "-" * len(header)]
    for key, entry in summary.items():
        if not entry.get("runs"):
            lines.append(f"{key:<34} {'(no valid paired run)':>18}  invalid {entry.get('invalid_pairs', 0)}")
            continue
        unit = entry["unit"]
        spread = f"{entry['ratio_min']:.2f}-{entry['ratio_max']:.2f}"
        iqr = f"{entry['ratio_q1']:.2f}-{entry['ratio_q3']:.2f}"
        found = checks(key, entry)
        judged = "; ".join(text for text, _ in found)
        if found:
            failed = [text for text, ok in found if not ok]
            judged += " met" if not failed else " NOT met"
            if failed and len(found) > 1:
                judged += f" ({'; '.join(failed)})"
        if ceiling_words(entry):
            judged += f"  [ceiling {ceiling_words(entry)}]"
        if "mixed_over_remote_median" in entry:
            judged += f"  [mixed/remote {entry['mixed_over_remote_median']:.2f}x]"
        lines.append(
            f"{key:<34} {human(entry['graphstore_median'], unit):>18} {human(entry['dgl_median'], unit):>18} "
            f"{entry['ratio_median']:>6.2f}x  {spread:>13}  {iqr:>13}  {entry['runs']:>4}  "
            f"{entry.get('invalid_pairs', 0):>7}  {judged}"
        )
    lines.append("ratio > 1: graphstore better (graphstore/DGL throughput; DGL/graphstore time and memory)")
    lines.append(validity_line(summary))
    return "\n".join(lines)


def validity_line(summary: dict[str, dict]) -> str:
    """One sentence: were all pairs valid, or how many were left out as run on a busy machine."""
    invalid = sum(entry.get("invalid_pairs", 0) for entry in summary.values())
    # A results file from before the accounting has no such counts: nothing in it was judged.
    unjudged = sum(entry.get("unjudged_pairs", entry.get("runs", 0)) for entry in summary.values())
    if not invalid and unjudged:
        return (
            f"{unjudged} figure pair(s) not judged (no CPU accounting of their turns): not a publishable run."
        )
    if not invalid:
        return "Every pair valid: no other process used more than the set share of the machine in any turn."
    rows = sum(1 for entry in summary.values() if entry.get("invalid_pairs"))
    return (
        f"{invalid} figure pair(s) over {rows} row(s) invalid (other processes used the machine during a "
        "turn) and left out of the medians: not a publishable run."
    )


def drift(
    summary: dict[str, dict], previous: dict[str, dict], factor: float = DRIFT_FACTOR
) -> dict[str, float]:
    """The rows whose DGL median moved more than ``factor`` times (either way) from ``previous``'s.

    Returns:
        ``{key: this DGL median / previous DGL median}`` for each flagged row.
    """
    flagged = {}
    for key, entry in summary.items():
        before = previous.get(key, {})
        if entry.get("runs") and before.get("runs") and before.get("dgl_median"):
            change = entry["dgl_median"] / before["dgl_median"]
            if change > factor or change < 1 / factor:
                flagged[key] = change
    return flagged


def previous_results(path: Path) -> Path | None:
    """The newest full results file beside ``path`` that started before it (None if there is none)."""
    try:
        started = json.loads(path.read_text()).get("started", "")
    except (OSError, ValueError):
        return None
    candidates = []
    for other in path.parent.glob("*.json"):
        if other.resolve() == path.resolve() or "-quick" in other.name or "-partial" in other.name:
            continue
        try:
            report = json.loads(other.read_text())
        except (OSError, ValueError):
            continue
        # Only side-by-side results files (other benchmarks' files share the folder and the key "summary").
        if (
            isinstance(report, dict)
            and "summary" in report
            and "started" in report
            and report["started"] < started
        ):
            candidates.append((report["started"], other))
    return max(candidates)[1] if candidates else None


def target_of(key: str) -> float | None:
    """The target ratio of a summary key (``workload:field``), None where there is none."""
    workload = key.split(":", 1)[0]
    return next((ratio for prefix, ratio in TARGETS.items() if workload.startswith(prefix)), None)


def placement_words(settings: dict) -> str:
    """How the run placed its processes and what load it added itself, in words."""
    placement = settings.get("placement", "unpinned")
    words = "processes unpinned" if placement == "unpinned" else f"every process under `{placement}`"
    background = settings.get("background") or {}
    if background.get("threads"):
        words += (
            f", with {background['threads']} busy-looping background process(es) started by the harness "
            f"(pinned: {background.get('cpus', 'unpinned')})"
        )
    return words


def run_line(report: dict, path: str) -> str:
    """One sentence naming the run: file, dates, machine, load, runs, graph and versions."""
    machine, settings, versions = report["machine"], report["settings"], report["versions"]
    load = report["load"]
    ours, dgl = versions.get("graphstore", {}), versions.get("dgl", {})
    ram = machine.get("ram_bytes") or 0
    return (
        f"`{path}`: `{report['command']}`, {report['started']} to {report['finished']}, on {machine['host']} "
        f"({machine['cpu_model']}, {machine['cores']} cores, {ram / 2**30:.1f} GiB RAM), load average "
        f"(1 / 5 / 15 min) {load['before']['loadavg_1m']:.2f} / {load['before']['loadavg_5m']:.2f} / "
        f"{load['before']['loadavg_15m']:.2f} before and {load['after']['loadavg_1m']:.2f} / "
        f"{load['after']['loadavg_5m']:.2f} / {load['after']['loadavg_15m']:.2f} after; "
        f"{settings['runs_done']} alternating runs, {graph_words(report)}, "
        f"{settings['partitions']} partitions ({settings['part_method']}), "
        f"{placement_words(settings)}; graphstore "
        f"{ours.get('graphstore', '?')} (commit {versions.get('graphstore_commit', '?')[:12]}, torch "
        f"{ours.get('torch', '?')}), DGL {dgl.get('dgl', '?')} (torch {dgl.get('torch', '?')})."
        + epoch_words(report)
    )


def graph_words(report: dict) -> str:
    """The graph in words: its file, nodes and training share (what older files lack is left out)."""
    settings = report["settings"]
    words = f"{settings['num_nodes']:,} nodes"
    if settings.get("graph"):
        words = f"graph `{settings['graph']}` ({words}, train-frac {settings['train_frac']:g})"
    return words


def epoch_trainers(report: dict) -> dict[str, dict]:
    """Per system, the epoch's training set as its first epoch turn measured it.

    Returns:
        ``{system: {"train_nodes": all trainers', "batches": [per trainer]}}`` (rank 0's only in
        results files from before the per-trainer figures); systems without an epoch turn left out.
    """
    found = {}
    for outputs in report.get("runs", {}).get("epoch", []):
        for system, output in outputs.items():
            epoch = ((output or {}).get("results") or {}).get("graphsage_epoch")
            if not epoch or system in found:
                continue
            batches = epoch.get("trainer_batches") or [epoch["batches"]]
            nodes = sum(epoch["trainer_train_nodes"]) if "trainer_train_nodes" in epoch else None
            found[system] = {"train_nodes": nodes, "batches": batches}
    return found


def epoch_words(report: dict) -> str:
    """One sentence on the epoch's training set and batches per trainer, as measured ('' without one).

    >>> epoch_words({"runs": {"epoch": [{"graphstore": {"results": {"graphsage_epoch": {
    ...     "trainer_batches": [54, 54], "trainer_train_nodes": [55000, 55000]}}}}]}})
    ' Epoch: batch 1,024; batches per trainer: 54 / 54 (graphstore, 110,000 training nodes over 2 trainers).'
    """
    trainers = epoch_trainers(report)
    if not trainers:
        return ""
    described = []
    for system, trainer in trainers.items():
        batches = " / ".join(str(count) for count in trainer["batches"])
        nodes = trainer["train_nodes"]
        over = f", {nodes:,} training nodes over {len(trainer['batches'])} trainers" if nodes else ""
        described.append(f"{batches} ({SYSTEM_NAMES.get(system, system)}{over})")
    return f" Epoch: batch {BATCH_SIZE:,}; batches per trainer: {', '.join(described)}."


def markdown(report: dict, path: str, drifted: dict[str, float] | None = None) -> str:
    """The summary of a results file as a markdown table, after a line naming the run.

    Args:
        drifted: rows to flag (``drift``'s answer against the previous results file).
    """
    drifted = drifted or {}
    lines = [
        run_line(report, path),
        "",
        "| workload | figure | graphstore | DGL | ratio (median) | min–max | IQR | runs | invalid | target "
        "| gRPC ceiling (graphstore's share) | mixed ÷ remote | met |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|:---:|",
    ]
    for key, entry in report["summary"].items():
        workload, field = key.split(":", 1)
        invalid = entry.get("invalid_pairs", 0)
        if not entry.get("runs"):
            lines.append(f"| `{workload}` | {field} | | | no valid paired run | | | 0 | {invalid} | | | | |")
            continue
        dgl_flag = f" (DGL {drifted[key]:.2f}× the previous run's)" if key in drifted else ""
        unit = entry["unit"]
        target, met = verdict(key, entry)
        met = "" if met is None else ("yes" if met else "no")
        mixed = f"{entry['mixed_over_remote_median']:.2f}x" if "mixed_over_remote_median" in entry else ""
        lines.append(
            f"| `{workload}` | {field} | {human(entry['graphstore_median'], unit)} | "
            f"{human(entry['dgl_median'], unit)}{dgl_flag} | {entry['ratio_median']:.2f}x | "
            f"{entry['ratio_min']:.2f}–{entry['ratio_max']:.2f} | "
            f"{entry['ratio_q1']:.2f}–{entry['ratio_q3']:.2f} | "
            f"{entry['runs']} | {invalid} | {target} | {ceiling_words(entry)} | {mixed} | {met} |"
        )
    lines += [
        "",
        "Ratio > 1: graphstore better (graphstore ÷ DGL for throughputs, DGL ÷ graphstore for times and "
        "memory); the median of the per-run ratios, each run pairing the two systems back to back. "
        f"Met: every check of the row holds: the ratio over DGL; for the small calls, graphstore at ≥ "
        f"{CEILING_SHARE:g}x a bare grpcio call of the same request and answer sizes measured in the same "
        "turn (the median per-run share); for a mixed pull, graphstore's mixed rows/s ≥ its remote rows/s "
        "of the same size and threads (the median per-run ratio).",
        validity_line(report["summary"]),
    ]
    if drifted:
        lines.append(
            f"{len(drifted)} DGL figure(s) more than {DRIFT_FACTOR:g}× away from the previous results "
            "file's: a sign of load on one side."
        )
    if report.get("errors"):
        lines.append(f"{len(report['errors'])} section run(s) failed; see `errors` in the results file.")
    return "\n".join(lines)


def resummarized(report: dict) -> dict[str, dict]:
    """The summary of a results file recomputed from its per-run figures, for the rows it holds.

    The judging rules are this module's; a file written by an older version gets the checks it could
    not record (ceiling shares, mixed ÷ remote). A file without per-run figures keeps its own summary.
    """
    runs = report.get("runs")
    if not runs:
        return report["summary"]
    by_key = {m.key: m for m in metrics()}
    return {
        key: summarize(by_key[key], runs[by_key[key].section])
        if key in by_key and by_key[key].section in runs
        else entry
        for key, entry in report["summary"].items()
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Render a side_by_side.py results file.")
    parser.add_argument("--results", required=True, help="a bench/results/<date>-<host>.json file")
    parser.add_argument("--markdown", action="store_true", help="a markdown table (default: plain text)")
    parser.add_argument(
        "--previous",
        help="the results file to compare DGL's figures with (default: the newest full run before this one "
        "in the same folder; 'none' to skip)",
    )
    args = parser.parse_args(argv)
    path = Path(args.results)
    report = json.loads(path.read_text())
    report["summary"] = resummarized(report)
    if args.previous == "none":
        previous_path = None
    else:
        previous_path = Path(args.previous) if args.previous else previous_results(path)
    drifted = (
        drift(report["summary"], json.loads(previous_path.read_text())["summary"]) if previous_path else {}
    )
    shown = (
        str(path.resolve().relative_to(Path.cwd()))
        if path.resolve().is_relative_to(Path.cwd())
        else str(path)
    )
    print(
        markdown(report, shown, drifted)
        if args.markdown
        else run_line(report, shown) + "\n\n" + table(report["summary"])
    )
    if drifted and not args.markdown:
        print(f"DGL drift against {previous_path}:")
        for key, change in drifted.items():
            print(f"  {key}: DGL {change:.2f}x the previous run's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
