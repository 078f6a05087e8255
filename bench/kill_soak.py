"""Kill -9 soak: a server killed again and again under a stream of writes, in each durability mode;
counts the acknowledged writes lost per kill and the writes applied twice.

For each mode (``checkpoint``: periodic checkpoints every ``--every-updates`` updates and ``--every-s``
seconds; ``wal`` and ``wal_fsync``: the write-ahead log, with the same checkpoints truncating it) one
server of partition 0 runs while ``--threads`` client threads push without pause. Write ``i`` adds 1 to
one cell of a ``(nodes, 64)`` tensor that no other write touches, so at the end each cell says how often
its write was applied: 0 (lost, if it was acknowledged), 1, or 2 and more (applied twice). Every
``--interval-s`` seconds the server is SIGKILLed and restarted with ``--restore-latest``; the clients'
calls retry with the same request IDs until it serves again. A lost write is charged to the first kill
after its acknowledgement.

    python bench/kill_soak.py                          # 5 kills per mode
    python bench/kill_soak.py --kills 20 --modes wal --out soak.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
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

CELLS = 64
MODES = {
    "checkpoint": ["--durability", "checkpoint"],
    "wal": ["--durability", "wal"],
    "wal_fsync": ["--durability", "wal", "--fsync"],
}


class Server:
    """Partition 0's server on a fixed port, restarted from its checkpoint folder."""

    def __init__(self, part_config: str, folder: Path, args: list[str]) -> None:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.part_config = part_config
        self.folder = folder
        self.args = ["--port", str(self.port), "--checkpoint-dir", str(folder / "ckpt"), *args]
        self.proc: subprocess.Popen | None = None

    def start(self, restore: bool) -> float:
        """Start and wait until it serves; returns the seconds that took."""
        from graphstore.launcher.local_servers import launch_server, wait_serving

        started = time.monotonic()
        extra = [*self.args, "--restore-latest"] if restore else self.args
        self.proc, out_path, err_path = launch_server(self.part_config, 0, self.folder, extra)
        end = started + 120
        while "serving partition" not in out_path.read_text():
            if self.proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"server did not start:\n{err_path.read_text()[-3000:]}")
            time.sleep(0.02)
        wait_serving(self.address, 60)
        return time.monotonic() - started

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def soak_mode(part_config: str, mode: str, args: argparse.Namespace, work: Path) -> dict:
    from graphstore.client.transport import RemotePartition
    from graphstore.rpc import RpcPolicy

    folder = Path(tempfile.mkdtemp(prefix=f"soak-{mode}-", dir=work))
    checkpoints = [
        "--checkpoint-every-updates",
        str(args.every_updates),
        "--checkpoint-every-s",
        str(args.every_s),
    ]
    server = Server(part_config, folder, [*checkpoints, *MODES[mode]])
    ride_out = RpcPolicy(deadline_s=20, max_retries=40, backoff_initial_s=0.05, backoff_max_s=0.5)
    restarts: list[float] = []
    try:
        server.start(restore=False)
        client = RemotePartition(server.address, 0, ride_out)
        meta = client.metadata()
        owned = np.arange(meta.node_bounds[0], meta.node_bounds[1])
        capacity = len(owned) * CELLS
        client.init_tensor("soak", (meta.num_nodes, CELLS), "float32", "node")
        acked_at = np.full(capacity, np.nan)  # when write i was acknowledged
        attempted = np.zeros(capacity, bool)
        errors: list[str] = []
        stop = threading.Event()

        def writer(first: int) -> None:
            for i in range(first, capacity, args.threads):
                if stop.is_set():
                    return
                row = np.zeros((1, CELLS), np.float32)
                row[0, i % CELLS] = 1.0
                attempted[i] = True
                try:
                    client.push("soak", owned[i // CELLS : i // CELLS + 1], row, op="add")
                    acked_at[i] = time.monotonic()
                except Exception as exc:  # noqa: BLE001 - counted: not acknowledged
                    errors.append(f"{type(exc).__name__}: {exc}"[:300])

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(args.threads)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        kill_times: list[float] = []
        for _ in range(args.kills):
            time.sleep(args.interval_s)
            server.kill()
            kill_times.append(time.monotonic())
            restarts.append(round(server.start(restore=True), 2))
        time.sleep(args.interval_s)
        stop.set()
        for thread in threads:
            thread.join(120)
        elapsed = time.monotonic() - started
        values = client.pull("soak", owned)[:].reshape(-1)[:capacity]
        client.close()
    finally:
        server.stop()
    acked = ~np.isnan(acked_at)
    lost = acked & (values == 0)
    doubled = values >= 2
    lost_per_kill = [
        int(np.sum(lost & (acked_at < kill) & (acked_at >= (kill_times[k - 1] if k else -np.inf))))
        for k, kill in enumerate(kill_times)
    ]
    return {
        "kills": len(kill_times),
        "writes_acknowledged": int(acked.sum()),
        "writes_per_s": round(float(acked.sum()) / elapsed, 1),
        "lost_acknowledged_writes_per_kill": lost_per_kill,
        "lost_acknowledged_writes": int(lost.sum()),
        "double_applied_writes": int(doubled.sum()),
        "applied_without_acknowledgement": int(np.sum(attempted & ~acked & (values == 1))),
        "failed_calls": len(errors),
        "error_examples": errors[:3],
        "restart_s": restarts,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--interval-s", type=float, default=3.0, help="seconds of writes between kills")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--every-updates", type=int, default=25)
    parser.add_argument("--every-s", type=float, default=1.0)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--num-nodes", type=int, default=20000)
    parser.add_argument("--graph", default=None, help="an .npz graph instead of a generated one")
    parser.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "graphstore-kill-soak"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"--modes: unknown {sorted(unknown)}; choose from {sorted(MODES)}")
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    part_config = prepare_graph(args, work)
    results = {mode: soak_mode(part_config, mode, args, work) for mode in modes}
    report = {
        "every_updates": args.every_updates,
        "every_s": args.every_s,
        "threads": args.threads,
        "interval_s": args.interval_s,
        "modes": results,
        "figures": {
            **{
                f"{mode}_lost_per_kill_max": max(r["lost_acknowledged_writes_per_kill"] or [0])
                for mode, r in results.items()
            },
            **{f"{mode}_double_applied": r["double_applied_writes"] for mode, r in results.items()},
            **{f"{mode}_writes_per_s": r["writes_per_s"] for mode, r in results.items()},
        },
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    clean = all(r["double_applied_writes"] == 0 for r in results.values()) and all(
        r["lost_acknowledged_writes"] == 0 for m, r in results.items() if m.startswith("wal")
    )
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
