"""bench/dgl/report.py renders a side-by-side results file: the run it names and each figure's verdict.

A row is met only when every check that applies to it holds: the ratio over DGL, for the small calls
graphstore's share of the bare gRPC ceiling, and for a mixed pull graphstore's mixed vs remote rows/s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPORT = Path(__file__).resolve().parents[2] / "bench" / "dgl" / "report.py"


@pytest.fixture
def report(bench_dgl):
    return bench_dgl("report")


def _entry(graphstore: list[float], dgl: list[float], unit: str, higher_is_better: bool) -> dict:
    ratios = [g / d if higher_is_better else d / g for g, d in zip(graphstore, dgl, strict=True)]
    return {
        "unit": unit,
        "higher_is_better": higher_is_better,
        "runs": len(ratios),
        "graphstore_median": sorted(graphstore)[len(graphstore) // 2],
        "dgl_median": sorted(dgl)[len(dgl) // 2],
        "ratios": ratios,
        "ratio_median": sorted(ratios)[len(ratios) // 2],
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "ratio_q1": min(ratios),
        "ratio_q3": max(ratios),
    }


def _header() -> dict:
    load = {"loadavg_1m": 1.5, "loadavg_5m": 2.25, "loadavg_15m": 3.0}
    return {
        "command": "python bench/dgl/side_by_side.py --runs 3",
        "started": "2026-11-25T10:00:00+0000",
        "finished": "2026-11-25T10:20:00+0000",
        "settings": {"runs_done": 3, "num_nodes": 200_000, "partitions": 2, "part_method": "metis"},
        "versions": {
            "graphstore": {"graphstore": "0.1.0", "torch": "2.13.0"},
            "dgl": {"dgl": "2.1.0", "torch": "2.2.1"},
            "graphstore_commit": "0123456789abcdef",
        },
        "machine": {"host": "box", "cpu_model": "CPU X", "cores": 2, "ram_bytes": 2**34},
        "load": {"before": load, "after": load},
        "errors": [],
    }


def _summary_only() -> dict:
    """A results file as older versions wrote it: the summary, no per-run figures."""
    return {
        **_header(),
        "summary": {
            "pull/mixed/1000/4t:rows_per_s": _entry(
                [900e3, 1e6, 1.1e6], [800e3, 700e3, 750e3], "rows/s", True
            ),
            "graphsage_epoch:epoch_s": _entry([1.2, 1.3, 1.25], [1.3, 1.4, 1.35], "s", False),
            "partition:peak_rss_bytes": _entry([0.8e9] * 3, [1.7e9] * 3, "bytes", False),
            "sample/1hop:seeds_per_s": {"unit": "seeds/s", "runs": 0},
        },
    }


def _side(results: dict) -> dict:
    return {"results": results, "quiet": {"account": {"valid": True, "other_share": 0.0}}}


def _client_run(scale: float) -> dict:
    """One run's client section: graphstore's figures (with its ceilings) and DGL's."""
    graphstore = {
        "pull/remote/1000/1t": {"rows_per_s": 1.3e6 * scale},  # 1.3x DGL, 0.65x its ceiling
        "ceiling/1000/1t": {"rows_per_s": 2.0e6 * scale},
        "pull/remote/10000/1t": {"rows_per_s": 2.6e6 * scale},  # 1.3x DGL, 0.87x its ceiling
        "ceiling/10000/1t": {"rows_per_s": 3.0e6 * scale},
        "pull/remote/100000/1t": {"rows_per_s": 2.5e6 * scale},  # not a small call: no ceiling check
        "ceiling/100000/1t": {"rows_per_s": 5.0e6 * scale},
        "pull/mixed/1000/1t": {"rows_per_s": 1.2e6 * scale},  # 1.5x DGL but slower than remote
        "pull/mixed/10000/1t": {"rows_per_s": 2.8e6 * scale},  # 1.4x DGL and faster than remote
        "sample/1hop": {"seeds_per_s": 900e3 * scale},  # 1.8x DGL, 0.9x its ceiling
        "ceiling/sample/1hop": {"seeds_per_s": 1.0e6 * scale},
    }
    dgl = {
        "pull/remote/1000/1t": {"rows_per_s": 1.0e6 * scale},
        "pull/remote/10000/1t": {"rows_per_s": 2.0e6 * scale},
        "pull/remote/100000/1t": {"rows_per_s": 1.0e6 * scale},
        "pull/mixed/1000/1t": {"rows_per_s": 0.8e6 * scale},
        "pull/mixed/10000/1t": {"rows_per_s": 2.0e6 * scale},
        "sample/1hop": {"seeds_per_s": 500e3 * scale},
    }
    return {"graphstore": _side(graphstore), "dgl": _side(dgl)}


def _epoch_run() -> dict:
    def epoch(seconds, nodes):
        figures = {"epoch_s": seconds, "trainer_batches": [54, 54], "trainer_train_nodes": nodes}
        return _side({"graphsage_epoch": figures})

    return {"graphstore": epoch(9.0, [54_812, 54_811]), "dgl": epoch(12.0, [54_812, 54_812])}


def _with_runs(report) -> dict:
    runs = {"client": [_client_run(1.0), _client_run(1.1), _client_run(0.9)], "epoch": [_epoch_run()]}
    header = _header()
    header["settings"].update(graph="graph-200000-seed0-train0.55.npz", train_frac=0.55)
    summary = {
        m.key: report.summarize(m, runs[m.section])
        for m in report.metrics()
        if m.section in runs and any(m.workload in run["dgl"]["results"] for run in runs[m.section])
    }
    return {**header, "summary": summary, "runs": runs}


def _render(tmp_path, results: dict, *flags) -> str:
    """``report.py --results FILE FLAGS`` run as the script it is, its standard output."""
    path = tmp_path / "2026-11-25-box.json"
    path.write_text(json.dumps(results))
    done = subprocess.run(
        [sys.executable, str(REPORT), "--results", str(path), *flags],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def _render_here(report, capsys, tmp_path, results: dict, *flags) -> str:
    """The same through ``report.main`` in this process (no second interpreter to start)."""
    path = tmp_path / "2026-11-25-box.json"
    path.write_text(json.dumps(results))
    assert report.main(["--results", str(path), *flags]) == 0
    return capsys.readouterr().out


def _rows(text: str) -> dict[str, list[str]]:
    rows = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            rows[cells[0].strip("`")] = cells
    return rows


def test_a_small_call_is_met_only_at_its_target_over_dgl_and_its_share_of_the_ceiling(report):
    by_workload = {m.workload: m for m in report.metrics()}
    runs = [_client_run(1.0), _client_run(1.1), _client_run(0.9)]

    def summary(workload):
        return report.summarize(by_workload[workload], runs)

    one_k = summary("pull/remote/1000/1t")
    assert one_k["ratio_median"] == pytest.approx(1.3)
    assert (
        one_k["graphstore_over_ceiling"] == pytest.approx(0.65)
        and one_k["ceiling_shares"] == [pytest.approx(0.65)] * 3
    )
    assert report.checks("pull/remote/1000/1t:rows_per_s", one_k) == [
        ("≥ 1.2x DGL", True),
        ("≥ 0.8x ceiling", False),
    ]
    assert report.verdict("pull/remote/1000/1t:rows_per_s", one_k)[1] is False
    ten_k = summary("pull/remote/10000/1t")
    assert report.verdict("pull/remote/10000/1t:rows_per_s", ten_k) == ("≥ 1.2x DGL; ≥ 0.8x ceiling", True)
    # The 100k-row pull has a ceiling printed but is not one of the small calls judged by it.
    big = summary("pull/remote/100000/1t")
    assert big["graphstore_over_ceiling"] == pytest.approx(0.5)
    assert report.verdict("pull/remote/100000/1t:rows_per_s", big) == ("≥ 1.2x DGL", True)
    one_hop = summary("sample/1hop")
    assert one_hop["ceiling_median"] == pytest.approx(1.0e6)
    assert report.verdict("sample/1hop:seeds_per_s", one_hop) == ("≥ 1.5x DGL; ≥ 0.8x ceiling", True)
    # A small call whose ceiling was not measured cannot be met.
    no_ceiling = {**one_hop}
    for key in ("ceiling_median", "graphstore_over_ceiling", "ceiling_shares", "ceiling_over_dgl"):
        no_ceiling.pop(key)
    assert report.verdict("sample/1hop:seeds_per_s", no_ceiling)[1] is False


def test_a_mixed_pull_slower_than_the_remote_one_is_not_met(report):
    by_workload = {m.workload: m for m in report.metrics()}
    runs = [_client_run(1.0), _client_run(1.1)]
    slower = report.summarize(by_workload["pull/mixed/1000/1t"], runs)
    assert slower["ratio_median"] == pytest.approx(1.5)
    assert slower["mixed_over_remote_median"] == pytest.approx(1.2 / 1.3)
    assert report.checks("pull/mixed/1000/1t:rows_per_s", slower) == [
        ("≥ 1.2x DGL", True),
        ("mixed ≥ remote", False),
    ]
    faster = report.summarize(by_workload["pull/mixed/10000/1t"], runs)
    assert report.verdict("pull/mixed/10000/1t:rows_per_s", faster) == ("≥ 1.2x DGL; mixed ≥ remote", True)
    # Without the remote figure of the same turn there is nothing to compare with: no such check.
    alone = [{system: _side({"pull/mixed/1000/1t": {"rows_per_s": 1e6}}) for system in ("graphstore", "dgl")}]
    entry = report.summarize(by_workload["pull/mixed/1000/1t"], alone)
    assert "mixed_over_remote_median" not in entry
    assert report.checks("pull/mixed/1000/1t:rows_per_s", entry) == [("≥ 1.2x DGL", False)]


def test_markdown_shows_the_ceiling_the_mixed_check_and_the_training_set(report, tmp_path):
    # The script recomputes the summary from the per-run figures: a file that holds only the runs
    # renders the same checks.
    results = {**_with_runs(report)}
    results["summary"] = {
        key: {"unit": entry["unit"], "runs": 0} for key, entry in results["summary"].items()
    }
    text = _render(tmp_path, results, "--markdown", "--previous", "none")
    first = text.splitlines()[0]
    for part in (
        "2026-11-25T10:00:00+0000",  # the date
        "commit 0123456789ab",
        "graph `graph-200000-seed0-train0.55.npz` (200,000 nodes, train-frac 0.55)",
        "batches per trainer: 54 / 54 (graphstore, 109,623 training nodes over 2 trainers), "
        "54 / 54 (DGL, 109,624 training nodes over 2 trainers)",
    ):
        assert part in first
    header = next(line for line in text.splitlines() if line.startswith("| workload"))
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    rows = _rows(text)
    one_k = dict(zip(columns, rows["pull/remote/1000/1t"], strict=True))
    assert one_k["gRPC ceiling (graphstore's share)"] == "2.00M rows/s (graphstore 0.65x)"
    assert one_k["target"] == "≥ 1.2x DGL; ≥ 0.8x ceiling" and one_k["met"] == "no"
    assert one_k["min–max"] == "1.30–1.30" and one_k["runs"] == "3"
    mixed = dict(zip(columns, rows["pull/mixed/1000/1t"], strict=True))
    assert mixed["mixed ÷ remote"] == "0.92x" and mixed["met"] == "no"
    assert dict(zip(columns, rows["pull/mixed/10000/1t"], strict=True))["met"] == "yes"
    epoch = dict(zip(columns, rows["graphsage_epoch"], strict=True))
    assert epoch["ratio (median)"] == "1.33x" and epoch["target"] == "≥ 1.3x DGL" and epoch["met"] == "yes"
    assert "Every pair valid" in text


def test_markdown_of_a_summary_only_file_names_the_run_and_judges_each_ratio(report, capsys, tmp_path):
    text = _render_here(report, capsys, tmp_path, _summary_only(), "--markdown")
    first = text.splitlines()[0]
    for part in ("2026-11-25-box.json", "side_by_side.py --runs 3", "box", "2 cores", "1.50 / 2.25 / 3.00"):
        assert part in first
    rows = _rows(text)
    assert rows["pull/mixed/1000/4t"][4] == "1.43x" and rows["pull/mixed/1000/4t"][-4:] == [
        "≥ 1.2x DGL",
        "",
        "",
        "yes",
    ]
    assert rows["graphsage_epoch"][4] == "1.08x" and rows["graphsage_epoch"][-1] == "no"
    assert rows["partition"][-6:] == ["3", "0", "", "", "", ""]  # no pair invalid, no target
    assert "no valid paired run" in rows["sample/1hop"]
    # The fixture is a results file from before the CPU accounting: nothing in it was judged.
    assert "not judged" in text and "Every pair valid" not in text


def test_plain_table_says_which_checks_fail(report, capsys, tmp_path):
    text = _render_here(report, capsys, tmp_path, _with_runs(report), "--previous", "none")
    lines = {line.split()[0]: line for line in text.splitlines() if ":" in line.split(" ")[0]}
    assert "NOT met (≥ 0.8x ceiling)" in lines["pull/remote/1000/1t:rows_per_s"]
    assert "[ceiling 2.00M rows/s (graphstore 0.65x)]" in lines["pull/remote/1000/1t:rows_per_s"]
    assert "NOT met (mixed ≥ remote)" in lines["pull/mixed/1000/1t:rows_per_s"]
    assert lines["graphsage_epoch:epoch_s"].endswith("≥ 1.3x DGL met")
