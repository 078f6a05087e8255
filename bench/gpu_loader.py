"""A GPU trainer fed by the loader: batches/s, epoch time, GPU busy share and a profile per stage of one
trainer's GraphSAGE epoch, with the loader sampling and gathering on the CPU (``--variants none``: the
batch built on the host, then copied) and on the GPU (``pinned``: the co-located graph in pinned host
memory read through UVA; ``device``: in GPU memory), each in fp32 and bf16 (``--amp``), in one run.

Settings are ``configs/train-large.yaml``'s (fanouts [10, 25], batch 1,024, hidden 256, Adam) and the
graph is opened in standalone mode (every partition in this process, the single-trainer case of
issue-style figures); run it under ``graphstore launch`` for servers. Per variant:

1. one warm-up epoch (the held graph is placed, kernels compiled);
2. ``--epochs`` timed epochs through ``graphstore.client.training.train_epoch`` with the loader's
   prefetching (2 batches ahead, one loader thread): batches/s, epoch seconds, and the GPU's busy
   share, from NVML's utilization counter read every ``--util-interval-ms`` while they run (the share
   of each interval during which a kernel ran, averaged) where NVML answers;
3. ``--profile-batches`` batches one stage at a time (no prefetch, the device synchronized after each
   stage): milliseconds per batch of ``sample`` (routing, held and remote sampling, relabeling),
   ``gather`` (held rows, remote pulls), ``move`` (to the GPU) and ``step`` (forward, backward, Adam),
   and the share of the batch the step's GPU work takes (the rest is what the GPU would wait for
   without overlap).

    python bench/gpu_loader.py --part-config g1m/g1m.json --out gpu_loader.json
    python bench/gpu_loader.py --part-config g1m/g1m.json --device cpu --variants none,device --amp none
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from common import GpuBusy, emit_report, parse_options

from graphstore.client import DistGraph, training
from graphstore.client.device_graph import StageClock
from graphstore.client.training import TrainConfig

OPTIONS = [
    ("--part-config", str, None, "the partitioned graph's config (required)"),
    ("--graph-name", str, None, "the graph's name (default: the config file's stem)"),
    ("--train-config", str, "configs/train-large.yaml", "training settings (fanouts, batch, model)"),
    ("--device", str, "cuda", "cuda, cuda:N or cpu"),
    ("--variants", str, "none,pinned,device", "placements: none (CPU path), pinned (UVA), device"),
    ("--amp", str, "none,bf16", "comma-separated: none, bf16, fp16"),
    ("--epochs", int, 3, "timed epochs per variant"),
    ("--profile-batches", int, 20, "batches profiled one stage at a time"),
    ("--util-interval-ms", float, 10.0, "NVML utilization reading interval"),
    ("--num-workers", int, 1, "loader threads"),
    ("--prefetch", int, 2, "batches prepared ahead"),
    ("--out", str, None, "write the JSON here too"),
]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_variant(g, task, base: TrainConfig, placement: str, amp: str, args) -> dict:
    """Warm-up, timed epochs and the stage profile of one placement and AMP setting."""
    config = TrainConfig(
        **{
            **base.__dict__,
            "placement": placement,
            "amp": amp,
            "prefetch": args.prefetch,
            "num_workers": args.num_workers,
        }
    )
    device = torch.device(args.device)
    torch.manual_seed(config.seed)
    in_feats = training.feature_width(g.ndata[config.feat_name])
    model = training.wrap_model(training.build_model(config, in_feats, task.num_classes), device, False)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    scaler = training.make_grad_scaler(device, amp)
    loader = training.make_train_loader(g, task.train_nodes, config, device, 0, (config.feat_name,))
    tick = time.perf_counter()
    training.train_epoch(model, loader, optimizer, scaler, config, device, epoch=0)  # warm-up
    _synchronize(device)
    warmup_s = time.perf_counter() - tick
    epochs = []
    with GpuBusy(device, args.util_interval_ms / 1000.0) as busy:
        for epoch in range(args.epochs):
            _synchronize(device)
            tick = time.perf_counter()
            stats = training.train_epoch(model, loader, optimizer, scaler, config, device, epoch=epoch + 1)
            _synchronize(device)
            seconds = time.perf_counter() - tick
            epochs.append(
                {"seconds": seconds, "batches": stats.batches, "loss": stats.loss_sum / stats.seeds}
            )
    loader.close()
    batches = sum(e["batches"] for e in epochs)
    seconds = sum(e["seconds"] for e in epochs)
    result = {
        "placement": placement,
        "amp": amp,
        "feature_dtype": str(config.loader_placement().get("feature_dtype") or "stored"),
        "warmup_epoch_s": warmup_s,
        "epochs": epochs,
        "epoch_s": seconds / len(epochs),
        "batches_per_s": batches / seconds,
        "gpu_busy_share": busy.share(),
        "gpu_busy_samples": len(busy.samples),
        "profile": profile(g, task, model, optimizer, scaler, config, device, args.profile_batches),
    }
    if loader.device_graph is not None:
        result["held_bytes"] = loader.device_graph.nbytes()
    return result


def profile(g, task, model, optimizer, scaler, config, device, num_batches: int) -> dict:
    """Milliseconds per batch of each stage, one stage at a time (see the module docstring)."""
    seq_config = TrainConfig(**{**config.__dict__, "prefetch": 0})
    loader = training.make_train_loader(g, task.train_nodes, seq_config, device, 0, (config.feat_name,))
    clock = StageClock(device, sync=True)
    loader.profile_stages(clock)
    input_dtype = config.model_input_dtype()
    count = 0
    for _input_nodes, _, blocks in loader:
        with clock.stage("step"):
            x = training.model_input(blocks[0].srcdata[config.feat_name], config.feat_norm, input_dtype)
            labels = training.batch_labels(blocks[-1], config.label_name)
            with training.autocast_context(device, config.amp):
                logits = model(blocks, x)
            loss = torch.nn.functional.cross_entropy(logits.float(), labels)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        count += 1
        if count == num_batches:
            break
    loader.close()
    per_batch = {name: 1000.0 * seconds / count for name, seconds in sorted(clock.seconds.items())}
    total = per_batch.get("sample", 0.0) + per_batch.get("gather", 0.0) + per_batch.get("move", 0.0)
    total += per_batch.get("step", 0.0)
    per_batch["batch_total"] = total
    per_batch["step_share"] = per_batch.get("step", 0.0) / total if total else 0.0
    per_batch["batches"] = count
    return per_batch


def main(argv=None) -> int:
    args = parse_options(__doc__, OPTIONS, argv)
    if not args.part_config:
        raise SystemExit("--part-config is required")
    name = args.graph_name or Path(args.part_config).stem
    parser = training.argument_parser(__doc__)
    base = training.config_from_args(
        parser,
        TrainConfig,
        ["--config", args.train_config, "--graph-name", name, "--part-config", args.part_config],
    )
    device = training.resolve_device(args.device)
    g = DistGraph(name, part_config=args.part_config)
    task = training.load_task(g, base)
    report = {
        "graph": {"part_config": args.part_config, "num_nodes": g.num_nodes(), "num_edges": g.num_edges()},
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "settings": {
            "fanouts": base.fanouts,
            "batch_size": base.batch_size,
            "hidden": base.hidden,
            "epochs": args.epochs,
            "prefetch": args.prefetch,
            "num_workers": args.num_workers,
        },
        "variants": [],
    }
    for amp in args.amp.split(","):
        for placement in args.variants.split(","):
            result = run_variant(g, task, base, placement, amp, args)
            report["variants"].append(result)
            print(
                f"{placement:>7} {amp:>5}: {result['batches_per_s']:7.1f} batches/s, "
                f"epoch {result['epoch_s']:.3f} s, GPU busy {result['gpu_busy_share']}",
                flush=True,
            )
    report["ratios"] = ratios(report["variants"])
    emit_report(report, args.out)
    return 0


def ratios(variants: list[dict]) -> dict:
    """batches/s of each variant over the CPU path's (same AMP), and bf16 over fp32 (same placement)."""
    rate = {(v["placement"], v["amp"]): v["batches_per_s"] for v in variants}
    out = {}
    for (placement, amp), value in rate.items():
        if placement != "none" and ("none", amp) in rate:
            out[f"{placement}/{amp} vs none/{amp}"] = value / rate[("none", amp)]
        if amp != "none" and (placement, "none") in rate:
            out[f"{placement}/{amp} vs {placement}/none"] = value / rate[(placement, "none")]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
