"""One DGL-style training script, run unchanged but for its imports on graphstore and on DGL 2.1, side by
side in one run (never part of ``make test``).

The script is ``examples/dgl/rgcn_node_classification.py`` (typed R-GCN: ``HeteroGraphConv`` of
``GraphConv(weight=False)`` with ``WeightBasis`` weights, featureless node types as ``DistEmbedding``
trained by ``SparseAdam``). For DGL, its import lines are rewritten (``graphstore.compat.dgl`` ->
``dgl``) into a copy; nothing else changes. DGL 2.1 (the last DGL that installs here, ``make
bench-dgl``'s venv) names the node loader ``dgl.dataloading.DistNodeDataLoader``, so the DGL processes
start with a ``sitecustomize`` that aliases it as ``dgl.distributed.DistNodeDataLoader`` (DGL 2.4's
name, which the script uses) -- on DGL's side, never in the script.

Both systems read the same ``graphstore generate --schema mag`` graph: graphstore partitions it with
``graphstore partition``, DGL with ``dgl.distributed.partition_graph`` (a ``dgl.heterograph`` built from
the same arrays, the paper data in ``ndata``). Both run in DGL's standalone mode (one partition, one
trainer, ``DGL_DIST_MODE=standalone``). The systems alternate (graphstore first in odd runs) for
``--runs`` runs; the figure is the median over runs of each run's median epoch time (the first epoch,
a warm-up, left out), their ratio (DGL / graphstore: above 1 means graphstore is faster), the same for
each run's fastest epoch (the figure least disturbed by other work on a shared machine), and the test
accuracy of each run; ``--mlp`` adds the features-only baseline (the same script, ``--model mlp``, on
graphstore).

    python bench/dgl/script_side_by_side.py --dgl-python /work/venv-dgl/bin/python --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCRIPT = REPO / "examples" / "dgl" / "rgcn_node_classification.py"
GRAPH_NAME = "mag"

# DGL 2.1's names for what DGL 2.4 (and the script) call dgl.distributed.Dist*DataLoader.
DGL_SHIM = """import dgl.dataloading, dgl.distributed
for _name in ("DistNodeDataLoader", "DistEdgeDataLoader"):
    if not hasattr(dgl.distributed, _name):
        setattr(dgl.distributed, _name, getattr(dgl.dataloading, _name))
"""

DGL_PARTITION = """import sys, numpy as np, torch, dgl
path, name, out = sys.argv[1:4]
data = np.load(path)
num_nodes = {k.split("/", 1)[1]: int(data[k]) for k in data.files if k.startswith("num_nodes/")}
edges = {}
for key in data.files:
    if key.startswith("edge/") and key.endswith("/src"):
        canonical = tuple(key.split("/")[1].split(":"))
        base = key[: -len("/src")]
        edges[canonical] = (torch.from_numpy(data[base + "/src"]), torch.from_numpy(data[base + "/dst"]))
g = dgl.heterograph(edges, num_nodes_dict=num_nodes)
for key in data.files:
    if key.startswith("node/"):
        _, ntype, field = key.split("/")
        g.nodes[ntype].data[field] = torch.from_numpy(data[key])
dgl.distributed.partition_graph(g, name, 1, out, part_method="random")
"""


def dgl_script(workdir: Path) -> Path:
    """The script with its imports pointed at DGL: the only change."""
    text = SCRIPT.read_text()
    ported = text.replace("import graphstore.compat.dgl as dgl", "import dgl").replace(
        "from graphstore.compat.dgl import", "from dgl import"
    )
    assert "graphstore" not in re.sub(r'""".*?"""', "", ported, flags=re.S), "the script imports graphstore"
    path = workdir / "rgcn_node_classification_dgl.py"
    path.write_text(ported)
    changed = [(a, b) for a, b in zip(text.splitlines(), ported.splitlines(), strict=True) if a != b]
    print(f"lines changed for DGL: {len(changed)}: " + "; ".join(f"{a!r} -> {b!r}" for a, b in changed))
    return path


def prepare(args, workdir: Path) -> tuple[Path, Path]:
    """The graph and both systems' one-partition configs (made once per work folder)."""
    graph = workdir / f"mag-{args.num_nodes}.npz"
    cli = str(Path(sys.executable).with_name("graphstore"))
    if not graph.exists():
        subprocess.run(
            [
                cli,
                "generate",
                "--schema",
                "mag",
                "--num-nodes",
                str(args.num_nodes),
                "--seed",
                "0",
                "--out",
                str(graph),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    gs_config = workdir / "gs" / f"{GRAPH_NAME}.json"
    if not gs_config.exists():
        subprocess.run(
            [
                cli,
                "partition",
                "--graph",
                str(graph),
                "--name",
                GRAPH_NAME,
                "--num-parts",
                "1",
                "--out",
                str(gs_config.parent),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    dgl_config = workdir / "dgl" / f"{GRAPH_NAME}.json"
    if not dgl_config.exists():
        subprocess.run(
            [args.dgl_python, "-c", DGL_PARTITION, str(graph), GRAPH_NAME, str(dgl_config.parent)],
            check=True,
            env={**os.environ, "DGLBACKEND": "pytorch"},
            stdout=subprocess.DEVNULL,
        )
    return gs_config, dgl_config


def run_one(system: str, args, workdir: Path, config: Path, script: Path, model: str = "rgcn") -> dict:
    """One run of the script; returns its JSON line plus the wall time."""
    out = workdir / f"{system}-{model}-{time.monotonic_ns()}.json"
    python = args.dgl_python if system == "dgl" else sys.executable
    env = {
        **os.environ,
        "DGL_DIST_MODE": "standalone",
        "DGLBACKEND": "pytorch",
        "OMP_NUM_THREADS": str(args.threads),
    }
    env.pop("GRAPHSTORE_CONFIG", None)
    if system == "dgl":
        env["PYTHONPATH"] = str(workdir / "shim")
    command = [
        python,
        str(script),
        "--graph_name",
        GRAPH_NAME,
        "--ip_config",
        str(workdir / "ip_config.txt"),
        "--part_config",
        str(config),
        "--standalone",
        "--model",
        model,
        "--num_epochs",
        str(args.epochs),
        "--fan_out",
        args.fan_out,
        "--n_hidden",
        str(args.hidden),
        "--seed",
        str(args.seed),
        "--log_every",
        "1000",
        "--out",
        str(out),
    ]
    start = time.perf_counter()
    log = workdir / f"{system}-{model}.log"
    with open(log, "w") as handle:
        subprocess.run(
            command, check=True, env=env, stdout=handle, stderr=subprocess.STDOUT, timeout=args.timeout
        )
    result = json.loads(out.read_text())
    result["wall_s"] = time.perf_counter() - start
    result["median_epoch_s"] = statistics.median(result["epoch_times"][1:] or result["epoch_times"])
    # The fastest epoch: the least disturbed by other work on a shared machine.
    result["min_epoch_s"] = min(result["epoch_times"][1:] or result["epoch_times"])
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dgl-python", required=True, help="the python of the DGL 2.1 venv")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--num-nodes", type=int, default=20000)
    parser.add_argument("--fan-out", default="10,10")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS of each run")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument(
        "--mlp", action="store_true", help="also run the features-only baseline on graphstore"
    )
    parser.add_argument(
        "--workdir", default="", help="keep graphs and partitions here (default: a temp folder)"
    )
    parser.add_argument("--out", default="", help="write the report JSON here")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="script-side-by-side-"))
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "shim").mkdir(exist_ok=True)
    (workdir / "shim" / "sitecustomize.py").write_text(DGL_SHIM)
    (workdir / "ip_config.txt").write_text("127.0.0.1\n")
    gs_config, dgl_config = prepare(args, workdir)
    scripts = {"graphstore": SCRIPT, "dgl": dgl_script(workdir)}
    configs = {"graphstore": gs_config, "dgl": dgl_config}
    runs = {"graphstore": [], "dgl": []}
    for run in range(args.runs):
        order = ("graphstore", "dgl") if run % 2 == 0 else ("dgl", "graphstore")
        for system in order:
            result = run_one(system, args, workdir, configs[system], scripts[system])
            runs[system].append(result)
            print(
                f"run {run} {system}: median epoch {result['median_epoch_s']:.2f}s, fastest "
                f"{result['min_epoch_s']:.2f}s, epochs "
                f"{[round(t, 2) for t in result['epoch_times']]}, test acc {result['test_acc']:.4f}",
                flush=True,
            )
    report = {"args": vars(args), "runs": runs}
    for system in runs:
        report[system] = {
            "median_epoch_s": statistics.median(r["median_epoch_s"] for r in runs[system]),
            "fastest_epoch_s": min(r["min_epoch_s"] for r in runs[system]),
            "test_acc": [round(r["test_acc"], 4) for r in runs[system]],
            "median_test_acc": statistics.median(r["test_acc"] for r in runs[system]),
        }
    ratios = [
        d["median_epoch_s"] / g["median_epoch_s"]
        for g, d in zip(runs["graphstore"], runs["dgl"], strict=True)
    ]
    report["epoch_time_ratio_dgl_over_graphstore"] = {"median": statistics.median(ratios), "runs": ratios}
    fastest = [
        d["min_epoch_s"] / g["min_epoch_s"] for g, d in zip(runs["graphstore"], runs["dgl"], strict=True)
    ]
    report["fastest_epoch_ratio_dgl_over_graphstore"] = {
        "median": statistics.median(fastest),
        "runs": fastest,
    }
    if args.mlp:
        mlp = run_one("graphstore", args, workdir, gs_config, SCRIPT, model="mlp")
        report["mlp_test_acc_graphstore"] = mlp["test_acc"]
    print(json.dumps({k: v for k, v in report.items() if k not in ("runs", "args")}))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
