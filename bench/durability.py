"""What durability costs: pushes per second against one server in each durability mode.

Modes: ``off`` (no checkpoint folder), ``checkpoint`` (periodic checkpoints every ``--every-s``
seconds; answers wait for the loss bound), ``wal`` (every write appended to the write-ahead log before
it is answered; periodic checkpoints truncate it) and ``wal_fsync`` (the log is also synced before the
answer). ``--threads`` client threads push-add ``--rows`` rows of ``--dim`` float32 (each push a new
request ID) without pause for ``--seconds``; each mode runs ``--repeats`` times (a fresh server each
time, the modes interleaved), and the median rate is reported with its ratio to ``checkpoint``.

    python bench/durability.py                              # 4 threads, 16 x 64 floats, 3 x 5 s per mode
    python bench/durability.py --threads 1 --rows 1 --out durability.json

The graph is generated (``--num-nodes``) and partitioned in 2 under ``--work-dir``; partition 0's server
is measured. The checkpoint folder is on ``--work-dir``'s file system (reported).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "bench"))

from load import prepare_graph  # noqa: E402 - the graph bench/load.py partitions

MODES = {
    "off": [],
    "checkpoint": ["--durability", "checkpoint"],
    "wal": ["--durability", "wal"],
    "wal_fsync": ["--durability", "wal", "--fsync"],
}


def start_server(part_config: str, mode: str, folder: Path, every_s: float):
    """One server of partition 0 in ``mode``; returns ``(process, address)`` once it serves."""
    from graphstore.launcher.local_servers import launch_server, wait_serving

    args = list(MODES[mode])
    if mode != "off":
        args = ["--checkpoint-dir", str(folder / "ckpt"), "--checkpoint-every-s", str(every_s), *args]
    proc, out_path, err_path = launch_server(part_config, 0, folder, args)
    end = time.monotonic() + 120
    while "serving partition" not in out_path.read_text():
        if proc.poll() is not None or time.monotonic() > end:
            raise RuntimeError(f"the {mode} server did not start:\n{err_path.read_text()[-2000:]}")
        time.sleep(0.05)
    address = out_path.read_text().split(" at ", 1)[1].split()[0]
    wait_serving(address, 60)
    return proc, address


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def measure(address: str, args: argparse.Namespace) -> float:
    """Pushes per second of ``args.threads`` threads over ``args.seconds``."""
    from graphstore.client.transport import RemotePartition
    from graphstore.rpc import RpcPolicy

    client = RemotePartition(address, 0, RpcPolicy(deadline_s=60))
    meta = client.metadata()
    owned = np.arange(meta.node_bounds[0], meta.node_bounds[1])
    client.init_tensor("bench", (meta.num_nodes, args.dim), "float32", "node")
    rows = np.ones((args.rows, args.dim), np.float32)
    for _ in range(20):  # warm-up: connections, first checkpoint
        client.push("bench", owned[: args.rows], rows, op="add")
    counts = [0] * args.threads
    go = threading.Event()
    end = [0.0]

    def worker(index: int) -> None:
        rng = np.random.default_rng(index)
        go.wait()
        while time.monotonic() < end[0]:
            ids = rng.choice(owned, args.rows, replace=False)
            client.push("bench", ids, rows, op="add")
            counts[index] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.threads)]
    for thread in threads:
        thread.start()
    started = time.monotonic()
    end[0] = started + args.seconds
    go.set()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    client.close()
    return sum(counts) / elapsed


def filesystem_of(path: Path) -> str:
    result = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--every-s", type=float, default=2.0, help="periodic checkpoint interval")
    parser.add_argument("--num-nodes", type=int, default=20000)
    parser.add_argument("--graph", default=None, help="an .npz graph instead of a generated one")
    parser.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "graphstore-durability"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    part_config = prepare_graph(args, work)
    rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    order = list(MODES)
    for repeat in range(args.repeats):
        for mode in order[repeat % len(order) :] + order[: repeat % len(order)]:
            folder = Path(tempfile.mkdtemp(prefix=f"{mode}-", dir=work))
            proc, address = start_server(part_config, mode, folder, args.every_s)
            try:
                rates[mode].append(round(measure(address, args), 1))
            finally:
                stop(proc)
                shutil.rmtree(folder, ignore_errors=True)
    medians = {mode: statistics.median(values) for mode, values in rates.items()}
    report = {
        "threads": args.threads,
        "rows_per_push": args.rows,
        "dim": args.dim,
        "seconds": args.seconds,
        "repeats": args.repeats,
        "checkpoint_every_s": args.every_s,
        "filesystem": filesystem_of(work),
        "pushes_per_s": rates,
        "figures": {
            **{f"{mode}_pushes_per_s": medians[mode] for mode in MODES},
            "wal_vs_checkpoint_ratio": round(medians["wal"] / medians["checkpoint"], 3),
            "wal_fsync_vs_checkpoint_ratio": round(medians["wal_fsync"] / medians["checkpoint"], 3),
            "checkpoint_vs_off_ratio": round(medians["checkpoint"] / medians["off"], 3),
        },
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
