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


def source_stamp(graph: str | os.PathLike, name: str, num_parts: int, **options) -> dict:
    """What partitions of the graph file ``graph`` are stamped with (``bench-source.json`` beside them):
    the input's absolute path, size and modification time, the graph name, partition count and
    ``options`` (the partitioner's settings).

    Raises:
        FileNotFoundError: no such graph file.
    """
    source = Path(graph).resolve()
    info = source.stat()
    return {
        "graph": str(source),
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
        "name": name,
        "num_parts": num_parts,
        "options": {key: options[key] for key in sorted(options)},
    }


def partitions_current(out: str | os.PathLike, stamp: dict) -> bool:
    """Whether the partitions in ``out`` (``out/NAME.json``) exist with ``stamp`` beside them.

    False for missing partitions or stamp, a damaged stamp, or one of another input or other options.
    """
    out = Path(out)
    if not (out / f"{stamp['name']}.json").is_file():
        return False
    try:
        return json.loads((out / SOURCE_STAMP).read_text()) == json.loads(json.dumps(stamp))
    except (OSError, ValueError):
        return False


def clear_source_stamp(out: str | os.PathLike) -> None:
    """Remove the stamp in ``out`` before its partitions are made again (a run that dies half-way leaves
    partitions that are not current)."""
    (Path(out) / SOURCE_STAMP).unlink(missing_ok=True)


def write_source_stamp(out: str | os.PathLike, stamp: dict) -> None:
    """Stamp the complete partitions in ``out`` (after their partitioner succeeded)."""
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / SOURCE_STAMP).write_text(json.dumps(stamp, indent=1) + "\n")


def ensure_partitions(
    graph: str | os.PathLike, name: str, num_parts: int, out: str | os.PathLike, **options
) -> str:
    """Partition the graph file ``graph`` into ``out`` once; returns the partition config's path.

    The one partition-cache rule of the benchmarks: the partitions in ``out`` are reused while the
    stamp written beside them (:func:`source_stamp`) is what this call would write; anything else
    (another input, an input rewritten since, other options, a run that died half-way) partitions
    again. ``bench/dgl/side_by_side.py`` applies the same rule to the partitions its partitioner
    commands make, graphstore's and DGL's.

    Args:
        graph: the input graph file (``.npz``, edge list, typed ``.npz``).
        name: the graph name (``out/NAME.json``).
        num_parts: the partition count.
        out: the output folder.
        options: more keyword arguments of :func:`graphstore.partition.partition_graph`
            (``part_method``, ``balance_ntypes``, ``feat_dtype``...).
    """
    from graphstore.partition import partition_graph

    stamp = source_stamp(graph, name, num_parts, **options)
    if partitions_current(out, stamp):
        return str(Path(out) / f"{name}.json")
    clear_source_stamp(out)
    result = partition_graph(stamp["graph"], name, num_parts, str(out), overwrite=True, **options)
    write_source_stamp(out, stamp)
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
