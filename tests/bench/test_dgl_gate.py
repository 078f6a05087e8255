"""bench/dgl/quiet.py's cpu gate: what share of the machine other work used between two readings."""

from __future__ import annotations

import pytest


@pytest.fixture
def quiet(bench_dgl):
    return bench_dgl("quiet")


def test_other_share_leaves_out_the_drivers_own_time(quiet):
    # 2 cores for 3 s = 6 CPU seconds; the machine was busy 0.5 s of them, 0.2 s of that the driver's.
    assert quiet.other_share(machine_busy_s=0.5, own_s=0.2, wall_s=3.0, cores=2) == pytest.approx(0.05)
    # Clock ticks can put the driver's time a little over the machine's: never a negative share.
    assert quiet.other_share(machine_busy_s=0.1, own_s=0.12, wall_s=3.0, cores=2) == 0.0
    # One busy thread elsewhere is half of a 2-core machine.
    assert quiet.other_share(machine_busy_s=3.0, own_s=0.0, wall_s=3.0, cores=2) == pytest.approx(0.5)


def test_the_cpu_gate_reports_its_window_and_passes_only_under_the_share(quiet):
    gate = quiet.wait_for_quiet(max_share=10.0, window_s=0.5, max_wait_s=5.0, poll_s=0.1)
    if gate["other_share"] is None:  # no /proc/stat here: nothing to judge by, the gate is open
        assert gate["gate_passed"]
        return
    assert gate["kind"] == "cpu" and gate["window_s"] == 0.5
    # Other work never uses more than all cores (a few clock ticks of rounding aside).
    assert gate["gate_passed"] and 0.0 <= gate["other_share"] <= 1.2
    closed = quiet.wait_for_quiet(max_share=-1.0, window_s=0.2, max_wait_s=0.0, poll_s=0.05)
    assert not closed["gate_passed"]  # no share is under -1: held until the bound, then reported as such
    for bad in ({"window_s": 0.0}, {"poll_s": 0.0}, {"max_wait_s": -1.0}):
        arguments = {"max_share": 0.05, "window_s": 1.0, "max_wait_s": 1.0, **bad}
        with pytest.raises(ValueError):
            quiet.wait_for_quiet(**arguments)
