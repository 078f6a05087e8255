"""bench/dgl/side_by_side.py --workloads: which figures a reduced run measures, and which sections run."""

from __future__ import annotations

import sys

import pytest


@pytest.fixture
def side_by_side(bench_dgl):
    return bench_dgl("side_by_side")


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


def test_headline_picks_the_readmes_rows_and_the_graph_is_named_after_its_training_share(side_by_side):
    parse = side_by_side.parse_args
    args = parse(["--dgl-python", sys.executable, "--headline", "--train-frac", "0.55"])
    assert args.sections == ["partition", "client", "epoch"] and args.train_frac == 0.55
    from workloads import selected

    chosen = [m.key for m in side_by_side.metrics() if selected(m.workload, args.patterns)]
    assert "pull/remote/1000/4t:rows_per_s" in chosen and "graphsage_epoch:epoch_s" in chosen
    assert "pull/local/1000/1t:rows_per_s" not in chosen and "adagrad/10000:steps_per_s" not in chosen
    assert "pull/mixed/100000/1t:rows_per_s" not in chosen and "sample/2hop:batches_per_s" not in chosen
    with pytest.raises(SystemExit):  # --headline chooses the workloads itself
        parse(["--dgl-python", sys.executable, "--headline", "--workloads", "pull/*"])
    with pytest.raises(SystemExit):
        parse(["--dgl-python", sys.executable, "--train-frac", "0.95"])
    names = {side_by_side.graph_file_name(200_000, 0, frac) for frac in (0.1, 0.55)}
    assert names == {"graph-200000-seed0-train0.1.npz", "graph-200000-seed0-train0.55.npz"}


def test_a_zero_load_threshold_turns_every_gate_off(side_by_side):
    parse = side_by_side.parse_args
    assert parse(["--dgl-python", sys.executable]).gate == "cpu"
    assert parse(["--dgl-python", sys.executable, "--load-threshold", "0"]).gate == "none"
    assert parse(["--dgl-python", sys.executable, "--gate", "load"]).gate == "load"
