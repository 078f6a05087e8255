"""What the benchmarks share: their command line from a table of options, the servers of a local cluster
as cluster-config entries, the partitions of their graphs (made once, reused while the input is the
same), and their figures printed as JSON (and saved with ``--out``)."""

from __future__ import annotations

import argparse
import json
import os
import threading
from pathlib import Path

SOURCE_STAMP = "bench-source.json"


def ensure_partitions(
    graph: str | os.PathLike, name: str, num_parts: int, out: str | os.PathLike, **options
) -> str:
    """Partition the graph file ``graph`` into ``out`` once; returns the partition config's path.

    The one partition-cache rule of the benchmarks: the partitions in ``out`` are reused while the
    stamp written beside them (``bench-source.json``: the input's absolute path, size and modification
    time, the graph name, partition count and ``options``) is what this call would write; anything
    else (another input, an input rewritten since, other options, a run that died half-way) partitions
    again.

    Args:
        graph: the input graph file (``.npz``, edge list, typed ``.npz``).
        name: the graph name (``out/NAME.json``).
        num_parts: the partition count.
        out: the output folder.
        options: more keyword arguments of :func:`graphstore.partition.partition_graph`
            (``part_method``, ``balance_ntypes``, ``feat_dtype``...).
    """
    from graphstore.partition import partition_graph

    out = Path(out)
    source = Path(graph).resolve()
    info = source.stat()
    stamp = {
        "graph": str(source),
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
        "name": name,
        "num_parts": num_parts,
        "options": {key: options[key] for key in sorted(options)},
    }
    config = out / f"{name}.json"
    stamp_path = out / SOURCE_STAMP
    if config.is_file() and stamp_path.is_file():
        try:
            if json.loads(stamp_path.read_text()) == json.loads(json.dumps(stamp)):
                return str(config)
        except ValueError:
            pass  # a damaged stamp: partition again
    result = partition_graph(str(source), name, num_parts, str(out), overwrite=True, **options)
    stamp_path.write_text(json.dumps(stamp, indent=1) + "\n")
    return result.config_path


def emit_report(report: dict, out: str | None, indent: int = 2) -> None:
    """Print ``report`` as JSON on stdout and, when ``out`` is given, write the same text there.

    Args:
        report: the benchmark's figures.
        out: the ``--out`` path (its folder is created), or None / '' for stdout only.
        indent: JSON indentation.
    """
    text = json.dumps(report, indent=indent)
    print(text)
    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")


def parse_options(doc: str, options: list[tuple], argv=None) -> argparse.Namespace:
    """Parse a benchmark's command line.

    Args:
        doc: the benchmark's docstring (its ``--help`` text).
        options: ``(flag, type, default, help)`` of every option, in ``--help`` order.
        argv: the arguments (default: ``sys.argv[1:]``).
    """
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, kind, default, help_text in options:
        parser.add_argument(flag, type=kind, default=default, help=help_text)
    return parser.parse_args(argv)


def server_entries(addresses: list[str]) -> list[dict]:
    """The ``servers`` of a cluster config for servers at ``host:port`` addresses, in partition order."""
    return [
        {"host": a.rsplit(":", 1)[0], "port": int(a.rsplit(":", 1)[1]), "part_id": part_id}
        for part_id, a in enumerate(addresses)
    ]


class GpuBusy:
    """The GPU's busy share while a ``with`` block runs: NVML's utilization (the share of each interval in
    which a kernel ran) read in a thread every ``interval_s`` and averaged; None where NVML does not
    answer (no GPU, no pynvml)."""

    def __init__(self, device, interval_s: float = 0.01):
        import torch

        self.device = torch.device(device)
        self.interval_s = interval_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.available = self.device.type == "cuda" and _utilization(self.device) is not None

    def __enter__(self):
        if self.available:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            value = _utilization(self.device)
            if value is not None:
                self.samples.append(float(value))

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def share(self) -> float | None:
        return sum(self.samples) / (100.0 * len(self.samples)) if self.samples else None


def _utilization(device) -> float | None:
    import torch

    try:
        return torch.cuda.utilization(device)
    except Exception:  # noqa: BLE001 - no NVML (pynvml missing, no driver access): no reading
        return None
