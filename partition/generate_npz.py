"""Streaming a generated graph into an ``.npz``: members written chunk by chunk, edge arrays spooled
through temporary files, and the output file appearing atomically.

Members are written with zip's default timestamp (1980-01-01), so the same arrays give the same bytes.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import zipfile
from collections.abc import Iterable, Iterator

import numpy as np


class NpzStream:
    """Writes ``.npy`` members into an uncompressed zip (an ``.npz``), each from a stream of chunks."""

    def __init__(self, path: str):
        self._zip = zipfile.ZipFile(path, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True)

    def write(self, name: str, dtype: np.dtype, shape: tuple[int, ...], chunks: Iterable[np.ndarray]) -> None:
        """Write member ``name.npy`` of ``dtype`` and ``shape`` from row chunks (one 0-d array for a scalar).

        Raises:
            RuntimeError: the chunks hold another number of rows than ``shape`` says.
        """
        header = {
            "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
            "fortran_order": False,
            "shape": shape,
        }
        with self._zip.open(f"{name}.npy", mode="w", force_zip64=True) as member:
            np.lib.format.write_array_header_2_0(member, header)
            written = 0
            for chunk in chunks:
                chunk = np.ascontiguousarray(chunk, dtype=dtype)
                member.write(memoryview(chunk).cast("B"))
                written += chunk.shape[0] if chunk.ndim else 1
        expected = shape[0] if shape else 1
        if written != expected:
            raise RuntimeError(f"npz member {name!r}: wrote {written} rows, expected {expected}")

    def close(self) -> None:
        self._zip.close()


@contextlib.contextmanager
def atomic_npz(out_path: str, overwrite: bool) -> Iterator[tuple[NpzStream, str]]:
    """Open an :class:`NpzStream` on a temporary file that replaces ``out_path`` when the block succeeds.

    Args:
        out_path: the ``.npz`` to write.
        overwrite: replace an existing file.

    Yields:
        The stream and the output's folder (for temporary spool files).

    Raises:
        ValueError: ``out_path`` does not end in ``.npz``.
        FileExistsError: ``out_path`` exists and not ``overwrite``.
    """
    if not out_path.endswith(".npz"):
        raise ValueError(f"output path must end in .npz, got {out_path!r}")
    if os.path.exists(out_path) and not overwrite:
        raise FileExistsError(f"output file {out_path!r} exists; pass overwrite=True (--overwrite)")
    folder = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp_npz = tempfile.mkstemp(prefix=".gen-", suffix=".npz.tmp", dir=folder)
    os.close(fd)
    try:
        writer = NpzStream(tmp_npz)
        try:
            yield writer, folder
        finally:
            writer.close()
        os.chmod(tmp_npz, 0o644)  # mkstemp's 0600 would hide the graph from other users
        os.replace(tmp_npz, out_path)
    except BaseException:
        if os.path.exists(tmp_npz):
            os.unlink(tmp_npz)
        raise


@contextlib.contextmanager
def _spool(folder: str, num_edges: int) -> Iterator[np.ndarray]:
    """An int64 [num_edges] array in a temporary ``.npy`` under ``folder``, removed afterwards."""
    fd, path = tempfile.mkstemp(prefix=".gen-spool-", suffix=".npy", dir=folder)
    os.close(fd)
    try:
        if num_edges:
            yield np.lib.format.open_memmap(path, mode="w+", dtype=np.int64, shape=(num_edges,))
        else:
            yield np.zeros(0, dtype=np.int64)
    finally:
        os.unlink(path)


def _spooled_sources(
    chunks: Iterable[tuple[np.ndarray, np.ndarray]], dst_store: np.ndarray, src_store: np.ndarray | None
) -> Iterator[np.ndarray]:
    """Yield the source chunks while storing destinations (and sources, when asked) in order."""
    offset = 0
    for src, dst in chunks:
        dst_store[offset : offset + dst.size] = dst
        if src_store is not None:
            src_store[offset : offset + src.size] = src
        offset += dst.size
        yield src


def _read_back(store: np.ndarray, chunk: int) -> Iterator[np.ndarray]:
    if isinstance(store, np.memmap):
        store.flush()
    return (store[i : i + chunk] for i in range(0, store.shape[0], chunk))


def write_edge_members(
    writer: NpzStream,
    chunks: Iterable[tuple[np.ndarray, np.ndarray]],
    num_edges: int,
    folder: str,
    names: tuple[str, str],
    reverse_names: tuple[str, str] | None = None,
    chunk: int = 1 << 22,
) -> None:
    """Write one relation's ``src`` and ``dst`` members from ``(src, dst)`` chunks, and optionally its
    reverse (source and destination swapped, same order).

    Sources stream straight into the zip; what is still to be written waits in temporary ``.npy``
    files under ``folder`` (destinations, and sources for the reverse), so memory stays at one chunk.

    Args:
        writer: the open stream.
        chunks: the relation's edges.
        num_edges: total number of edges in ``chunks``.
        folder: where the temporary files go.
        names: member names of the source and destination arrays.
        reverse_names: member names of the reverse relation's source and destination arrays.
        chunk: rows per chunk when reading the temporary files back.
    """
    with contextlib.ExitStack() as stack:
        dst_store = stack.enter_context(_spool(folder, num_edges))
        src_store = stack.enter_context(_spool(folder, num_edges)) if reverse_names else None
        writer.write(names[0], np.int64, (num_edges,), _spooled_sources(chunks, dst_store, src_store))
        writer.write(names[1], np.int64, (num_edges,), _read_back(dst_store, chunk))
        if reverse_names:
            writer.write(reverse_names[0], np.int64, (num_edges,), _read_back(dst_store, chunk))
            writer.write(reverse_names[1], np.int64, (num_edges,), _read_back(src_store, chunk))
