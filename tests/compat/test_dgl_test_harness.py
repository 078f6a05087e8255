"""The harness that runs DGL's own test files on the compat namespace (tools/dgl_tests): it changes only
their ``dgl`` imports (and can tell when anything else changed), counts the tests of a file that fails to
import, and reads pytest's JUnit report into passed / failed / skipped with reasons."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools" / "dgl_tests"


def _load(name: str):
    sys.path.insert(0, str(TOOLS))
    try:
        spec = importlib.util.spec_from_file_location(f"dgl_tests_{name}", TOOLS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(TOOLS))


@pytest.fixture(scope="module")
def rewrite():
    return _load("rewrite")


@pytest.fixture(scope="module")
def run():
    return _load("run")


SOURCE = """import os
import dgl
import dgl.backend as F
from dgl import function as fn
from dgl.distributed import (
    DistGraph,
    partition_graph,
)
from dgl.distributed.graph_partition_book import _etype_tuple_to_str
import dgl.graphbolt
def f():
    import dgl  # late
    return dgl.NID, dgl.distributed.initialize
x = "import dgl"
"""


def test_only_import_lines_change(rewrite):
    new, changed = rewrite.rewrite_source(SOURCE)
    lines = new.split("\n")
    assert changed == 7 and len(lines) == len(SOURCE.split("\n"))
    assert lines[1] == "import graphstore.compat.dgl as dgl"
    assert lines[2] == "import graphstore.compat.dgl.backend as F"
    assert lines[3] == "from graphstore.compat.dgl import function as fn"
    assert lines[4] == "from graphstore.compat.dgl.distributed import ("
    assert lines[5] == "    DistGraph,"  # the continued list is unchanged
    assert lines[9] == "import graphstore.compat.dgl.graphbolt; import graphstore.compat.dgl as dgl"
    assert lines[11] == "    import graphstore.compat.dgl as dgl  # late"
    assert lines[12] == SOURCE.split("\n")[12] and lines[13] == 'x = "import dgl"'
    assert rewrite.changed_lines_are_imports(SOURCE, new) == []
    tampered = new.replace("return dgl.NID", "return None")
    assert rewrite.changed_lines_are_imports(SOURCE, tampered) != []


def test_tests_of_a_file_that_fails_to_import_are_counted(run, tmp_path):
    test_file = tmp_path / "test_x.py"
    test_file.write_text(
        "import pytest\n"
        "@pytest.mark.parametrize('a', [1, 2, 3])\n"
        "@pytest.mark.parametrize('b', [True, False])\n"
        "def test_one(a, b): pass\n"
        "def test_two(): pass\n"
        "def helper(): pass\n"
    )
    assert run.count_tests(test_file) == 7
    report = tmp_path / "r.xml"
    report.write_text(
        '<testsuites><testsuite><testcase classname="" name="test_x">'
        "<error message=\"collection failure\">E   ImportError: cannot import name 'X'</error>"
        "</testcase></testsuite></testsuites>"
    )
    result = run.FileResult("test_x.py")
    run.parse_junit(report, result, test_file)
    assert result.errors == 7 and result.passed == 0
    assert list(result.failure_reasons) == ["not collected: ImportError: cannot import name 'X'"]


def test_the_report_is_read_into_counts_and_reasons(run, tmp_path):
    report = tmp_path / "r.xml"
    report.write_text(
        "<testsuites><testsuite>"
        '<testcase classname="m" name="a"/>'
        '<testcase classname="m" name="b">'
        '<failure message="AssertionError: x&#10;more">t</failure></testcase>'
        '<testcase classname="m" name="c"><skipped message="needs a GPU"/></testcase>'
        '<testcase classname="m" name="d"><skipped message="needs a GPU"/></testcase>'
        "</testsuite></testsuites>"
    )
    result = run.FileResult("m.py")
    run.parse_junit(report, result, tmp_path / "m.py")
    assert (result.passed, result.failed, result.errors, result.skipped) == (1, 1, 0, 2)
    assert result.skip_reasons == {"needs a GPU": 2} and result.failure_reasons == {"AssertionError: x": 1}
    assert result.pass_share == 0.5
    assert "| m.py | 1 | 1 | 0 | 2 | 50.0% of 2 |" in run.render([result], top=3)
