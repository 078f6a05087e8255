"""bench/ab.py's figure extraction and comparison (the before / after benchmark comparison)."""

import importlib.util
from pathlib import Path

import pytest

_AB_PATH = Path(__file__).resolve().parents[2] / "bench" / "ab.py"
_SPEC = importlib.util.spec_from_file_location("bench_ab", _AB_PATH)
ab = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ab)


def test_throughput_figures_take_rates_and_rate_tables_only():
    result = {
        "repeats": 10,
        "mb_per_s": {"concurrent": 500.0, "sequential": 400},
        "results": [{"one_hop": {"seeds_per_s": 4e5, "median_ms": 2.3}, "meets_target": True}],
        "steps_per_s": 120.5,
    }
    assert ab.throughput_figures(result) == {
        "mb_per_s.concurrent": 500.0,
        "mb_per_s.sequential": 400.0,
        "results.0.one_hop.seeds_per_s": 4e5,
        "steps_per_s": 120.5,
    }


def test_compare_gives_medians_ratio_and_paired_ratio_of_common_figures():
    before = [{"x_per_s": 10.0, "old_per_s": 1.0}, {"x_per_s": 20.0}, {"x_per_s": 30.0}]
    after = [{"x_per_s": 12.0}, {"x_per_s": 18.0}, {"x_per_s": 36.0, "new_per_s": 5.0}]
    table = ab.compare(before, after)
    assert set(table) == {"x_per_s"}
    row = table["x_per_s"]
    assert (row["before"], row["after"]) == (20.0, 18.0)
    assert row["ratio"] == pytest.approx(0.9)
    assert row["paired_ratio"] == pytest.approx(1.2)  # rounds: 1.2, 0.9, 1.2


def test_compare_refuses_unequal_rounds():
    with pytest.raises(ValueError, match="same number of rounds"):
        ab.compare([{"a_per_s": 1.0}], [])
