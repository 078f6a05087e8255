"""bench/dgl/quiet.py: a turn during which another process used the machine is invalid, and so is its pair.

The side-by-side benchmark must not publish a loaded run: these tests load the machine on purpose
(a busy process outside the turn) and check that the accounting sees it, that the turn's own
processes are not mistaken for others, and that the report leaves invalid pairs out and counts them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

BENCH_DGL = Path(__file__).resolve().parents[2] / "bench" / "dgl"
BUSY = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
# Spins until it has used this much CPU time itself, however loaded the machine is.
SPIN_CPU = "import time\nwhile time.process_time() < {seconds}:\n    pass\n"

pytestmark = pytest.mark.skipif(not Path("/proc/stat").is_file(), reason="needs Linux's /proc/stat")


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH_DGL))
    import quiet
    import report

    return quiet, report


def _busy(seconds: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", BUSY.format(seconds=seconds)])


def test_a_busy_process_beside_the_turn_makes_it_invalid(bench):
    quiet, _ = bench
    other = _busy(120.0)  # spins until killed
    try:
        time.sleep(0.3)  # the interpreter's start-up is not the point
        start = quiet.process_cpu_s(other.pid)
        with quiet.TurnMeter(max_other_share=0.05) as meter:
            # The turn itself does nothing and lasts until the busy process has had 1 s of CPU, however
            # loaded the machine is (bounded: a process that gets no CPU at all fails the test).
            deadline = time.monotonic() + 60.0
            while quiet.process_cpu_s(other.pid) - start < 1.0 and time.monotonic() < deadline:
                time.sleep(0.05)
            used = quiet.process_cpu_s(other.pid) - start
        account = meter.account
    finally:
        other.kill()
        other.wait()
    assert used >= 1.0, f"the busy process got {used} s of CPU in 60 s"
    # machine-wide busy time minus the turn's own: at least the busy process's (others only add to it)
    assert account.other_s >= used - 0.1, account
    assert account.other_share > 0.05 and not account.valid
    output = {"results": {}, "quiet": {"account": account.to_json()}}
    assert not quiet.pair_is_valid({"graphstore": output, "dgl": {"results": {}}})


def test_the_turns_own_processes_and_the_background_load_are_not_other_work(bench):
    quiet, _ = bench
    with quiet.BackgroundLoad(threads=1) as background:
        with quiet.TurnMeter(max_other_share=0.05, background_pids=background.pids) as meter:
            subprocess.run([sys.executable, "-c", SPIN_CPU.format(seconds=0.8)], check=True)
    account = meter.account
    assert account.own_s >= 0.75, account  # (clock ticks) the reaped child's CPU time is the turn's own
    assert account.background_s > 0.0, account  # the spinning background process, reported apart
    expected_other = max(account.machine_busy_s - account.own_s - account.background_s, 0.0)
    assert account.other_s == pytest.approx(expected_other)
    assert background.pids == []  # stopped and reaped on leaving


def test_invalid_pairs_are_left_out_of_the_medians_and_counted(bench):
    quiet, report = bench
    metric = next(m for m in report.metrics() if m.workload == "sample/1hop")

    def side(value, valid=True):
        account = {"valid": valid, "other_share": 0.0 if valid else 0.4}
        return {"results": {"sample/1hop": {"seeds_per_s": value}}, "quiet": {"account": account}}

    runs = [
        {"graphstore": side(300.0), "dgl": side(100.0)},
        {"graphstore": side(900.0), "dgl": side(100.0, valid=False)},  # DGL's turn overlapped other work
        {"graphstore": side(200.0), "dgl": side(100.0)},
    ]
    entry = report.summarize(metric, runs)
    assert entry["runs"] == 2 and entry["invalid_pairs"] == 1
    assert entry["ratios"] == [3.0, 2.0] and entry["ratio_median"] == 2.5
    assert "1 figure pair(s) over 1 row(s) invalid" in report.validity_line({metric.key: entry})
    judged_and_quiet = report.summarize(metric, [runs[0], runs[2]])
    assert report.validity_line({metric.key: judged_and_quiet}).startswith("Every pair valid")
    unjudged = [{system: {"results": side["results"]} for system, side in runs[0].items()}]
    assert "not judged" in report.validity_line({metric.key: report.summarize(metric, unjudged)})
    assert "no valid paired run" in report.table({metric.key: report.summarize(metric, [runs[1]])})


def test_report_flags_a_dgl_figure_far_from_the_previous_runs(bench, tmp_path):
    _, report = bench
    key = "sample/1hop:seeds_per_s"

    def results(started, dgl_median):
        entry = {"unit": "seeds/s", "runs": 3, "dgl_median": dgl_median}
        return {"started": started, "summary": {key: entry, "adagrad/1000:steps_per_s": {"runs": 0}}}

    (tmp_path / "2026-11-25-vm.json").write_text(json.dumps(results("2026-11-25T10:00:00", 90e3)))
    (tmp_path / "2026-11-26-vm.json").write_text(json.dumps(results("2026-11-26T10:00:00", 700e3)))
    (tmp_path / "2026-11-27-vm-quick.json").write_text(json.dumps(results("2026-11-27T09:00:00", 1.0)))
    (tmp_path / "replicas.json").write_text(json.dumps({"summary": {}}))  # another benchmark's file
    current = tmp_path / "2026-11-27-vm.json"
    current.write_text(json.dumps(results("2026-11-27T10:00:00", 650e3)))
    assert report.previous_results(current) == tmp_path / "2026-11-26-vm.json"  # not the quick one
    now = json.loads(current.read_text())["summary"]
    assert report.drift(now, json.loads((tmp_path / "2026-11-26-vm.json").read_text())["summary"]) == {}
    flagged = report.drift(now, json.loads((tmp_path / "2026-11-25-vm.json").read_text())["summary"])
    assert list(flagged) == [key] and flagged[key] == pytest.approx(650 / 90)


def test_the_load_gate_waits_no_longer_than_its_bound(bench):
    quiet, _ = bench
    start = time.monotonic()
    gate = quiet.wait_for_load(threshold=1e-9, max_wait_s=0.5, poll_s=0.1)
    assert time.monotonic() - start < 3.0
    assert gate["gate_passed"] == (gate["load_1m"] < 1e-9)
    assert quiet.wait_for_load(threshold=0, max_wait_s=10)["waited_s"] < 1.0  # 0: no gate
    with pytest.raises(ValueError, match="max_wait_s"):
        quiet.wait_for_load(1.0, max_wait_s=-1)
