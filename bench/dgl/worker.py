"""One system's side of the side-by-side benchmark, run with that system's interpreter.

``--system graphstore`` runs in the project's venv, ``--system dgl`` in ``.venv-dgl``; the driver
(``side_by_side.py``) calls each in turn and reads the JSON each writes to ``--out``. Modes:

- ``client``: start the system's 2 partition servers, connect one client co-located with partition
  0 and run every single-client workload of ``workloads.py``; the servers end with it;
- ``epoch``: 2 servers + 2 trainer processes (this script's ``trainer`` mode), one GraphSAGE epoch
  (``epoch.py``); graphstore's through ``graphstore launch``;
- ``trainer``: one trainer of ``epoch`` (internal);
- ``partition`` (DGL only; graphstore's is its own ``graphstore partition``), ``server`` (DGL only:
  a partition server in DGL's server role) and ``peer`` (DGL only: the idle client of machine 1 that
  DGL needs to create distributed tensors, see ``system_dgl.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from processes import Children, exit_on_signals, free_ports

WORKER = Path(__file__).resolve()
EPOCH_TIMEOUT_S = 1800.0


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--system", required=True, choices=["graphstore", "dgl"])
    parser.add_argument("mode", choices=["client", "epoch", "trainer", "partition", "server", "peer"])
    parser.add_argument("--graph", help="partition: the .npz graph")
    parser.add_argument("--graph-name", default="bench")
    parser.add_argument("--part-config", help="the system's partition config (NAME.json)")
    parser.add_argument("--part-dir", help="partition: output folder")
    parser.add_argument("--ip-config", help="server: DGL's ip_config file")
    parser.add_argument("--log-dir", default=".", help="server logs and trainer results")
    parser.add_argument("--num-classes", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a few calls per workload (smoke mode)")
    parser.add_argument(
        "--workloads", help="client: comma-separated shell patterns of the workloads to run (default: all)"
    )
    parser.add_argument("--out", help="where the JSON result goes")
    return parser.parse_args(argv)


def system_module(name: str):
    """The system's adapter module (imports only that system's package)."""
    if name == "dgl":
        import system_dgl

        return system_dgl
    import system_graphstore

    return system_graphstore


def run_client(module, args) -> dict:
    from workloads import Repeats, client_workloads

    repeats = Repeats.quick() if args.quick else Repeats()
    patterns = args.workloads.split(",") if args.workloads else None
    log_dir = Path(args.log_dir)
    if module.NAME == "graphstore":
        with module.cluster(args.part_config, args.graph_name, log_dir) as config:
            system = module.GraphstoreSystem(config)
            try:
                results = client_workloads(system, args.seed, repeats, patterns)
                row_bytes = int(system.feat.shape[1]) * system.feat.dtype.itemsize
            finally:
                system.close()
        return {**results, **call_ceilings(results, row_bytes, repeats, log_dir)}
    with (
        Children() as children,
        module.cluster(args.part_config, args.graph_name, log_dir, 2, children, peer=True) as (
            ip_config,
            env,
        ),
    ):
        os.environ.update(env)
        system = module.DglSystem(ip_config, args.part_config, args.graph_name)
        try:
            return client_workloads(system, args.seed, repeats, patterns)
        finally:
            system.close()


def call_ceilings(results: dict, row_bytes: int, repeats, log_dir: Path) -> dict:
    """The bare-gRPC ceilings (``grpc_ceiling.py``) of the small calls measured in this turn.

    Every remote pull (``ceiling/<rows>/<threads>t``: its sizes, threads and call count; figure
    ``rows_per_s``) and the 1-hop sample (``ceiling/sample/1hop``: the mean request and answer bytes of
    its remote ``SampleNeighbors`` calls, one thread, as many calls as it timed; figure ``seeds_per_s``
    of the median call, times the remote calls per sample).
    """
    from grpc_ceiling import CeilingCall, ceilings, one_hop_call_sizes, pull_ceiling_call
    from workloads import ONE_HOP_SEEDS, pull_calls

    calls = []
    for key in results:
        if key.startswith("pull/remote/"):
            rows, threads = int(key.split("/")[2]), int(key.split("/")[3].rstrip("t"))
            calls.append(pull_ceiling_call(rows, threads, pull_calls(rows, threads, repeats), row_bytes))
    one_hop = results.get("sample/1hop", {})
    sizes = one_hop_call_sizes(one_hop["wire"], one_hop["samples"]) if "wire" in one_hop else None
    if sizes:
        calls.append(
            CeilingCall(
                "ceiling/sample/1hop", sizes["request_bytes"], sizes["answer_bytes"], 1, one_hop["samples"]
            )
        )
    if not calls:
        return {}
    measured = ceilings(calls, log_dir, warmup=repeats.warmup)
    for key, entry in measured.items():
        if key == "ceiling/sample/1hop":
            sample_ms = entry["call_ms"] * sizes["calls_per_sample"]
            entry.update(
                seeds_per_s=ONE_HOP_SEEDS / (sample_ms / 1e3),
                median_ms=sample_ms,
                calls_per_sample=sizes["calls_per_sample"],
            )
        else:
            entry["rows_per_s"] = entry["calls_per_s"] * int(key.split("/")[1])
    return measured


def run_epoch(module, args) -> dict:
    log_dir = Path(args.log_dir)
    for stale in log_dir.glob("rank*.json"):
        stale.unlink()
    trainer = [
        sys.executable,
        str(WORKER),
        "--system",
        module.NAME,
        "trainer",
        "--graph-name",
        args.graph_name,
        "--part-config",
        args.part_config,
        "--log-dir",
        str(log_dir),
        "--num-classes",
        str(args.num_classes),
        "--seed",
        str(args.seed),
    ]
    if module.NAME == "graphstore":
        module.run_epoch(args.part_config, args.graph_name, trainer, log_dir, EPOCH_TIMEOUT_S)
    else:
        with (
            Children() as children,
            module.cluster(args.part_config, args.graph_name, log_dir, 2, children) as (_, env),
        ):
            port = free_ports(1)[0]
            trainers = Children()
            try:
                for rank in range(2):
                    trainer_env = {
                        **env,
                        "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": str(port),
                        "RANK": str(rank),
                        "WORLD_SIZE": "2",
                        "OMP_NUM_THREADS": "1",
                    }
                    trainers.start(trainer, env=trainer_env, log_path=log_dir / f"dgl-trainer-{rank}.log")
                codes = trainers.wait_all(EPOCH_TIMEOUT_S)
            finally:
                trainers.stop()
            if any(codes):
                tail = (log_dir / "dgl-trainer-0.log").read_text()[-3000:]
                raise RuntimeError(f"DGL trainers exited {codes}; trainer 0's log:\n{tail}")
    ranks = [json.loads(path.read_text()) for path in sorted(log_dir.glob("rank*.json"))]
    if len(ranks) != 2:
        raise RuntimeError(f"expected 2 trainer results in {log_dir}, found {len(ranks)}")
    return {
        "graphsage_epoch": {
            **ranks[0],
            "epoch_s": max(rank["epoch_s"] for rank in ranks),
            "trainer_batches": [rank["batches"] for rank in ranks],
            "trainer_train_nodes": [rank["train_nodes"] for rank in ranks],
        }
    }


def run_trainer(module, args) -> None:
    import torch
    import torch.distributed as dist
    from epoch import graphsage_epoch

    torch.set_num_threads(1)
    if module.NAME == "graphstore":
        trainer = module.GraphstoreTrainer()
    else:
        trainer = module.DglTrainer(os.environ["DGL_IP_CONFIG"], args.graph_name)
    dist.init_process_group("gloo")
    try:
        result = graphsage_epoch(trainer, args.num_classes, args.seed)
        Path(args.log_dir, f"rank{dist.get_rank()}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()
        trainer.close()


def main(argv=None) -> int:
    exit_on_signals()
    args = parse_args(argv)
    module = system_module(args.system)
    if args.mode == "server":
        module.serve(args.ip_config)
        return 0
    if args.mode == "peer":
        module.run_peer(args.ip_config, args.graph_name)
        return 0
    if args.mode == "trainer":
        run_trainer(module, args)
        return 0
    if args.mode == "partition":
        results = module.partition(args.graph, args.graph_name, args.part_dir)
    elif args.mode == "client":
        results = run_client(module, args)
    else:
        results = run_epoch(module, args)
    Path(args.out).write_text(
        json.dumps({"system": module.NAME, "versions": module.versions(), "results": results})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
