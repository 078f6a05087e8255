"""Reading a partitioning written by DGL's ``dgl.distributed.partition_graph`` (DGL 1.x / 2.x): its
``NAME.json`` and its per-partition tensor files ``node_feat.dgl`` / ``edge_feat.dgl``.

DGL's config (the keys graphstore reads):

    graph_name, num_nodes, num_edges, num_parts, part_method, halo_hops,
    ntypes {ntype: type ID}, etypes {"src:etype:dst": type ID} (absent on old homogeneous configs),
    node_map {ntype: [[start, end) per partition]}, edge_map {"src:etype:dst": [[start, end) ...]}
        (ranges of the global homogeneous IDs, the same layout as graphstore's partition book),
    part-K {node_feats, edge_feats, part_graph}: file paths relative to the config.

DGL's tensor files (``dgl.data.utils.save_tensors``, little-endian): ``uint64`` magic
``0xDD5A9FBE3FA2443F``, ``uint64`` count, ``uint64`` count again (the vector's length), then per tensor
its name (``uint64`` length + UTF-8 bytes) and the array: ``uint64`` magic ``0xDD5E40F096B4A13F``,
``uint64`` reserved, ``int32`` device type + ``int32`` device ID (the CPU), ``int32`` ndim, the dtype
(``uint8`` code: 0 int, 1 uint, 2 float, 4 bfloat; ``uint8`` bits; ``uint16`` lanes), ``int64`` shape
per dimension, ``int64`` byte size, the row-major data. DGL stores boolean arrays as uint8. Keys are
``"ntype/name"`` and ``"src:etype:dst/name"`` (older DGL: ``"etype/name"``).

``graph.dgl`` (DGL's graph serialization) is not read here: ``graphstore convert --from-dgl`` reads it
through DGL (see :mod:`graphstore.launcher.dgl_convert`).
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

import numpy as np

from graphstore.errors import ConfigError
from graphstore.partition.book import RangePartitionBook
from graphstore.types import DEFAULT_CANONICAL_ETYPE, DEFAULT_ETYPE, DEFAULT_NTYPE, etype_key

TENSORS_MAGIC = 0xDD5A9FBE3FA2443F
NDARRAY_MAGIC = 0xDD5E40F096B4A13F
# (type code, bits) -> numpy dtype; DGL writes booleans as uint8.
_DTYPES = {
    (0, 8): np.int8,
    (0, 16): np.int16,
    (0, 32): np.int32,
    (0, 64): np.int64,
    (1, 1): np.bool_,
    (1, 8): np.uint8,
    (1, 16): np.uint16,
    (1, 32): np.uint32,
    (1, 64): np.uint64,
    (2, 16): np.float16,
    (2, 32): np.float32,
    (2, 64): np.float64,
    (4, 16): np.uint16,  # bfloat16 bits; read_dgl_tensors reports them as "bfloat16"
    (6, 8): np.bool_,
}


def read_json_config(config_path: str) -> dict[str, Any]:
    """A partition config's json object (graphstore's or DGL's), unchecked.

    Raises:
        FileNotFoundError: a missing file.
        ConfigError: not valid json, or not an object.
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
    return config


def is_dgl_config(config: dict[str, Any]) -> bool:
    """Whether a parsed partition config is DGL's (not graphstore's, which has ``format_version``)."""
    return "format_version" not in config and "node_map" in config and "num_parts" in config


def _ranges(value, what: str, num_parts: int, path: str) -> list[list[int]]:
    if (
        not isinstance(value, list)
        or len(value) != num_parts
        or not all(isinstance(r, list) and len(r) == 2 for r in value)
    ):
        raise TypeError(
            f"DGL partition config {path!r}: {what} must list one [start, end) range per partition "
            f"({num_parts}); got {type(value).__name__} (DGL's older per-ID maps are not supported)"
        )
    return [[int(r[0]), int(r[1])] for r in value]


def _canonical_key(key: str, ntypes: dict[str, int], path: str) -> str:
    if key.count(":") == 2:
        return key
    if key == DEFAULT_ETYPE and list(ntypes) == [DEFAULT_NTYPE]:
        return etype_key(DEFAULT_CANONICAL_ETYPE)
    raise ConfigError(
        f"DGL partition config {path!r}: edge type {key!r} is not canonical ('src:etype:dst'); "
        "re-partition with DGL >= 1.0, which writes canonical edge types"
    )


def read_dgl_config(config_path: str) -> dict[str, Any]:
    """Read and check DGL's partition config.

    Returns:
        ``{"graph_name", "num_nodes", "num_edges", "num_parts", "part_method", "halo_hops", "ntypes",
        "etypes", "node_map", "edge_map", "parts"}``: types and maps keyed by node type and canonical
        ``"src:etype:dst"``; ``parts`` lists per partition the absolute paths ``node_feats``,
        ``edge_feats``, ``part_graph``.

    Raises:
        FileNotFoundError: a missing file.
        ConfigError: not valid json, not DGL's config, or a missing field.
        TypeError: ``node_map`` / ``edge_map`` not in DGL 1.x / 2.x's range form.
    """
    raw = read_json_config(config_path)
    if not is_dgl_config(raw):
        raise ConfigError(f"{config_path!r} is not a DGL partition config (node_map, num_parts, ...)")
    missing = [k for k in ("graph_name", "num_nodes", "num_edges", "edge_map") if k not in raw]
    if missing:
        raise ConfigError(f"DGL partition config {config_path!r} lacks fields {missing}")
    num_parts = int(raw["num_parts"])
    node_map, edge_map = raw["node_map"], raw["edge_map"]
    if not isinstance(node_map, dict) or not isinstance(edge_map, dict):
        raise TypeError(
            f"DGL partition config {config_path!r}: node_map / edge_map must map each type to its ranges "
            f"(DGL >= 0.8); got {type(node_map).__name__} / {type(edge_map).__name__}"
        )
    ntypes = {str(k): int(v) for k, v in raw.get("ntypes", {DEFAULT_NTYPE: 0}).items()}
    etypes_raw = raw.get("etypes", {etype_key(DEFAULT_CANONICAL_ETYPE): 0})
    etypes = {_canonical_key(k, ntypes, config_path): int(v) for k, v in etypes_raw.items()}
    node_ranges = {t: _ranges(r, f"node_map[{t!r}]", num_parts, config_path) for t, r in node_map.items()}
    edge_ranges = {
        _canonical_key(t, ntypes, config_path): _ranges(r, f"edge_map[{t!r}]", num_parts, config_path)
        for t, r in edge_map.items()
    }
    base = os.path.dirname(os.path.abspath(config_path))
    parts = []
    for k in range(num_parts):
        entry = raw.get(f"part-{k}")
        if not isinstance(entry, dict):
            raise ConfigError(f"DGL partition config {config_path!r} lacks part-{k}")
        parts.append({name: os.path.join(base, str(entry[name])) for name in entry})
    return {
        "graph_name": raw["graph_name"],
        "num_nodes": int(raw["num_nodes"]),
        "num_edges": int(raw["num_edges"]),
        "num_parts": num_parts,
        "part_method": raw.get("part_method", "metis"),
        "halo_hops": int(raw.get("halo_hops", 1)),
        "ntypes": ntypes,
        "etypes": etypes,
        "node_map": node_ranges,
        "edge_map": edge_ranges,
        "parts": parts,
    }


def dgl_partition_book(config: dict[str, Any], part_id: int = 0) -> RangePartitionBook:
    """The :class:`RangePartitionBook` of a config :func:`read_dgl_config` returned.

    Raises:
        ValueError: ``part_id`` out of range, or maps that do not tile the ID spaces.
    """
    if not 0 <= int(part_id) < config["num_parts"]:
        raise ValueError(f"part_id={part_id} out of range [0, {config['num_parts']})")
    ntypes = sorted(config["ntypes"], key=config["ntypes"].get)
    etypes = sorted(config["etypes"], key=config["etypes"].get)
    return RangePartitionBook.from_maps(
        int(part_id),
        config["node_map"],
        config["edge_map"],
        ntypes,
        [tuple(key.split(":")) for key in etypes],
        graph_name=config["graph_name"],
    )


def _read(fh, fmt: str, path: str):
    size = struct.calcsize(fmt)
    data = fh.read(size)
    if len(data) != size:
        raise ConfigError(f"DGL tensor file {path!r} ends early")
    return struct.unpack(fmt, data)


def read_dgl_tensors(path: str) -> dict[str, tuple[np.ndarray, str]]:
    """The named arrays of a DGL tensor file (``node_feat.dgl`` / ``edge_feat.dgl``).

    Returns:
        ``{name: (array, dtype name)}`` in file order; the dtype name is numpy's, or ``"bfloat16"`` for
        bfloat16 arrays (returned as their uint16 bits).

    Raises:
        FileNotFoundError: a missing file.
        ConfigError: not a DGL tensor file, an unknown dtype, or a truncated file.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"DGL tensor file {path!r} not found")
    out: dict[str, tuple[np.ndarray, str]] = {}
    with open(path, "rb") as fh:
        magic, _count = _read(fh, "<QQ", path)
        if magic != TENSORS_MAGIC:
            raise ConfigError(f"{path!r} is not a DGL tensor file (magic {magic:#x})")
        (length,) = _read(fh, "<Q", path)
        for _ in range(length):
            (name_size,) = _read(fh, "<Q", path)
            name = fh.read(name_size).decode("utf-8")
            magic, _reserved, _device, _device_id, ndim = _read(fh, "<QQiii", path)
            if magic != NDARRAY_MAGIC:
                raise ConfigError(f"{path!r}: array {name!r} has a bad header")
            code, bits, _lanes = _read(fh, "<BBH", path)
            dtype = _DTYPES.get((code, bits))
            if dtype is None:
                raise ConfigError(f"{path!r}: array {name!r} has an unknown dtype (code {code}, {bits} bits)")
            shape = _read(fh, f"<{ndim}q", path) if ndim else ()
            (nbytes,) = _read(fh, "<q", path)
            data = fh.read(nbytes)
            if len(data) != nbytes:
                raise ConfigError(f"DGL tensor file {path!r} ends early (array {name!r})")
            array = np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)
            out[name] = (array, "bfloat16" if code == 4 else np.dtype(dtype).name)
    return out


__all__ = ["dgl_partition_book", "is_dgl_config", "read_dgl_config", "read_dgl_tensors"]
