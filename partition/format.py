"""Reading the on-disk partition format: ``NAME.json`` and its ``partK/`` folders of ``.npy`` arrays.

The layout is described in :mod:`graphstore.partition.types` and docs/partition-format.md. Every
array is opened with ``mmap_mode='r'``, so loading a partition costs page-cache, not a copy.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from graphstore.dtypes import BY_NAME
from graphstore.errors import ConfigError
from graphstore.partition.book import RangePartitionBook
from graphstore.partition.types import (
    DEFAULT_ETYPE,
    DEFAULT_NTYPE,
    FORMAT_VERSION,
    FeatureScheme,
    PartitionData,
)

STRUCTURE_ARRAYS = ("in_indptr", "in_src", "out_indptr", "out_dst", "out_eid", "orig_nid", "orig_eid")
NODE_FEAT_DIR = "node_feat"
EDGE_FEAT_DIR = "edge_feat"


def read_config(config_path: str) -> dict[str, Any]:
    """Read and validate a partition config (``NAME.json``).

    Args:
        config_path: path of the json file.

    Returns:
        The parsed config.

    Raises:
        FileNotFoundError: the file does not exist.
        ConfigError: it is not valid json, lacks a field, or has an unsupported format version.
    """
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"partition config {config_path!r} not found")
    try:
        with open(config_path) as fh:
            config = json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"partition config {config_path!r} is not valid json: {exc}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"partition config {config_path!r} must hold a json object")
    required = (
        "format_version",
        "graph_name",
        "num_nodes",
        "num_edges",
        "num_parts",
        "node_map",
        "edge_map",
        "parts",
    )
    missing = [k for k in required if k not in config]
    if missing:
        raise ConfigError(f"partition config {config_path!r} lacks fields {missing}")
    if config["format_version"] != FORMAT_VERSION:
        raise ConfigError(
            f"partition config {config_path!r}: format_version={config['format_version']!r}; "
            f"this graphstore reads version {FORMAT_VERSION}"
        )
    num_parts = config["num_parts"]
    for key, type_name in (("node_map", DEFAULT_NTYPE), ("edge_map", DEFAULT_ETYPE)):
        ranges = config[key].get(type_name) if isinstance(config[key], dict) else None
        if not isinstance(ranges, list) or len(ranges) != num_parts:
            raise ConfigError(
                f"partition config {config_path!r}: {key}.{type_name} must list {num_parts} ranges"
            )
    if not isinstance(config["parts"], list) or len(config["parts"]) != num_parts:
        raise ConfigError(f"partition config {config_path!r}: parts must list {num_parts} entries")
    for section in ("node_feats", "edge_feats"):
        for name, scheme in config.get(section, {}).items():
            if scheme.get("dtype") not in BY_NAME:
                raise ConfigError(
                    f"partition config {config_path!r}: {section}.{name}.dtype={scheme.get('dtype')!r} "
                    "is not supported"
                )
    return config


def _bounds_from_ranges(ranges: list[list[int]], what: str, config_path: str) -> np.ndarray:
    bounds = [0]
    for k, (start, end) in enumerate(ranges):
        if start != bounds[-1] or end < start:
            raise ConfigError(
                f"partition config {config_path!r}: {what} range {k} is [{start}, {end}); "
                f"expected it to start "
                f"at {bounds[-1]}"
            )
        bounds.append(end)
    return np.asarray(bounds, dtype=np.int64)


def book_from_config(config: dict[str, Any], part_id: int = 0, config_path: str = "") -> RangePartitionBook:
    """Build the :class:`RangePartitionBook` described by a parsed config.

    Raises:
        ConfigError: if the ranges are not contiguous or disagree with num_nodes / num_edges.
    """
    node_bounds = _bounds_from_ranges(config["node_map"][DEFAULT_NTYPE], "node_map", config_path)
    edge_bounds = _bounds_from_ranges(config["edge_map"][DEFAULT_ETYPE], "edge_map", config_path)
    if node_bounds[-1] != config["num_nodes"] or edge_bounds[-1] != config["num_edges"]:
        raise ConfigError(
            f"partition config {config_path!r}: ranges end at {int(node_bounds[-1])} nodes / "
            f"{int(edge_bounds[-1])} edges but num_nodes={config['num_nodes']}, "
            f"num_edges={config['num_edges']}"
        )
    return RangePartitionBook(node_bounds, edge_bounds, part_id=part_id, graph_name=config["graph_name"])


def load_partition_book(config_path: str, part_id: int = 0) -> RangePartitionBook:
    """Load the partition book of a partitioned graph.

    Args:
        config_path: the ``NAME.json`` written by :func:`graphstore.partition.partition_graph`.
        part_id: the partition the book is used from (its ``partid``).

    Returns:
        The :class:`RangePartitionBook`.

    Raises:
        FileNotFoundError, ConfigError: see :func:`read_config`.
        ValueError: ``part_id`` out of range.
    """
    config = read_config(config_path)
    _check_part_id(part_id, config, config_path)
    return book_from_config(config, part_id, config_path)


def _check_part_id(part_id: int, config: dict[str, Any], config_path: str) -> None:
    if isinstance(part_id, bool) or not isinstance(part_id, (int, np.integer)):
        raise TypeError(f"part_id must be an int, got {part_id!r}")
    if not 0 <= int(part_id) < config["num_parts"]:
        raise ValueError(f"part_id={part_id} out of range [0, {config['num_parts']}) for {config_path!r}")


def _open(path: str) -> np.ndarray:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"partition file {path!r} not found")
    return np.load(path, mmap_mode="r", allow_pickle=False)


def _schemes(section: dict[str, Any]) -> dict[str, FeatureScheme]:
    return {
        name: FeatureScheme(
            name=name, dtype=spec["dtype"], shape=tuple(int(d) for d in spec.get("shape", []))
        )
        for name, spec in section.items()
    }


def load_partition(config_path: str, part_id: int) -> PartitionData:
    """Load one partition, memory-mapped read-only.

    Args:
        config_path: the ``NAME.json`` written by :func:`graphstore.partition.partition_graph`.
        part_id: which partition.

    Returns:
        A :class:`~graphstore.partition.types.PartitionData`: the partition book (``partid == part_id``),
        the owned node range ``[node_start, node_end)`` and edge range ``[edge_start, edge_end)``, the
        in-edge CSR (``in_indptr`` over local destinations, ``in_src`` global sources; the edge at position
        ``j`` has global ID ``edge_start + j``), the out-edge CSR (``out_indptr`` over local sources,
        ``out_dst``/``out_eid`` global), the original IDs ``orig_nid``/``orig_eid`` of the local nodes and
        edges, and the feature arrays (storage dtype: bfloat16 as uint16) with their schemes. All arrays
        are read-only ``np.memmap`` views of the files.

    Raises:
        FileNotFoundError: the config or a partition file is missing.
        ConfigError: the config is invalid or a file disagrees with it.
        ValueError: ``part_id`` is out of range.
    """
    config = read_config(config_path)
    _check_part_id(part_id, config, config_path)
    part_id = int(part_id)
    book = book_from_config(config, part_id, config_path)
    base = os.path.dirname(os.path.abspath(config_path))
    part_dir = os.path.join(base, config["parts"][part_id]["path"])
    arrays = {name: _open(os.path.join(part_dir, f"{name}.npy")) for name in STRUCTURE_ARRAYS}
    node_start, node_end = book.node_range(part_id)
    edge_start, edge_end = book.edge_range(part_id)
    n_local, e_local = node_end - node_start, edge_end - edge_start
    expected = {
        "in_indptr": n_local + 1,
        "in_src": e_local,
        "out_indptr": n_local + 1,
        "orig_nid": n_local,
        "orig_eid": e_local,
    }
    for name, rows in expected.items():
        if arrays[name].shape[0] != rows:
            raise ConfigError(
                f"partition {part_id} of {config_path!r}: {name}.npy has {arrays[name].shape[0]} rows, "
                f"expected {rows}"
            )
    node_schemes = _schemes(config.get("node_feats", {}))
    edge_schemes = _schemes(config.get("edge_feats", {}))
    node_feats = _load_feats(part_dir, NODE_FEAT_DIR, node_schemes, n_local, part_id, config_path)
    edge_feats = _load_feats(part_dir, EDGE_FEAT_DIR, edge_schemes, e_local, part_id, config_path)
    return PartitionData(
        part_id=part_id,
        graph_name=config["graph_name"],
        book=book,
        node_start=node_start,
        node_end=node_end,
        edge_start=edge_start,
        edge_end=edge_end,
        in_indptr=arrays["in_indptr"],
        in_src=arrays["in_src"],
        out_indptr=arrays["out_indptr"],
        out_dst=arrays["out_dst"],
        out_eid=arrays["out_eid"],
        orig_nid=arrays["orig_nid"],
        orig_eid=arrays["orig_eid"],
        node_feats=node_feats,
        edge_feats=edge_feats,
        node_schemes=node_schemes,
        edge_schemes=edge_schemes,
        config_path=os.path.abspath(config_path),
    )


def _load_feats(
    part_dir: str, sub: str, schemes: dict[str, FeatureScheme], rows: int, part_id: int, config_path: str
) -> dict[str, np.ndarray]:
    feats = {}
    for name, scheme in schemes.items():
        arr = _open(os.path.join(part_dir, sub, f"{name}.npy"))
        storage = BY_NAME[scheme.dtype].storage
        if arr.shape != (rows, *scheme.shape) or arr.dtype != storage:
            raise ConfigError(
                f"partition {part_id} of {config_path!r}: {sub}/{name}.npy is {arr.dtype}{list(arr.shape)}, "
                f"expected {storage}{[rows, *scheme.shape]}"
            )
        feats[name] = arr
    return feats
