"""Input loading (npz, edge lists) and every bad-input case: a clear error, and no output left behind."""

import os

import numpy as np
import pytest

from graphstore.errors import ConfigError
from graphstore.partition import (
    load_edge_list,
    load_graph,
    load_npz,
    load_partition,
    load_partition_book,
    partition_graph,
    read_config,
)
from tests.utils.graphs import make_graph, make_partitioned_graph


def small_graph():
    return {
        "src": np.array([0, 1, 2, 3, 4, 0]),
        "dst": np.array([1, 2, 3, 4, 0, 2]),
        "feat": np.arange(10, dtype=np.float32).reshape(5, 2),
        "w": np.arange(6, dtype=np.float32),
    }


def test_npz_members_are_memory_mapped_and_equal(tmp_path):
    graph = make_graph(num_nodes=200, seed=1)
    path = tmp_path / "g.npz"
    np.savez(path, **graph)
    arrays = load_npz(str(path))
    assert set(arrays) == set(graph)
    for name, arr in graph.items():
        assert isinstance(arrays[name], np.memmap)
        np.testing.assert_array_equal(arrays[name], arr)
    # compressed members are read instead
    np.savez_compressed(tmp_path / "c.npz", **graph)
    compressed = load_graph(str(tmp_path / "c.npz"))
    np.testing.assert_array_equal(compressed.node_data["_N"]["feat"], graph["feat"])


def test_npz_node_and_edge_arrays_by_length(tmp_path):
    path = tmp_path / "g.npz"
    np.savez(path, **small_graph())
    graph = load_graph(str(path))
    assert graph.num_nodes == 5 and graph.num_edges == 6
    assert set(graph.node_data["_N"]) == {"feat"} and set(graph.edge_data["_N:_E:_N"]) == {"w"}
    np.savez(path, num_nodes=np.int64(8), src=np.array([0, 7]), dst=np.array([7, 0]))
    assert load_graph(str(path)).num_nodes == 8


def test_edge_list_whitespace_csv_comments_and_weights(tmp_path):
    ws = tmp_path / "g.txt"
    ws.write_text("# comment\n0 1\n1\t2\n\n% other comment\n2 0\n")
    graph = load_edge_list(str(ws))
    np.testing.assert_array_equal(graph.src, [0, 1, 2])
    np.testing.assert_array_equal(graph.dst, [1, 2, 0])
    assert graph.num_nodes == 3
    csv = tmp_path / "g.csv"
    csv.write_text("0,3,0.5\n3,1,1.5\n")
    graph = load_graph(str(csv), num_nodes=10)
    assert graph.num_nodes == 10
    np.testing.assert_array_equal(
        graph.edge_data["_N:_E:_N"]["weight"], np.array([0.5, 1.5], dtype=np.float32)
    )
    result = partition_graph(str(csv), "el", 2, str(tmp_path / "out"), part_method="random")
    assert result.num_edges == 2


@pytest.mark.parametrize(
    "text,match",
    [
        ("0 1\n1 x\n", "cannot parse"),
        ("0\n1\n", "two columns"),
        ("0 1.5\n", "non-integer"),
        ("0 -1\n", "< 0"),
    ],
)
def test_bad_edge_lists(tmp_path, text, match):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_edge_list(str(path))


def test_missing_input_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.npz"):
        partition_graph(str(tmp_path / "nope.npz"), "g", 2, str(tmp_path / "out"))
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        load_graph(str(tmp_path / "nope.txt"))
    assert not (tmp_path / "out").exists()


def test_not_an_npz(tmp_path):
    path = tmp_path / "g.npz"
    path.write_text("hello")
    with pytest.raises(ValueError, match="not a valid .npz"):
        load_graph(str(path))


@pytest.mark.parametrize(
    "change,match",
    [
        (lambda g: g.update(dst=g["dst"][:-1]), "src and dst differ in length: 6 != 5"),
        (lambda g: g.update(feat=g["feat"][:3]), r"array 'feat' has 3 rows"),
        (lambda g: g.update(src=np.array([0, 1, 2, 3, 4, -2])), "src has node ID -2 < 0"),
        (
            lambda g: g.update(dst=np.array([1, 2, 3, 4, 0, 9]), num_nodes=np.int64(5)),
            "dst has node ID 9 >= num_nodes=5",
        ),
        (lambda g: g.update(src=np.array([0.0, 1, 2, 3, 4, 0])), "src must hold integer node IDs"),
        (lambda g: g.pop("src"), r"missing required arrays \['src'\]"),
        (lambda g: g.update(bad=np.zeros(5, dtype=np.complex64)), "'bad' has dtype complex64"),
    ],
)
def test_bad_graph_arrays(tmp_path, change, match):
    graph = small_graph()
    change(graph)
    with pytest.raises(ValueError, match=match):
        partition_graph(graph, "g", 2, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
    assert os.listdir(tmp_path) == []  # no temporary folder left either


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"num_parts": 0}, "num_parts must be >= 1, got 0"),
        ({"num_parts": 6}, "num_parts=6 exceeds num_nodes=5"),
        ({"num_parts": 2.5}, "num_parts must be an integer"),
        ({"part_method": "spectral"}, "unknown part_method 'spectral'"),
        ({"feat_dtype": "int8"}, "feat_dtype must be one of"),
        ({"num_hops": 0}, "num_hops must be a positive integer"),
        ({"graph_name": "a/b"}, "graph_name"),
        ({"balance_ntypes": "nope"}, "node array 'nope'"),
        ({"balance_ntypes": np.zeros(4, dtype=np.int64)}, r"balance_ntypes must have shape \[5\]"),
    ],
)
def test_bad_arguments(tmp_path, kwargs, match):
    args = {"graph_name": "g", "num_parts": 2, "out_path": str(tmp_path / "out"), **kwargs}
    with pytest.raises(ValueError, match=match):
        partition_graph(small_graph(), **args)
    assert not (tmp_path / "out").exists()


def test_a_deeper_halo_is_recorded_and_the_files_are_the_same(tmp_path):
    one = partition_graph(small_graph(), "g", 2, str(tmp_path / "one"), part_method="random")
    two = partition_graph(small_graph(), "g", 2, str(tmp_path / "two"), part_method="random", num_hops=2)
    assert read_config(two.config_path)["halo_hops"] == 2 and read_config(one.config_path)["halo_hops"] == 1
    for part_id in range(2):
        a, b = load_partition(one.config_path, part_id), load_partition(two.config_path, part_id)
        np.testing.assert_array_equal(np.asarray(a.in_src), np.asarray(b.in_src))


def test_existing_output_needs_overwrite_and_survives_a_failed_run(tmp_path):
    out = tmp_path / "out"
    first = partition_graph(small_graph(), "g", 2, str(out), part_method="random")
    with pytest.raises(FileExistsError, match="exists and is not empty"):
        partition_graph(small_graph(), "g", 2, str(out))
    bad = small_graph()
    bad["src"] = np.array([0, 1, 2, 3, 4, 99])
    with pytest.raises(ValueError):
        partition_graph(bad, "g", 2, str(out), overwrite=True)
    assert load_partition_book(first.config_path).num_nodes() == 5  # old output intact
    second = partition_graph(small_graph(), "g", 3, str(out), overwrite=True)
    assert load_partition_book(second.config_path).num_partitions() == 3
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no temporary or old folders left
    # an existing empty folder is fine without overwrite
    (tmp_path / "empty").mkdir()
    partition_graph(small_graph(), "g", 2, str(tmp_path / "empty"))
    # a file in the way is not
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="not a folder"):
        partition_graph(small_graph(), "g", 2, str(tmp_path / "file"), overwrite=True)


def test_load_partition_errors(tmp_path):
    config_path, _ = make_partitioned_graph(tmp_path, num_nodes=100, num_parts=2)
    with pytest.raises(ValueError, match=r"part_id=2 out of range \[0, 2\)"):
        load_partition(config_path, 2)
    with pytest.raises(FileNotFoundError, match="missing.json"):
        load_partition(str(tmp_path / "missing.json"), 0)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid json"):
        load_partition_book(str(bad))
    bad.write_text('{"format_version": 1}')
    with pytest.raises(ConfigError, match="lacks fields"):
        load_partition_book(str(bad))
    text = open(config_path).read().replace('"format_version": 2', '"format_version": 99')
    bad.write_text(text)
    with pytest.raises(ConfigError, match="format_version=99"):
        load_partition_book(str(bad))
    os.remove(os.path.join(os.path.dirname(config_path), "part1", "in_src.npy"))
    with pytest.raises(FileNotFoundError, match="in_src.npy"):
        load_partition(config_path, 1)
