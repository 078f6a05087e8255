"""Fixtures of the benchmark tests: bench/dgl's modules, imported as its scripts import each other."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

BENCH_DGL = Path(__file__).resolve().parents[2] / "bench" / "dgl"


@pytest.fixture
def bench_dgl(monkeypatch):
    """``bench_dgl("report")``: a module of bench/dgl/, with that folder on ``sys.path`` for the test."""
    monkeypatch.syspath_prepend(str(BENCH_DGL))
    return importlib.import_module
