"""Measuring and bounding the partitioner's memory: per-phase peaks, released mapped pages, both METIS
builds, and the figures a partition run records."""

import json
import mmap
import os

import numpy as np
import pytest

from graphstore.partition import partition_graph
from graphstore.partition.assignment import edge_cut_fraction
from graphstore.partition.memory import PhaseMeter, current_rss_bytes, release_pages, stream
from graphstore.partition.metis import metis_kway
from graphstore.partition.metis_library import available_libraries
from graphstore.partition.symmetric_csr import symmetrize
from tests.utils.graphs import load_cora

needs_proc = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc")


@needs_proc
def test_each_phase_reports_its_own_peak():
    meter = PhaseMeter()
    with meter.phase("big"):
        # 128 MiB of fresh pages, touched: an anonymous mapping, not heap memory that an earlier test
        # freed and glibc kept resident (raised trim threshold), which would not grow the RSS
        start = current_rss_bytes()
        pages = mmap.mmap(-1, 128 << 20)
        block = np.frombuffer(pages, dtype=np.uint8)
        block[:] = 1
        # The resident set with the pages in it (what the phase's peak must reach), read here rather
        # than before the phase: threads left by earlier tests may free memory meanwhile.
        with_pages = current_rss_bytes()
        del block
        pages.close()
    with meter.phase("small"):
        np.ones(1 << 10)
    assert with_pages - start >= 120 << 20
    # VmHWM follows the resident set with a lag of a few per-thread counter batches (kilobytes).
    assert meter.peak_bytes["big"] >= with_pages - (4 << 20)
    assert meter.peak_bytes["small"] < meter.peak_bytes["big"]  # the big phase's peak was reset
    assert meter.run_peak() == max(meter.start_peak, meter.peak_bytes["big"])
    report = meter.report()
    assert set(report["seconds"]) == set(report["cpu_seconds"]) == {"big", "small"}


@needs_proc
def test_released_pages_leave_the_resident_set(tmp_path):
    path = tmp_path / "a.npy"
    np.save(path, np.arange(16 << 20, dtype=np.int64))  # 128 MiB
    mapped = np.load(path, mmap_mode="r")
    before = current_rss_bytes()
    total = sum(int(piece.sum()) for _, piece in stream(1 << 20, mapped))
    assert total == (16 << 20) * ((16 << 20) - 1) // 2
    assert current_rss_bytes() - before < 48 << 20  # streamed: about one chunk stays resident
    whole = int(np.asarray(mapped).sum())  # a plain read maps every page
    assert whole == total and current_rss_bytes() - before > 96 << 20
    release_pages(mapped)
    assert current_rss_bytes() - before < 48 << 20
    assert int(mapped[-1]) == (16 << 20) - 1  # still readable after the release


def test_release_pages_ignores_arrays_in_memory():
    array = np.arange(10)
    release_pages(array, array[2:5])
    np.testing.assert_array_equal(array, np.arange(10))


@pytest.mark.parametrize("library", available_libraries(), ids=lambda lib: lib.name)
def test_every_metis_build_partitions_cora(library, monkeypatch):
    import graphstore.partition.metis as metis

    monkeypatch.setattr(metis, "metis_library", lambda *_: library)
    graph = load_cora()
    csr = symmetrize(graph["src"], graph["dst"], 2708)
    for drop_edges in (False, True):
        part, cut = metis_kway(csr, 4, seed=0, drop_edges=drop_edges)
        assert sorted(np.unique(part).tolist()) == [0, 1, 2, 3]
        assert np.bincount(part).max() <= 1.05 * 2708 / 4
        assert edge_cut_fraction(graph["src"], graph["dst"], part) < 0.15
        assert cut > 0


def test_a_32_bit_build_is_preferred_when_installed():
    widths = [lib.idx.itemsize for lib in available_libraries()]
    assert widths and widths == sorted(widths)


def test_partition_records_time_and_memory_per_phase(tmp_path):
    graph = load_cora()
    path = tmp_path / "cora.npz"
    np.savez(path, **graph)
    result = partition_graph(str(path), "cora", 2, str(tmp_path / "out"))
    phases = {"load", "symmetrize", "metis", "edge_cut", "relabel", "write"}
    assert phases <= set(result.timings) and phases <= set(result.phase_peak_rss_bytes)
    assert result.peak_rss_bytes >= max(result.phase_peak_rss_bytes.values()) > 0
    with open(result.config_path) as fh:
        recorded = json.load(fh)["stats"]["phases"]
    assert phases <= set(recorded["seconds"]) and phases <= set(recorded["peak_rss_gib"])
    assert recorded["run_peak_rss_gib"] == pytest.approx(result.peak_rss_bytes / 2**30, abs=2e-3)
    # the result's ID maps are int64 whatever width the partitioner worked in
    assert result.orig_nid.dtype == result.orig_eid.dtype == np.int64
    assert result.orig_eids_per_type["_N:_E:_N"] is result.orig_eid
