"""bench/dgl/report.py renders a side-by-side results file: the run it names and each figure's ratio."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "bench" / "dgl" / "report.py"


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


def _results() -> dict:
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
        "summary": {
            "pull/mixed/1000/4t:rows_per_s": _entry(
                [900e3, 1e6, 1.1e6], [800e3, 700e3, 750e3], "rows/s", True
            ),
            "graphsage_epoch:epoch_s": _entry([1.2, 1.3, 1.25], [1.3, 1.4, 1.35], "s", False),
            "partition:peak_rss_bytes": _entry([0.8e9] * 3, [1.7e9] * 3, "bytes", False),
            "sample/1hop:seeds_per_s": {"unit": "seeds/s", "runs": 0},
        },
        "errors": [],
    }


def _render(tmp_path, *flags) -> str:
    path = tmp_path / "2026-11-25-box.json"
    path.write_text(json.dumps(_results()))
    done = subprocess.run(
        [sys.executable, str(REPORT), "--results", str(path), *flags],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_markdown_names_the_run_and_judges_each_ratio_against_its_target(tmp_path):
    text = _render(tmp_path, "--markdown")
    first = text.splitlines()[0]
    for part in ("2026-11-25-box.json", "side_by_side.py --runs 3", "box", "2 cores", "1.50 / 2.25 / 3.00"):
        assert part in first
    rows = {line.split("|")[1].strip(" `"): line for line in text.splitlines() if line.startswith("| `")}
    assert "| 1.43x |" in rows["pull/mixed/1000/4t"] and rows["pull/mixed/1000/4t"].endswith(
        "| ≥ 1.2x | yes |"
    )
    assert "| 1.08x |" in rows["graphsage_epoch"] and rows["graphsage_epoch"].endswith("| ≥ 1.3x | no |")
    assert rows["partition"].endswith("| 3 | 0 |  |  |")  # no pair invalid, no target for the partitioner
    assert "no valid paired run" in rows["sample/1hop"]
    # The fixture is a results file from before the CPU accounting: nothing in it was judged.
    assert "not judged" in text and "Every pair valid" not in text


def test_plain_table_says_which_targets_are_met(tmp_path):
    text = _render(tmp_path)
    lines = {line.split()[0]: line for line in text.splitlines() if ":" in line.split(" ")[0]}
    assert lines["pull/mixed/1000/4t:rows_per_s"].endswith("1.2x met")
    assert lines["graphsage_epoch:epoch_s"].endswith("1.3x NOT met")
