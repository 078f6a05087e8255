"""One GraphSAGE epoch, taken apart: the trainer script ``bench/scale.py epoch`` runs under
``graphstore launch``.

Each trainer makes three passes over its training nodes, with the settings of a training YAML
(``configs/train-large.yaml``: fanouts 10,25, batch 1,024):

1. ``sample``: the loader without features or labels (neighbor sampling alone);
2. ``fetch``: the training loader (sampling, feature and label pulls), the batches thrown away;
3. ``epoch``: one training epoch (the loop of ``graphstore.client.training.train_epoch``), timing the
   wait for each batch apart from the model's forward, backward and optimizer step (``compute``).

So ``pull`` ~ ``fetch - sample``, and ``epoch - compute`` is the fetch time the loader's background
threads did not hide. Then a sampled evaluation gives the test accuracy. Rank 0 adds the servers'
pulled rows (their ``pull_rows`` counters, from ``graphstore status``: the rows that crossed the
network; the co-located partition is read from its files) and every graphstore process's peak RSS on
this machine, and writes one json object to ``--metrics-json``.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from graphstore.client.training import (
    TrainConfig,
    argument_parser,
    build_model,
    config_from_args,
    evaluate,
    feature_width,
    finish_training,
    load_task,
    make_train_loader,
    prepare_features,
    setup_trainer,
    wrap_model,
)

PASSES = ("sample", "fetch", "epoch", "epoch_wait", "epoch_compute")


def server_counters() -> dict[int, dict]:
    """``{part_id: {"pull_rows": n, ...}}`` of the cluster's servers (``graphstore status --json``)."""
    command = [sys.executable, "-m", "graphstore.launcher.cli", "status", "--json"]
    proc = subprocess.run(
        [*command, "--config", os.environ["GRAPHSTORE_CONFIG"]],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    servers = json.loads(proc.stdout)["servers"]
    return {int(s["part_id"]): s.get("counters") or {} for s in servers if s.get("part_id") is not None}


def process_peaks(part_config: str) -> dict[str, float]:
    """Peak RSS (GiB, ``VmHWM``) of the servers of ``part_config`` and of this benchmark's trainers."""
    peaks = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/status") as fh:
                hwm = next((int(line.split()[1]) for line in fh if line.startswith("VmHWM:")), 0)
        except (OSError, StopIteration):
            continue
        if "graphstore.launcher.cli server" in cmd and part_config in cmd:
            peaks[f"server-{pid}"] = round(hwm / 2**20, 3)
        elif "scale_epoch.py" in cmd and "graphstore.launcher.cli launch" not in cmd:
            peaks[f"trainer-{pid}"] = round(hwm / 2**20, 3)
    return peaks


def node_loader(g, nodes, config: TrainConfig, rank: int, device, features, labels, cache):
    """The training loader (``make_train_loader``) with the features, labels and remote feature cache
    given (``cache_remote_features``: a share, or ``{feature: RemoteFeatureCache}``)."""
    return make_train_loader(
        g, nodes, config, device, rank, features, load_labels=labels, cache_remote_features=cache
    )


def reduce(values: list[float], how: str) -> list[float]:
    """The element-wise max or sum of ``values`` over the trainers (as is without a trainer group)."""
    tensor = torch.tensor(values, dtype=torch.float64)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        op = torch.distributed.ReduceOp.MAX if how == "max" else torch.distributed.ReduceOp.SUM
        torch.distributed.all_reduce(tensor, op=op)
    return tensor.tolist()


def timed_pass(loader) -> tuple[float, int]:
    """Seconds to iterate a loader once, and its batches."""
    start = time.perf_counter()
    batches = sum(1 for _ in loader)
    return time.perf_counter() - start, batches


def train_pass(model, loader, optimizer, config: TrainConfig) -> dict:
    """One epoch; the seconds spent waiting for batches and computing, and the input bytes."""
    wait = compute = 0.0
    feature_bytes = batches = 0
    start = time.perf_counter()
    iterator = iter(loader)
    while True:
        tick = time.perf_counter()
        try:
            _, _, blocks = next(iterator)
        except StopIteration:
            break
        tock = time.perf_counter()
        raw = blocks[0].srcdata[config.feat_name]
        feature_bytes += raw.numel() * raw.element_size()
        logits = model(blocks, prepare_features(raw, config.feat_norm))
        loss = F.cross_entropy(logits.float(), blocks[-1].dstdata[config.label_name].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        wait += tock - tick
        compute += time.perf_counter() - tock
        batches += 1
    return {
        "epoch_s": time.perf_counter() - start,
        "wait_s": wait,
        "compute_s": compute,
        "batches": batches,
        "feature_bytes": feature_bytes,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("--model", help="sage (default) | mlp")
    parser.add_argument("--cache-remote", type=float, default=0.0, help="RemoteFeatureCache share (0: none)")
    config = config_from_args(parser, TrainConfig, argv)
    cache_remote = float(parser.parse_known_args(argv)[0].cache_remote)
    trainer = setup_trainer(config)
    g, device = trainer.graph, trainer.device
    task = load_task(g, config)
    features = g.ndata[config.feat_name]
    model = wrap_model(
        build_model(config, feature_width(features), task.num_classes), device, trainer.distributed
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    before = server_counters() if trainer.rank == 0 else {}

    sample_loader = node_loader(g, task.train_nodes, config, trainer.rank, device, (), None, 0.0)
    sample_s, _ = timed_pass(sample_loader)
    sample_loader.close()
    inputs = ((config.feat_name,), config.label_name)
    loader = node_loader(g, task.train_nodes, config, trainer.rank, device, *inputs, cache_remote)
    fetch_s, _ = timed_pass(loader)
    middle = server_counters() if trainer.rank == 0 else {}
    model.train()
    run = train_pass(model, loader, optimizer, config)
    after = server_counters() if trainer.rank == 0 else {}
    accuracy = evaluate(model, g, task.eval_nodes, config, device, "final")

    slowest = reduce([sample_s, fetch_s, run["epoch_s"], run["wait_s"], run["compute_s"]], "max")
    totals = reduce([run["feature_bytes"], run["batches"]], "sum")
    if trainer.rank == 0:
        row_bytes = feature_width(features) * features.dtype.itemsize
        pulled = sum(after[p].get("pull_rows", 0) - middle.get(p, {}).get("pull_rows", 0) for p in after)
        fetch_pulled = sum(
            middle[p].get("pull_rows", 0) - before.get(p, {}).get("pull_rows", 0) for p in middle
        )
        report = {
            "world_size": trainer.world_size,
            "feat_dtype": str(features.dtype),
            "cache_remote": cache_remote,
            "batches_per_trainer": run["batches"],
            "seconds": dict(zip(PASSES, [round(float(x), 2) for x in slowest], strict=True)),
            "batches_per_s_per_trainer": round(run["batches"] / float(slowest[2]), 3),
            "input_feature_bytes_per_epoch": int(totals[0]),
            "remote_rows_pulled_per_epoch": int(pulled),
            "remote_rows_pulled_fetch_pass": int(fetch_pulled),
            "remote_feature_bytes_per_epoch_est": int(pulled) * row_bytes,
            "accuracy": accuracy,
            "trainer_peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3),
            "process_peak_rss_gib": process_peaks(os.path.abspath(config.part_config)),
        }
        print(json.dumps(report), flush=True)
        if config.metrics_json:
            with open(config.metrics_json, "w") as fh:
                json.dump(report, fh, indent=1)
    finish_training(loader, trainer.distributed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
