"""Randomized fuzzing and denial-of-service attempts against a running partition server.

Two parts, one report:

- fuzz: ``--calls`` random requests per RPC (every method but Shutdown; structured requests with
  random fields, and random bytes), from a new seed each run (printed; ``--seed`` repeats one). Every
  answer must be OK or a clean refusal (no INTERNAL / UNKNOWN), and the server must be alive after.
- attacks: the requests that took the server down or starved it before the request limits (a huge
  sample, a huge pull, a 13-dimensional or oversized Init, six 400 MB Inits, 200 waiting barriers, an
  absurd barrier timeout, checkpoint paths outside the root, token guessing). Each must be answered
  with a status, while a victim client pulls and checks health beside it: its Pull latency and the
  health check's are reported per attack, with the server's RSS.

Run: ``python bench/fuzz.py [--calls 10000] [--out bench/fuzz.json]``.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path

import grpc
import numpy as np
from common import emit_report
from grpc_health.v1 import health_pb2, health_pb2_grpc

from graphstore.auth import auth_metadata
from graphstore.client.transport.channel import channel_options
from graphstore.launcher.local_servers import start_servers
from graphstore.partition import partition_graph
from graphstore.partition.generate import GeneratorConfig, generate_graph
from graphstore.protos import graphstore_pb2 as pb
from graphstore.protos import pull_wire
from graphstore.protos.service import SERVICE_NAME
from graphstore.rpc import RpcPolicy

NUM_NODES = 20_000
TOKEN = "bench-fuzz-" + secrets.token_hex(12)
METHODS = {
    "Metadata": pb.MetadataRequest,
    "Pull": pb.PullRequest,
    "Push": pb.PushRequest,
    "Init": pb.InitRequest,
    "Delete": pb.DeleteRequest,
    "List": pb.ListRequest,
    "SampleNeighbors": pb.SampleRequest,
    "FindEdges": pb.FindEdgesRequest,
    "InSubgraph": pb.InSubgraphRequest,
    "Degrees": pb.DegreesRequest,
    "PushGrad": pb.PushGradRequest,
    "Barrier": pb.BarrierRequest,
    "Checkpoint": pb.CheckpointRequest,
    "Restore": pb.RestoreRequest,
    "Stats": pb.StatsRequest,
}
BAD_CODES = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}
NAMES = ["feat", "label", "emb", "", "missing", "x" * 300, "../etc", "w"]


def _ids(rng: np.random.Generator) -> pb.Tensor:
    """An ID tensor: mostly plausible IDs, sometimes huge counts, bad dtypes, shapes or lengths."""
    msg = pb.Tensor(dtype=pb.INT64)
    kind = rng.integers(0, 6)
    if kind == 0:
        n = int(rng.integers(0, 64))
        ids = rng.integers(-5, NUM_NODES + 5, n)
    elif kind == 1:
        n = int(rng.integers(0, 4))
        ids = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64)
    elif kind == 2:
        n = int(rng.integers(1000, 300_000))  # large, valid
        ids = rng.integers(0, NUM_NODES // 2, n)
    else:
        n = int(rng.integers(0, 8))
        ids = rng.integers(0, NUM_NODES, n)
        msg.dtype = int(rng.integers(-1, 12)) % 2**31
    msg.shape[:] = [n] if kind != 5 else [int(rng.integers(-3, 2**40))]
    msg.data = (
        np.asarray(ids, np.int64).tobytes()[: int(rng.integers(0, 8 * n + 9))]
        if kind == 4
        else (np.asarray(ids, np.int64).tobytes())
    )
    return msg


def _rows(rng: np.random.Generator) -> pb.Tensor:
    msg = pb.Tensor(dtype=int(rng.integers(0, 12)))
    msg.shape[:] = [int(d) for d in rng.integers(-2, 70, int(rng.integers(0, 4)))]
    msg.data = rng.bytes(int(rng.integers(0, 4096)))
    return msg


def random_request(method: str, rng: np.random.Generator) -> bytes:
    """A random request of ``method``: structured with random fields, or random bytes."""
    if rng.random() < 0.25:
        return rng.bytes(int(rng.integers(0, 256)))
    msg = METHODS[method]()
    name = NAMES[int(rng.integers(len(NAMES)))]
    if method in ("Pull", "Push", "PushGrad", "Delete", "Init"):
        msg.name = name
    if method in ("Pull", "Push", "PushGrad"):
        msg.ids.CopyFrom(_ids(rng))
    if method == "Push":
        msg.rows.CopyFrom(_rows(rng))
        msg.op = int(rng.integers(0, 4))
    elif method == "PushGrad":
        msg.grads.CopyFrom(_rows(rng))
        msg.optimizer.kind = ["adagrad", "adam", "rowwise_adagrad", "sgd", ""][int(rng.integers(5))]
        msg.optimizer.lr, msg.optimizer.eps = (
            float(rng.normal()),
            float(rng.choice([0.0, 1e-8, np.nan, np.inf])),
        )
    elif method == "Init":
        msg.dtype, msg.policy = int(rng.integers(0, 12)), int(rng.integers(0, 4))
        dims = [NUM_NODES, 1, 4, 8, 0, -1, 10**6, 2**40]
        msg.shape[:] = [dims[int(i)] for i in rng.integers(0, len(dims), int(rng.integers(0, 14)))]
        msg.init.kind = int(rng.integers(0, 6))
        msg.init.a, msg.init.b = float(rng.choice([0.0, 1.0, np.nan, np.inf, -1e300])), float(rng.normal())
    elif method == "SampleNeighbors":
        msg.seeds.CopyFrom(_ids(rng))
        msg.fanout = int(rng.choice([-2, -1, 0, 5, 25, 2**31 - 1, int(rng.integers(-(2**31), 2**31))]))
        msg.edge_dir, msg.replace = int(rng.integers(0, 3)), bool(rng.integers(0, 2))
        msg.prob = ["", "w", "feat", "missing"][int(rng.integers(4))]
    elif method in ("FindEdges", "InSubgraph", "Degrees"):
        field = {"FindEdges": "eids", "InSubgraph": "nodes", "Degrees": "nids"}[method]
        getattr(msg, field).CopyFrom(_ids(rng))
    elif method == "Barrier":
        msg.name, msg.count = name, int(rng.choice([0, 1, 2, 3, -1, 2**31 - 1]))
        msg.timeout_s = float(rng.choice([0.0, -1.0, 1e-3, 0.2, 1e300, np.nan, np.inf]))
        msg.participant = ["", "a", "b", "c"][int(rng.integers(4))]
        msg.has_ticket, msg.ticket = bool(rng.integers(0, 2)), int(rng.integers(-3, 3))
        msg.leave = bool(rng.integers(0, 2))
    elif method in ("Checkpoint", "Restore"):
        msg.path = ["", "ck", "/etc", "../up", "a/b", "x" * 300, "\x00", "."][int(rng.integers(8))]
        msg.names[:] = [NAMES[int(i)] for i in rng.integers(0, len(NAMES), int(rng.integers(0, 3)))]
    return msg.SerializeToString()


def run_fuzz(address: str, calls: int, seed: int, workers: int = 4) -> dict:
    """``calls`` random requests per method; the count of each status code per method."""
    channel = grpc.insecure_channel(address, options=channel_options(RpcPolicy()))
    stubs = {m: channel.unary_unary(f"/{SERVICE_NAME}/{m}") for m in METHODS}
    counts: dict[str, dict[str, int]] = {m: {} for m in METHODS}
    examples: dict[str, str] = {}
    lock = threading.Lock()

    def one_method(method: str, method_seed: int) -> None:
        rng = np.random.default_rng(method_seed)
        for _ in range(calls):
            request = random_request(method, rng)
            try:
                stubs[method](request, timeout=10, metadata=auth_metadata(TOKEN))
                code = grpc.StatusCode.OK
            except grpc.RpcError as err:
                code = err.code()
                if code in BAD_CODES:
                    with lock:
                        examples.setdefault(method, f"{code.name}: {err.details()}")
            with lock:
                counts[method][code.name] = counts[method].get(code.name, 0) + 1

    seeds = np.random.SeedSequence(seed).spawn(len(METHODS))
    with futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(one_method, METHODS, [s.generate_state(1)[0] for s in seeds]))
    channel.close()
    bad = sum(counts[m].get(c.name, 0) for m in METHODS for c in BAD_CODES)
    return {
        "calls_per_method": calls,
        "seed": seed,
        "codes": counts,
        "internal_or_unknown": bad,
        "examples": examples,
    }


class Victim:
    """A client that pulls 1,000 rows and checks health in a loop; latencies per phase."""

    def __init__(self, address: str) -> None:
        self._channel = grpc.insecure_channel(address, options=channel_options(RpcPolicy()))
        self._pull = self._channel.unary_unary(f"/{SERVICE_NAME}/Pull")
        self._health = health_pb2_grpc.HealthStub(self._channel)
        self._request = pull_wire.pull_request("feat", np.arange(0, 1000, dtype=np.int64))
        self._stop = threading.Event()
        self.samples: list[tuple[float, float, bool]] = []  # (pull s, health s, all ok)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            ok = True
            started = time.perf_counter()
            try:
                self._pull(self._request, timeout=5, metadata=auth_metadata(TOKEN))
            except grpc.RpcError:
                ok = False
            pulled = time.perf_counter()
            try:
                self._health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME), timeout=2)
            except grpc.RpcError:
                ok = False
            self.samples.append((pulled - started, time.perf_counter() - pulled, ok))
            self._stop.wait(0.01)

    def phase(self, since: int) -> dict:
        """Latency figures of the samples taken since index ``since``."""
        taken = self.samples[since:]
        if not taken:
            return {"samples": 0}
        pulls = sorted(s[0] for s in taken)
        healths = sorted(s[1] for s in taken)
        return {
            "samples": len(taken),
            "failed": sum(1 for s in taken if not s[2]),
            "pull_ms_p50": round(statistics.median(pulls) * 1000, 2),
            "pull_ms_max": round(pulls[-1] * 1000, 2),
            "health_ms_max": round(healths[-1] * 1000, 2),
        }

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._channel.close()


def _rss_mb(pid: int) -> dict:
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key = line.split(":", 1)[0]
            if key in ("VmRSS", "VmHWM"):
                values[key] = round(int(line.split()[1]) / 1024, 1)
    return values


def run_attacks(address: str, pid: int, victim: Victim) -> list[dict]:
    """Each attack with its answers, the victim's latencies meanwhile and the server's RSS after."""
    from attacks import ATTACKS

    channel = grpc.insecure_channel(address, options=channel_options(RpcPolicy()))
    results = [{"attack": "baseline", **victim.phase(0), "rss_mb": _rss_mb(pid)}]
    time.sleep(1.0)
    results[0].update(victim.phase(0))
    for name, attack in ATTACKS:
        since = len(victim.samples)
        started = time.perf_counter()
        answers = attack(channel, TOKEN)
        time.sleep(0.3)  # let the victim take samples after the attack, too
        results.append(
            {
                "attack": name,
                "answers": answers,
                "seconds": round(time.perf_counter() - started, 2),
                **victim.phase(since),
                "rss_mb": _rss_mb(pid),
            }
        )
    channel.close()
    return results


def run_guessing(address: str, pid: int, victim: Victim) -> dict:
    """Token guessing, last: the guessing host is refused for the cool-down (the victim, on the same
    host, too; the health check is exempt)."""
    from attacks import token_guessing

    channel = grpc.insecure_channel(address)
    since = len(victim.samples)
    answers = token_guessing(channel, TOKEN)
    channel.close()
    return {"attack": "token_guessing", "answers": answers, **victim.phase(since), "rss_mb": _rss_mb(pid)}


def confine_memory(pid: int, limit_bytes: int) -> str | None:
    """Move ``pid`` into a new memory cgroup limited to ``limit_bytes`` (v2 or v1); its folder, or None
    where cgroups cannot be written (not root, no memory controller)."""
    candidates = [("/sys/fs/cgroup", "memory.max"), ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")]
    for root, limit_file in candidates:
        if not os.path.exists(
            os.path.join(root, limit_file if root.endswith("memory") else "cgroup.controllers")
        ):
            continue
        folder = os.path.join(root, f"graphstore-bench-{pid}")
        try:
            os.makedirs(folder, exist_ok=True)
            Path(folder, limit_file).write_text(str(limit_bytes))
            Path(folder, "cgroup.procs").write_text(str(pid))
            return folder
        except OSError:
            continue
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=10_000, help="random calls per RPC (default 10000)")
    parser.add_argument("--seed", type=int, default=None, help="repeat a run (default: a new seed)")
    parser.add_argument("--out", default=None, help="also write the JSON report here")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else secrets.randbits(32)
    folder = Path(tempfile.mkdtemp(prefix="graphstore-fuzz-"))
    arrays = generate_graph(GeneratorConfig(num_nodes=NUM_NODES, avg_degree=20, feat_dim=100, seed=1))
    result = partition_graph(arrays, "fuzz", 2, str(folder / "parts"), part_method="random")
    os.environ["GRAPHSTORE_TOKEN"] = TOKEN
    server_args = ("--checkpoint-root", str(folder / "checkpoints"), "--auth-cooldown-s", "5")
    cgroup = None
    with start_servers(result.config_path, 1, server_args, log_dir=folder / "logs") as group:
        address, pid = group.addresses[0], group.procs[0].pid
        cgroup = confine_memory(pid, 2 * 1024**3)
        victim = Victim(address)
        try:
            attacks = run_attacks(address, pid, victim)
            started = time.perf_counter()
            fuzz = run_fuzz(address, args.calls, seed)
            fuzz["seconds"] = round(time.perf_counter() - started, 1)
            attacks.append(run_guessing(address, pid, victim))
        finally:
            victim.close()
        alive = group.procs[0].poll() is None
        final_rss = _rss_mb(pid) if alive else {}
    if cgroup is not None:
        os.rmdir(cgroup)
    report = {
        "server_alive": alive,
        "server_rss_mb": final_rss,
        "memory_cgroup": "2 GiB" if cgroup else "unavailable",
        "fuzz": fuzz,
        "attacks": attacks,
    }
    emit_report(report, args.out)


if __name__ == "__main__":
    main()
