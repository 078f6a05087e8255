"""Checks of a partition on disk and once loaded: file sizes, array shapes and dtypes, CSR invariants.

A partition server validates its partition before serving (:func:`load_validated_partition`), and
``graphstore validate PART_CONFIG`` runs the same checks over every partition. A problem is one
:class:`PartitionFormatError` line naming the file and what is wrong, never a traceback or a crash
later in a request:

- :func:`check_partition_files`: every ``.npy`` file's header can be read and the file holds as many
  bytes as the header promises (a truncated copy is caught before it is memory-mapped);
- :func:`check_partition_data`: the structure arrays are 1-D int64 of the lengths the partition book
  gives, each ``indptr`` starts at 0, never decreases and ends at its neighbor array's length, and
  node and edge IDs lie in the graph's ranges (feature arrays' rows, dtype and row shape against the
  JSON are checked by ``load_partition`` itself).

The checks read the arrays in chunks, so a large partition is validated in bounded memory. On a typed
graph the in- and out-edge CSR are one piece per edge type (over its destination / source type's local
nodes), each checked on its own; a homogeneous graph has one piece of each.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np

from graphstore.errors import ConfigError
from graphstore.partition.format import (
    EDGE_FEAT_DIR,
    NODE_FEAT_DIR,
    STRUCTURE_ARRAYS,
    feature_file,
    load_partition,
    read_config,
    schema_of,
)
from graphstore.partition.types import PartitionData

# Elements read at once by the range and order checks (64 MiB of int64).
CHUNK = 8 * 1024 * 1024


class PartitionFormatError(ConfigError):
    """A partition file is missing, truncated, or disagrees with the partition config; the message
    names the file and the problem."""


def _chunks(n: int, size: int = CHUNK) -> Iterator[slice]:
    for lo in range(0, n, size):
        yield slice(lo, min(lo + size, n))


def _npy_data_bytes(path: str) -> tuple[int, int]:
    """``(bytes the header promises, bytes the file holds after the header)`` of a ``.npy`` file.

    Raises:
        PartitionFormatError: the header cannot be read.
    """
    try:
        with open(path, "rb") as handle:
            version = np.lib.format.read_magic(handle)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
            else:
                shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
            offset = handle.tell()
    except OSError as exc:
        raise PartitionFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (ValueError, SyntaxError, TypeError) as exc:
        raise PartitionFormatError(f"{path}: not a valid .npy file ({exc})") from None
    if dtype.hasobject:
        raise PartitionFormatError(f"{path}: holds Python objects, not numbers")
    expected = int(np.prod(shape, dtype=object)) * dtype.itemsize
    return expected, os.path.getsize(path) - offset


def partition_files(config_path: str, part_id: int) -> list[str]:
    """Every ``.npy`` file partition ``part_id`` of ``config_path`` is made of (structure and features)."""
    config = read_config(config_path)
    base = os.path.dirname(os.path.abspath(config_path))
    part_dir = os.path.join(base, config["parts"][part_id]["path"])
    schema = schema_of(config)
    files = [os.path.join(part_dir, f"{name}.npy") for name in STRUCTURE_ARRAYS]
    for sub, section in ((NODE_FEAT_DIR, "node_feats"), (EDGE_FEAT_DIR, "edge_feats")):
        for type_key, features in config.get(section, {}).items():
            files += [feature_file(part_dir, sub, schema, type_key, name) for name in features]
    return files


def check_partition_files(config_path: str, part_id: int) -> None:
    """Check that every file of a partition exists and holds the bytes its header promises.

    Raises:
        PartitionFormatError: naming the first missing, unreadable or truncated file.
    """
    for path in partition_files(config_path, part_id):
        if not os.path.isfile(path):
            raise PartitionFormatError(f"{path}: missing (partition {part_id} of {config_path})")
        expected, held = _npy_data_bytes(path)
        if held < expected:
            raise PartitionFormatError(
                f"{path}: truncated: the header promises {expected} bytes of data, the file holds {held}"
            )


def check_indptr(indptr: np.ndarray, num_rows: int, first: int, last: int, where: str) -> None:
    """A CSR row pointer: ``num_rows + 1`` entries from ``first``, never decreasing, ending at ``last``.

    Raises:
        PartitionFormatError: naming ``where`` and the first position that breaks a rule.
    """
    check_ids_array(indptr, num_rows + 1, where)
    if len(indptr) == 0:
        return
    if int(indptr[0]) != first:
        raise PartitionFormatError(f"{where}: starts at {int(indptr[0])}, expected {first}")
    previous = first
    for sl in _chunks(len(indptr)):
        part = np.asarray(indptr[sl])
        steps = np.diff(part, prepend=previous)
        bad = np.flatnonzero(steps < 0)
        if len(bad):
            at = sl.start + int(bad[0])
            raise PartitionFormatError(
                f"{where}: decreases at position {at} ({int(indptr[at - 1])} -> {int(indptr[at])})"
            )
        previous = part[-1]
    if int(indptr[-1]) != last:
        raise PartitionFormatError(f"{where}: ends at {int(indptr[-1])}, expected {last}")


def check_ids_array(array: np.ndarray, length: int, where: str) -> None:
    """A 1-D int64 array of ``length`` entries.

    Raises:
        PartitionFormatError: another dtype, rank or length.
    """
    if array.dtype != np.int64 or array.ndim != 1:
        raise PartitionFormatError(f"{where}: is {array.dtype}{list(array.shape)}, expected 1-D int64")
    if len(array) != length:
        raise PartitionFormatError(f"{where}: has {len(array)} entries, expected {length}")


def check_id_range(array: np.ndarray, low: int, high: int, where: str, what: str) -> None:
    """Every entry in ``[low, high)``.

    Raises:
        PartitionFormatError: naming the first entry out of range.
    """
    for sl in _chunks(len(array)):
        part = np.asarray(array[sl])
        bad = np.flatnonzero((part < low) | (part >= high))
        if len(bad):
            at = sl.start + int(bad[0])
            raise PartitionFormatError(
                f"{where}: entry {at} is {what} {int(array[at])}, outside [{low}, {high})"
            )


def check_partition_data(data: PartitionData) -> None:
    """Check a loaded partition's structure and feature arrays (see the module docstring).

    Raises:
        PartitionFormatError: naming the file (``partK/NAME.npy``) and the first problem.
    """
    folder = f"partition {data.part_id} of {data.config_path}"
    n, e = data.num_local_nodes, data.num_local_edges
    num_nodes = int(np.asarray(data.book.node_bounds)[-1])
    num_edges = int(np.asarray(data.book.edge_bounds)[-1])
    in_len, out_len = data.expected_indptr_lengths()
    check_ids_array(data.in_indptr, in_len, f"{folder}: in_indptr.npy")
    check_ids_array(data.out_indptr, out_len, f"{folder}: out_indptr.npy")
    schema, node_counts = data.schema, np.diff(data.ntype_offsets)
    num_out, typed = len(data.out_dst), not schema.is_homogeneous
    out_start = 0
    for t, canonical in enumerate(schema.canonical_etypes):
        label = f" (edge type {':'.join(canonical)})" if typed else ""
        rows_in = int(node_counts[schema.ntype_id(canonical[2])])
        check_indptr(
            np.asarray(data.in_indptr_of(t)),
            rows_in,
            int(data.etype_offsets[t]),
            int(data.etype_offsets[t + 1]),
            f"{folder}: in_indptr.npy{label}",
        )
        out_piece = np.asarray(data.out_indptr_of(t))
        out_end = int(out_piece[-1]) if len(out_piece) else out_start
        check_indptr(
            out_piece,
            int(node_counts[schema.ntype_id(canonical[0])]),
            out_start,
            out_end,
            f"{folder}: out_indptr.npy{label}",
        )
        out_start = out_end
    if out_start != num_out:
        raise PartitionFormatError(
            f"{folder}: out_indptr.npy: ends at {out_start}, its neighbor array has {num_out}"
        )
    check_ids_array(data.in_src, e, f"{folder}: in_src.npy")
    check_id_range(data.in_src, 0, num_nodes, f"{folder}: in_src.npy", "node ID")
    check_ids_array(data.out_dst, num_out, f"{folder}: out_dst.npy")
    check_ids_array(data.out_eid, num_out, f"{folder}: out_eid.npy")
    check_id_range(data.out_dst, 0, num_nodes, f"{folder}: out_dst.npy", "node ID")
    check_id_range(data.out_eid, 0, num_edges, f"{folder}: out_eid.npy", "edge ID")
    check_ids_array(data.orig_nid, n, f"{folder}: orig_nid.npy")
    check_ids_array(data.orig_eid, e, f"{folder}: orig_eid.npy")
    if data.in_eid is not None:
        check_in_eid(np.asarray(data.in_eid), data.etype_offsets, f"{folder}: in_eid.npy")
    # Feature arrays are checked against the config's dtype and row shape by load_partition itself.


def check_in_eid(in_eid: np.ndarray, etype_offsets: np.ndarray, what: str) -> None:
    """The local edge IDs of the in-edge positions are a permutation that keeps each edge type's
    positions in its own range.

    Raises:
        PartitionFormatError: otherwise.
    """
    check_ids_array(in_eid, int(etype_offsets[-1]), what)
    for start, end in zip(etype_offsets[:-1], etype_offsets[1:], strict=True):
        piece = in_eid[start:end]
        if piece.size and (
            int(piece.min()) != start or int(piece.max()) != end - 1 or np.unique(piece).size != piece.size
        ):
            raise PartitionFormatError(
                f"{what}: positions [{start}, {end}) do not hold IDs {start}..{end - 1}"
            )


def load_validated_partition(config_path: str, part_id: int) -> PartitionData:
    """:func:`~graphstore.partition.load_partition` after :func:`check_partition_files`, then
    :func:`check_partition_data`.

    Raises:
        FileNotFoundError: the partition config is missing.
        ConfigError: (PartitionFormatError for a file) the partition is not valid.
        ValueError: ``part_id`` is out of range.
    """
    config = read_config(config_path)  # a missing or invalid config is reported as such first
    if isinstance(part_id, int) and 0 <= part_id < int(config["num_parts"]):
        check_partition_files(config_path, part_id)
    data = load_partition(config_path, part_id)
    check_partition_data(data)
    return data
