"""bench/dgl/side_by_side.py --workloads: which figures a reduced run measures, and which sections run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH_DGL = Path(__file__).resolve().parents[2] / "bench" / "dgl"


@pytest.fixture
def side_by_side(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH_DGL))
    import side_by_side

    return side_by_side


def test_workload_patterns_pick_the_sections_that_measure_them(side_by_side):
    parse = side_by_side.parse_args
    args = parse(["--dgl-python", sys.executable, "--workloads", "pull/mixed/*, pull/remote/1000/4t"])
    assert args.sections == ["client"] and args.patterns == ["pull/mixed/*", "pull/remote/1000/4t"]
    assert parse(["--dgl-python", sys.executable, "--workloads", "graphsage_epoch"]).sections == ["epoch"]
    everything = parse(["--dgl-python", sys.executable])
    assert everything.sections == ["partition", "client", "epoch"] and everything.patterns is None
    with pytest.raises(SystemExit):
        parse(["--dgl-python", sys.executable, "--workloads", "no-such-workload"])
    with pytest.raises(SystemExit):  # the pattern's section is not among those asked for
        parse(["--dgl-python", sys.executable, "--sections", "epoch", "--workloads", "pull/*"])


def test_selected_matches_shell_patterns(side_by_side):
    from workloads import selected

    assert selected("pull/mixed/1000/4t", None)
    assert selected("pull/mixed/1000/4t", ["sample/*", "pull/*/1000/*"])
    assert not selected("pull/mixed/10000/4t", ["pull/*/1000/*"])
    assert not selected("adagrad/1000", [])
