"""The parallel partitioner: a chunked graph partitioned by 2 and 3 MPI ranks (mpirun on this host).

Skips, saying why, where mpirun, mpi4py or the ParMETIS API library is missing (deploy/system-packages.sh
installs them; `make install` runs it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from graphstore.partition import load_partition, partition_graph
from graphstore.partition.array_input import graph_from_arrays
from graphstore.partition.chunked import read_metadata, write_chunks
from graphstore.partition.typed_input import graph_from_typed_arrays
from graphstore.partition.validate import load_validated_partition
from tests.utils.typed_graphs import typed_arrays


def _mpi_missing() -> str | None:
    if shutil.which("mpirun") is None:
        return "mpirun not found (deploy/system-packages.sh installs Debian's openmpi-bin)"
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py not installed (make install)"
    try:
        from graphstore.partition.parmetis import load_library

        load_library()
    except RuntimeError as exc:
        return str(exc)
    return None


pytestmark = pytest.mark.skipif(_mpi_missing() is not None, reason=str(_mpi_missing()))

ENV = {
    **os.environ,
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
}


def run_parallel(
    ranks: int, chunks: Path, out: Path, *extra: str, check: bool = True
) -> subprocess.CompletedProcess:
    """``mpirun -np RANKS graphstore partition --chunks ...``; the process is ended on timeout."""
    cmd = [
        "mpirun",
        "--oversubscribe",
        "-np",
        str(ranks),
        sys.executable,
        "-m",
        "graphstore.launcher.cli",
        "--log-level",
        "WARNING",
        "partition",
        "--chunks",
        str(chunks),
        "--out",
        str(out),
        "--json",
        *extra,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    result = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    if check:
        assert proc.returncode == 0, stderr
    return result


def plain_arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n, e = 600, 4000
    return {
        "src": rng.integers(0, n, e),
        "dst": rng.integers(0, n, e),
        "num_nodes": np.int64(n),
        "feat": rng.standard_normal((n, 5)).astype(np.float32),
        "train_mask": rng.random(n) < 0.3,
        "weight": rng.random(e).astype(np.float32),
    }


def _graph(kind: str):
    if kind == "typed":
        arrays = typed_arrays()
        return graph_from_typed_arrays(arrays), arrays
    arrays = plain_arrays()
    return graph_from_arrays(arrays), arrays


def _union(config_path: str, graph) -> None:
    """Every edge once with its type, endpoints and arrays; every node once with its arrays."""
    config = json.loads(Path(config_path).read_text())
    parts = [load_partition(config_path, k) for k in range(config["num_parts"])]
    schema = parts[0].schema
    new_to_orig = np.concatenate([np.asarray(p.orig_nid) for p in parts])
    offsets = graph.node_offsets
    for t, ntype in enumerate(schema.ntypes):
        seen = np.concatenate(
            [np.asarray(p.orig_nid[p.ntype_offsets[t] : p.ntype_offsets[t + 1]]) for p in parts]
        )
        np.testing.assert_array_equal(np.sort(seen), np.arange(graph.nodes_per_type[t]))
        for name, source in graph.node_data.get(ntype, {}).items():
            for p in parts:
                orig = np.asarray(p.orig_nid[p.ntype_offsets[t] : p.ntype_offsets[t + 1]])
                np.testing.assert_array_equal(np.asarray(p.node_feats[ntype][name]), np.asarray(source)[orig])
    edge_offsets = graph.edge_offsets
    for e, canonical in enumerate(schema.canonical_etypes):
        key = ":".join(canonical)
        st, dt = schema.ntype_id(canonical[0]), schema.ntype_id(canonical[2])
        got_eid, got_src, got_dst = [], [], []
        for p in parts:
            indptr = np.asarray(p.in_indptr)
            # the in-CSR piece of type e: n_k[dst type] + 1 entries after the earlier types' pieces
            start = sum(
                int(p.book.ntype_counts[p.part_id][schema.ntype_id(c[2])]) + 1
                for c in schema.canonical_etypes[:e]
            )
            n_dst = int(p.book.ntype_counts[p.part_id][dt])
            piece = indptr[start : start + n_dst + 1]
            lo, hi = int(piece[0]), int(piece[-1])
            dst_local = np.repeat(np.arange(n_dst), np.diff(piece)) + p.ntype_offsets[dt]
            got_dst.append(np.asarray(p.orig_nid)[dst_local])
            got_src.append(new_to_orig[np.asarray(p.in_src[lo:hi])])
            got_eid.append(np.asarray(p.orig_eid[lo:hi]))
            for name, source in graph.edge_data.get(key, {}).items():
                stored = np.asarray(p.edge_feats[key][name])
                np.testing.assert_array_equal(
                    stored,
                    np.asarray(source)[np.asarray(p.orig_eid[p.etype_offsets[e] : p.etype_offsets[e + 1]])],
                )
        eid = np.concatenate(got_eid)
        np.testing.assert_array_equal(np.sort(eid), np.arange(graph.edges_per_type[e]))
        order = np.argsort(eid)
        src_in = np.asarray(graph.src[edge_offsets[e] : edge_offsets[e + 1]]) - offsets[st]
        dst_in = np.asarray(graph.dst[edge_offsets[e] : edge_offsets[e + 1]]) - offsets[dt]
        np.testing.assert_array_equal(np.concatenate(got_src)[order], src_in)
        np.testing.assert_array_equal(np.concatenate(got_dst)[order], dst_in)


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*.npy")):
        h.update(str(path.relative_to(folder)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


# Every pair of (method, ranks, graph kind) values once: 4 runs of mpirun instead of the 8 of the full grid.
@pytest.mark.parametrize(
    "method, ranks, kind",
    [("metis", 2, "plain"), ("metis", 3, "typed"), ("random", 2, "typed"), ("random", 3, "plain")],
)
def test_parallel_partitions_are_valid_and_their_union_is_the_input(tmp_path, kind, ranks, method):
    graph, _ = _graph(kind)
    write_chunks(graph, str(tmp_path / "chunks"), 4, "g")
    out = tmp_path / "parts"
    proc = run_parallel(ranks, tmp_path / "chunks", out, "--num-parts", "3", "--method", method)
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    assert stats["num_ranks"] == ranks and len(stats["ranks"]) == ranks
    assert all("shuffle" in r["peak_rss_bytes"] for r in stats["ranks"])
    config = str(out / "g.json")
    for k in range(3):
        load_validated_partition(config, k)
    _union(config, graph)
    assert sum(stats["part_nodes"]) == graph.num_nodes and sum(stats["part_edges"]) == graph.num_edges
    assert json.loads(Path(config).read_text())["stats"]["num_ranks"] == ranks


def test_same_seed_same_files_and_serial_result_loads_the_same_way(tmp_path):
    graph, arrays = _graph("typed")
    write_chunks(graph, str(tmp_path / "chunks"), 3, "g")
    digests = []
    for run in range(2):
        out = tmp_path / f"parts{run}"
        run_parallel(2, tmp_path / "chunks", out, "--num-parts", "2", "--seed", "7")
        digests.append(_digest(out))
    assert digests[0] == digests[1]
    serial = partition_graph(arrays, "g", 2, str(tmp_path / "serial"))
    for config in (str(tmp_path / "parts0" / "g.json"), serial.config_path):
        _union(config, graph)  # one loader, both results
        for k in range(2):
            load_validated_partition(config, k)


def test_missing_or_inconsistent_chunk_is_named_and_leaves_no_output(tmp_path):
    graph, _ = _graph("plain")
    chunks = tmp_path / "chunks"
    write_chunks(graph, str(chunks), 3, "g")
    meta = read_metadata(str(chunks))
    missing = Path(meta.edge_files[0][1])
    saved = missing.read_bytes()
    missing.unlink()
    out = tmp_path / "parts"
    proc = run_parallel(2, chunks, out, "--num-parts", "2", check=False)
    assert proc.returncode == 2 and str(missing) in proc.stderr and "not found" in proc.stderr
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".parts")]
    missing.write_bytes(saved)
    feat = Path(meta.node_data["_N"]["feat"]["files"][2])
    np.save(feat, np.zeros((3, 5), dtype=np.float32))  # wrong row count
    proc = run_parallel(2, chunks, out, "--num-parts", "2", check=False)
    assert proc.returncode == 2 and str(feat) in proc.stderr and "expected" in proc.stderr
    assert not out.exists()


def test_generated_chunks_and_chunk_command_feed_the_parallel_partitioner(tmp_path, capsys):
    from graphstore.launcher.cli import main

    assert (
        main(
            [
                "generate",
                "--schema",
                "mag",
                "--num-nodes",
                "2000",
                "--num-chunks",
                "3",
                "--out",
                str(tmp_path / "mag"),
            ]
        )
        == 0
    )
    meta = read_metadata(str(tmp_path / "mag"))
    assert meta.ntypes == ["paper", "author", "institution", "field_of_study"]
    assert all(len(c) == 3 for c in meta.edges_per_chunk)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".generate-")]
    proc = run_parallel(
        2, tmp_path / "mag", tmp_path / "parts", "--num-parts", "2", "--balance-ntypes", "train_mask"
    )
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    for ntype, counts in stats["part_type_nodes"].items():
        assert abs(counts[0] - counts[1]) <= max(2, 0.04 * sum(counts)), (ntype, counts)
    np.savez(tmp_path / "g.npz", **plain_arrays())
    capsys.readouterr()
    assert (
        main(["chunk", "--graph", str(tmp_path / "g.npz"), "--num-chunks", "2", "--out", str(tmp_path / "c")])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["num_edges"] == 4000
    assert read_metadata(str(tmp_path / "c")).edges_per_chunk == [[2000, 2000]]
