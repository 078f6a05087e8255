"""bench/common.py's partition cache: a benchmark's graph is partitioned once and partitioned again only
when its input or the options change."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import numpy as np

_PATH = Path(__file__).resolve().parents[2] / "bench" / "common.py"
_SPEC = importlib.util.spec_from_file_location("bench_common", _PATH)
common = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(common)


def _write_graph(path: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    np.savez(path, src=rng.integers(0, 50, 300), dst=rng.integers(0, 50, 300), num_nodes=np.int64(50))


def test_partitions_are_reused_until_the_input_or_the_options_change(tmp_path):
    graph, out = tmp_path / "g.npz", tmp_path / "parts"
    _write_graph(graph, 0)
    config = common.ensure_partitions(graph, "g", 2, out, part_method="random")
    assert config == str(out / "g.json")
    written = Path(config).stat().st_mtime_ns
    assert common.ensure_partitions(graph, "g", 2, out, part_method="random") == config
    assert Path(config).stat().st_mtime_ns == written  # reused, not written again

    common.ensure_partitions(graph, "g", 2, out, part_method="metis")  # other options: partitioned again
    assert json.loads(Path(config).read_text())["part_method"] == "metis"
    _write_graph(graph, 1)  # the input rewritten: partitioned again
    os.utime(graph, ns=(written + 10**9, written + 10**9))
    common.ensure_partitions(graph, "g", 2, out, part_method="metis")
    stamp = json.loads((out / common.SOURCE_STAMP).read_text())
    assert stamp["mtime_ns"] == graph.stat().st_mtime_ns and stamp["options"] == {"part_method": "metis"}
    (out / common.SOURCE_STAMP).write_text("{not json")  # a damaged stamp: partitioned again
    common.ensure_partitions(graph, "g", 2, out, part_method="metis")
    assert json.loads((out / common.SOURCE_STAMP).read_text())["name"] == "g"


def test_a_stamp_is_current_only_beside_its_partitions_and_for_its_input(tmp_path):
    # The rule bench/dgl/side_by_side.py applies to the partitions its own partitioner commands make.
    graph, out = tmp_path / "graph-200000-seed0-train0.55.npz", tmp_path / "parts" / "dgl"
    _write_graph(graph, 0)
    stamp = common.source_stamp(graph, "bench", 2, part_method="metis")
    assert stamp["graph"] == str(graph.resolve()) and stamp["size"] == graph.stat().st_size
    assert not common.partitions_current(out, stamp)  # nothing there yet
    out.mkdir(parents=True)
    (out / "bench.json").write_text("{}")
    assert not common.partitions_current(out, stamp)  # partitions without a stamp: a run that died
    common.write_source_stamp(out, stamp)
    assert common.partitions_current(out, stamp)
    other = tmp_path / "graph-200000-seed0-train0.1.npz"  # another training share: another file
    _write_graph(other, 0)
    assert not common.partitions_current(out, common.source_stamp(other, "bench", 2, part_method="metis"))
    assert not common.partitions_current(out, {**stamp, "num_parts": 4})
    common.clear_source_stamp(out)  # what a partitioner's start does
    assert not common.partitions_current(out, stamp)
    common.clear_source_stamp(out)  # nothing left to remove: no error
    common.write_source_stamp(out, stamp)
    (out / "bench.json").unlink()  # a stamp without its partitions
    assert not common.partitions_current(out, stamp)
