"""Reading the on-disk partition format: ``NAME.json`` and its ``partK/`` folders of ``.npy`` arrays.

The layout is described in :mod:`graphstore.partition.types` and docs/partition-format.md. Format 2
(typed graphs; a homogeneous graph is the one-type case) and format 1 (homogeneous graphs written
before types existed) both load, into the same :class:`~graphstore.partition.types.PartitionData`.
Every array is opened with ``mmap_mode='r'``, so loading a partition costs page-cache, not a copy.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from graphstore.dtypes import BY_NAME
from graphstore.errors import ConfigError
from graphstore.partition.book import RangePartitionBook
from graphstore.partition.dgl_format import (
    dgl_partition_book,
    is_dgl_config,
    read_dgl_config,
    read_json_config,
)
from graphstore.partition.types import READABLE_FORMAT_VERSIONS, FeatureScheme, PartitionData
from graphstore.types import DEFAULT_CANONICAL_ETYPE, DEFAULT_ETYPE, DEFAULT_NTYPE, GraphSchema, etype_key

STRUCTURE_ARRAYS = ("in_indptr", "in_src", "out_indptr", "out_dst", "out_eid", "orig_nid", "orig_eid")
# Optional: the local edge ID of each in-edge position where the IDs are not the positions.
IN_EID = "in_eid"
NODE_FEAT_DIR = "node_feat"
EDGE_FEAT_DIR = "edge_feat"
_REQUIRED = (
    "format_version",
    "graph_name",
    "num_nodes",
    "num_edges",
    "num_parts",
    "node_map",
    "edge_map",
    "parts",
)


def feature_file(part_dir: str, sub: str, schema: GraphSchema, type_key: str, name: str) -> str:
    """Where a node or edge array of a type lives in a partition folder: ``node_feat/NAME.npy`` on a
    homogeneous graph (format 1's place), ``node_feat/TYPE/NAME.npy`` on a typed one."""
    if schema.is_homogeneous:
        return os.path.join(part_dir, sub, f"{name}.npy")
    return os.path.join(part_dir, sub, type_key, f"{name}.npy")


def read_config(config_path: str) -> dict[str, Any]:
    """Read and validate a partition config (``NAME.json``), format 1 or 2.

    A format 1 config comes back in format 2's shape (``ntypes``, ``etypes`` keyed ``"_N:_E:_N"``,
    features nested under their type), so the rest of the loader reads one shape.

    Raises:
        FileNotFoundError: the file does not exist.
        ConfigError: it is not valid json, lacks a field, or has an unsupported format version.
    """
    config = read_json_config(config_path)
    if is_dgl_config(config):
        raise ConfigError(
            f"{config_path!r} is a partitioning written by DGL: load_partition_book reads it; to serve it, "
            f"convert it first: graphstore convert --from-dgl {config_path} --out DIR"
        )
    missing = [k for k in _REQUIRED if k not in config]
    if missing:
        raise ConfigError(f"partition config {config_path!r} lacks fields {missing}")
    if config["format_version"] not in READABLE_FORMAT_VERSIONS:
        raise ConfigError(
            f"partition config {config_path!r}: format_version={config['format_version']!r}; "
            f"this graphstore reads versions {list(READABLE_FORMAT_VERSIONS)}"
        )
    if config["format_version"] == 1:
        config = _upgrade_v1(config)
    try:
        schema = schema_of(config)
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"partition config {config_path!r}: bad ntypes / etypes: {exc}") from None
    num_parts = config["num_parts"]
    for key, names in (
        ("node_map", schema.ntypes),
        ("edge_map", [etype_key(c) for c in schema.canonical_etypes]),
    ):
        for name in names:
            ranges = config[key].get(name) if isinstance(config[key], dict) else None
            if not isinstance(ranges, list) or len(ranges) != num_parts:
                raise ConfigError(
                    f"partition config {config_path!r}: {key}.{name} must list {num_parts} ranges"
                )
    if not isinstance(config["parts"], list) or len(config["parts"]) != num_parts:
        raise ConfigError(f"partition config {config_path!r}: parts must list {num_parts} entries")
    for section in ("node_feats", "edge_feats"):
        for type_key, features in config.get(section, {}).items():
            for name, scheme in features.items():
                if scheme.get("dtype") not in BY_NAME:
                    raise ConfigError(
                        f"partition config {config_path!r}: {section}.{type_key}.{name}.dtype="
                        f"{scheme.get('dtype')!r} is not supported"
                    )
    return config


def _upgrade_v1(config: dict[str, Any]) -> dict[str, Any]:
    """A format 1 (homogeneous) config in format 2's shape."""
    key = etype_key(DEFAULT_CANONICAL_ETYPE)
    upgraded = dict(config)
    upgraded["ntypes"] = {DEFAULT_NTYPE: 0}
    upgraded["etypes"] = {key: 0}
    if isinstance(config["edge_map"], dict) and DEFAULT_ETYPE in config["edge_map"]:
        upgraded["edge_map"] = {key: config["edge_map"][DEFAULT_ETYPE]}
    upgraded["node_feats"] = {DEFAULT_NTYPE: config.get("node_feats", {})}
    upgraded["edge_feats"] = {key: config.get("edge_feats", {})}
    return upgraded


def schema_of(config: dict[str, Any]) -> GraphSchema:
    """The :class:`GraphSchema` of a (format 2 shaped) config: types ordered by their IDs."""
    ntypes = sorted(config["ntypes"], key=lambda name: config["ntypes"][name])
    etypes = sorted(config["etypes"], key=lambda name: config["etypes"][name])
    return GraphSchema(tuple(ntypes), tuple(tuple(key.split(":")) for key in etypes))


def book_from_config(config: dict[str, Any], part_id: int = 0, config_path: str = "") -> RangePartitionBook:
    """Build the :class:`RangePartitionBook` described by a parsed config.

    Raises:
        ConfigError: ranges that do not tile the ID spaces or disagree with num_nodes / num_edges.
    """
    schema = schema_of(config)
    try:
        book = RangePartitionBook.from_maps(
            part_id,
            config["node_map"],
            config["edge_map"],
            schema.ntypes,
            schema.canonical_etypes,
            graph_name=config["graph_name"],
        )
    except ValueError as exc:
        raise ConfigError(f"partition config {config_path!r}: {exc}") from None
    if book.num_nodes() != config["num_nodes"] or book.num_edges() != config["num_edges"]:
        raise ConfigError(
            f"partition config {config_path!r}: ranges end at {book.num_nodes()} nodes / "
            f"{book.num_edges()} edges but num_nodes={config['num_nodes']}, num_edges={config['num_edges']}"
        )
    return book


def load_partition_book(config_path: str, part_id: int = 0) -> RangePartitionBook:
    """Load the partition book of a partitioned graph (graphstore's or DGL's partitioning).

    Args:
        config_path: the ``NAME.json`` written by :func:`graphstore.partition.partition_graph`, or by
            DGL's ``partition_graph`` (see :mod:`graphstore.partition.dgl_format`).
        part_id: the partition the book is used from (its ``partid``).

    Returns:
        The :class:`RangePartitionBook`.

    Raises:
        FileNotFoundError, ConfigError: see :func:`read_config`.
        TypeError: a DGL config in one of DGL's older map forms.
        ValueError: ``part_id`` out of range.
    """
    if is_dgl_config(read_json_config(config_path)):
        return dgl_partition_book(read_dgl_config(config_path), part_id)
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


def _schemes(section: dict[str, Any]) -> dict[str, dict[str, FeatureScheme]]:
    return {
        type_key: {
            name: FeatureScheme(
                name=name, dtype=spec["dtype"], shape=tuple(int(d) for d in spec.get("shape", []))
            )
            for name, spec in features.items()
        }
        for type_key, features in section.items()
    }


def load_partition(config_path: str, part_id: int) -> PartitionData:
    """Load one partition, memory-mapped read-only.

    Args:
        config_path: the ``NAME.json`` written by :func:`graphstore.partition.partition_graph`.
        part_id: which partition.

    Returns:
        A :class:`~graphstore.partition.types.PartitionData`: the partition book (``partid == part_id``),
        the schema, the owned homogeneous node and edge ranges with the per-type layout inside them,
        the in- and out-edge CSR of every edge type, the original per-type IDs of the local nodes and
        edges, and the feature arrays of every type (storage dtype: bfloat16 as uint16) with their
        schemes. All arrays are read-only ``np.memmap`` views of the files.

    Raises:
        FileNotFoundError: the config or a partition file is missing.
        ConfigError: the config is invalid or a file disagrees with it.
        ValueError: ``part_id`` is out of range.
    """
    config = read_config(config_path)
    _check_part_id(part_id, config, config_path)
    part_id = int(part_id)
    book = book_from_config(config, part_id, config_path)
    schema = book.schema
    base = os.path.dirname(os.path.abspath(config_path))
    part_dir = os.path.join(base, config["parts"][part_id]["path"])
    arrays = {name: _open(os.path.join(part_dir, f"{name}.npy")) for name in STRUCTURE_ARRAYS}
    in_eid_path = os.path.join(part_dir, f"{IN_EID}.npy")
    in_eid = _open(in_eid_path) if os.path.isfile(in_eid_path) else None
    node_start, node_end = book.node_range(part_id)
    edge_start, edge_end = book.edge_range(part_id)
    ntype_offsets = np.concatenate(([0], np.cumsum(book.ntype_counts[part_id]))).astype(np.int64)
    etype_offsets = np.concatenate(([0], np.cumsum(book.etype_counts[part_id]))).astype(np.int64)
    data = PartitionData(
        part_id=part_id,
        graph_name=config["graph_name"],
        book=book,
        schema=schema,
        node_start=node_start,
        node_end=node_end,
        edge_start=edge_start,
        edge_end=edge_end,
        ntype_offsets=ntype_offsets,
        etype_offsets=etype_offsets,
        in_indptr=arrays["in_indptr"],
        in_src=arrays["in_src"],
        out_indptr=arrays["out_indptr"],
        out_dst=arrays["out_dst"],
        out_eid=arrays["out_eid"],
        orig_nid=arrays["orig_nid"],
        orig_eid=arrays["orig_eid"],
        config_path=os.path.abspath(config_path),
        in_eid=in_eid,
    )
    in_len, out_len = data.expected_indptr_lengths()
    expected = {
        "in_indptr": in_len,
        "in_src": data.num_local_edges,
        "out_indptr": out_len,
        "orig_nid": data.num_local_nodes,
        "orig_eid": data.num_local_edges,
    }
    if in_eid is not None:
        arrays[IN_EID] = in_eid
        expected[IN_EID] = data.num_local_edges
    for name, rows in expected.items():
        if arrays[name].shape[0] != rows:
            raise ConfigError(
                f"partition {part_id} of {config_path!r}: {name}.npy has {arrays[name].shape[0]} rows, "
                f"expected {rows}"
            )
    data.node_schemes = _schemes(config.get("node_feats", {}))
    data.edge_schemes = _schemes(config.get("edge_feats", {}))
    node_rows = {t: int(book.ntype_counts[part_id][schema.ntype_id(t)]) for t in data.node_schemes}
    edge_rows = {k: int(book.etype_counts[part_id][schema.etype_id(k)]) for k in data.edge_schemes}
    data.node_feats = _load_feats(
        part_dir, NODE_FEAT_DIR, schema, data.node_schemes, node_rows, part_id, config_path
    )
    data.edge_feats = _load_feats(
        part_dir, EDGE_FEAT_DIR, schema, data.edge_schemes, edge_rows, part_id, config_path
    )
    return data


def _load_feats(
    part_dir: str,
    sub: str,
    schema: GraphSchema,
    schemes: dict[str, dict[str, FeatureScheme]],
    rows: dict[str, int],
    part_id: int,
    config_path: str,
) -> dict[str, dict[str, np.ndarray]]:
    feats: dict[str, dict[str, np.ndarray]] = {}
    for type_key, features in schemes.items():
        for name, scheme in features.items():
            arr = _open(feature_file(part_dir, sub, schema, type_key, name))
            storage = BY_NAME[scheme.dtype].storage
            if arr.shape != (rows[type_key], *scheme.shape) or arr.dtype != storage:
                raise ConfigError(
                    f"partition {part_id} of {config_path!r}: {sub}/{type_key}/{name}.npy is "
                    f"{arr.dtype}{list(arr.shape)}, expected {storage}{[rows[type_key], *scheme.shape]}"
                )
            feats.setdefault(type_key, {})[name] = arr
    return feats
