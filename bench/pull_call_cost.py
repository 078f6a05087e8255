"""Where a small remote pull's time goes: the server's Pull handler alone, and a bare gRPC call.

Two measurements for the 1,000-row pull that ``make bench-dgl`` compares with DGL:

- ``handler``: graphstore's Pull handler (``PartitionServicer``, the generic handler grpc calls) run
  in-process on serialized requests for random rows of one partition, with and without metrics:
  microseconds per call, and cProfile's top entries;
- ``grpc``: the bare grpcio call of ``bench/dgl/grpc_ceiling.py`` (same request and answer sizes)
  with and without a per-call deadline and metadata, as graphstore's channel sends them: calls/s.

    python bench/pull_call_cost.py --part-config /tmp/bd-quiet/parts/graphstore/bench.json --part-id 1
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "dgl"))

import grpc_ceiling  # noqa: E402

from graphstore.partition import load_partition  # noqa: E402
from graphstore.protos import pull_wire  # noqa: E402
from graphstore.server.metrics import ServerMetrics  # noqa: E402
from graphstore.server.partition_server import PartitionServer  # noqa: E402
from graphstore.server.servicer import PartitionServicer  # noqa: E402


class _Context:
    """What the handler asks of grpc's ServicerContext on a successful call."""

    def time_remaining(self) -> float:
        return 60.0

    def add_callback(self, _callback) -> bool:
        return False

    def set_trailing_metadata(self, _metadata) -> None:
        pass

    def code(self):
        return None

    def abort(self, code, message):
        raise RuntimeError(f"{code}: {message}")


def handler_cost(part_config: str, part_id: int, tensor: str, rows: int, calls: int) -> dict:
    """Microseconds per Pull handler call (no network), with and without metrics; the profile's top."""
    config = json.loads(Path(part_config).read_text())
    low, high = config["node_map"]["_N"][part_id]
    server = PartitionServer(load_partition(part_config, part_id))
    rng = np.random.default_rng(0)
    requests = [pull_wire.pull_request(tensor, rng.integers(low, high, rows)) for _ in range(calls + 100)]
    context = _Context()

    class Details:
        method = "/graphstore.PartitionService/Pull"
        invocation_metadata = ()

    result = {}
    for label, metrics in (("no_metrics", None), ("metrics", ServerMetrics(part_id))):
        call = PartitionServicer(server, metrics=metrics).generic_handler().service(Details()).unary_unary
        for raw in requests[:100]:
            call(raw, context)
        start = time.perf_counter()
        for raw in requests[100:]:
            call(raw, context)
        result[f"handler_us_{label}"] = (time.perf_counter() - start) / calls * 1e6
    profile = cProfile.Profile()
    profile.enable()
    for raw in requests[100:]:
        call(raw, context)
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(8)
    result["profile"] = text.getvalue()
    return result


def grpc_cost(rows: int, row_bytes: int, calls: int, repeats: int) -> dict:
    """Calls/s of the bare gRPC call, plain and with a deadline and metadata (medians of ``repeats``)."""
    metadata = (("authorization", "Bearer " + "0" * 64),)
    variants = {
        "plain": {},
        "deadline": {"timeout": 60.0},
        "metadata": {"metadata": metadata},
        "deadline_and_metadata": {"timeout": 60.0, "metadata": metadata},
    }
    rates = {name: [] for name in variants}
    with (
        tempfile.TemporaryDirectory() as log_dir,
        grpc_ceiling.ceiling_server(row_bytes, Path(log_dir)) as channel,
    ):
        call = channel.unary_unary(grpc_ceiling.METHOD)
        request = bytes(rows * grpc_ceiling.ID_BYTES)
        for _ in range(200):
            call(request)
        for _ in range(repeats):  # the variants alternate, so drift hits them alike
            for name, options in variants.items():
                start = time.perf_counter()
                for _ in range(calls):
                    call(request, **options)
                rates[name].append(calls / (time.perf_counter() - start))
    return {f"grpc_calls_per_s_{name}": statistics.median(values) for name, values in rates.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--part-config", required=True, help="a homogeneous graph's partition config")
    parser.add_argument("--part-id", type=int, default=1)
    parser.add_argument("--tensor", default="feat")
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    handler = handler_cost(args.part_config, args.part_id, args.tensor, args.rows, args.calls)
    scheme = json.loads(Path(args.part_config).read_text())["node_feats"]["_N"][args.tensor]
    row_bytes = 4 * int(np.prod(scheme["shape"], dtype=np.int64))
    figures = {
        **{k: v for k, v in handler.items() if k != "profile"},
        **grpc_cost(args.rows, row_bytes, 300, args.repeats),
    }
    print(handler["profile"])
    print(json.dumps({k: round(v, 1) for k, v in figures.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
