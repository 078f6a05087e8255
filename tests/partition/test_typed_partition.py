"""Typed graphs through the partitioner: per-type ranges, typed CSR, arrays round-trip, balance, book."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from graphstore.partition import load_partition, load_partition_book, partition_graph
from graphstore.types import etype_key
from tests.utils.typed_graphs import CANONICAL_ETYPES, NUM_NODES, make_typed_partitions, typed_arrays


def _parts(result, num_parts):
    return [load_partition(result.config_path, k) for k in range(num_parts)]


@pytest.mark.parametrize("method, num_parts", [("metis", 3), ("random", 2), ("metis", 1)])
def test_per_type_ranges_cover_each_type_exactly_once(tmp_path, method, num_parts):
    result, _ = make_typed_partitions(tmp_path, num_parts, method)
    book = load_partition_book(result.config_path)
    for ntype, count in NUM_NODES.items():
        owned = np.concatenate([book.partid2nids(k, ntype) for k in range(num_parts)])
        np.testing.assert_array_equal(np.sort(owned), np.arange(count))
        homo = np.concatenate(
            [book.map_to_homo_nid(book.partid2nids(k, ntype), ntype) for k in range(num_parts)]
        )
        types, per_type = book.map_to_per_ntype(homo)
        assert (types == book.ntypes.index(ntype)).all()
        np.testing.assert_array_equal(per_type, owned)
    # every homogeneous ID belongs to exactly one (type, per-type ID)
    types, per_type = book.map_to_per_ntype(np.arange(book.num_nodes()))
    pairs = set(zip(types.tolist(), per_type.tolist(), strict=True))
    assert len(pairs) == book.num_nodes() == sum(NUM_NODES.values())


@pytest.mark.parametrize("method", ["metis", "random"])
def test_every_typed_array_round_trips_to_original_per_type_ids(tmp_path, method):
    result, arrays = make_typed_partitions(tmp_path, 3, method)
    for part in _parts(result, 3):
        for t, ntype in enumerate(part.schema.ntypes):
            lo, hi = part.ntype_offsets[t], part.ntype_offsets[t + 1]
            orig = np.asarray(part.orig_nid[lo:hi])
            assert (
                orig.size
                == part.book.node_range(part.part_id, ntype)[1] - part.book.node_range(part.part_id, ntype)[0]
            )
            for name, stored in part.node_feats.get(ntype, {}).items():
                np.testing.assert_array_equal(np.asarray(stored), arrays[f"node/{ntype}/{name}"][orig])
        key = "paper:cites:paper"
        e = part.schema.etype_id(key)
        orig_e = np.asarray(part.orig_eid[part.etype_offsets[e] : part.etype_offsets[e + 1]])
        np.testing.assert_array_equal(
            np.asarray(part.edge_feats[key]["weight"]), arrays[f"edge/{key}/weight"][orig_e]
        )


def _csr_edges(part, indptr, ntype_id: int) -> tuple[np.ndarray, np.ndarray]:
    """The positions of one relation's CSR edges in ``part``, and the homogeneous ID of the node of type
    ``ntype_id`` each edge is listed under."""
    indptr = np.asarray(indptr)
    positions = np.arange(indptr[0], indptr[-1])
    rows = np.repeat(np.arange(indptr.size - 1), np.diff(indptr))
    return positions, rows + part.ntype_offsets[ntype_id] + part.node_start


@pytest.mark.parametrize("method", ["metis", "random"])
def test_every_stored_edge_is_an_original_edge_of_its_type(tmp_path, method):
    result, arrays = make_typed_partitions(tmp_path, 3, method)
    book = load_partition_book(result.config_path)
    parts = _parts(result, 3)
    # original per-type ID of every homogeneous node ID (partitions own consecutive homogeneous ranges)
    orig_of = np.concatenate([np.asarray(p.orig_nid) for p in parts])
    seen = {etype_key(c): [] for c in CANONICAL_ETYPES}
    for part in parts:
        for e, canonical in enumerate(part.schema.canonical_etypes):
            key = etype_key(canonical)
            src_in, dst_in = arrays[f"edge/{key}/src"], arrays[f"edge/{key}/dst"]
            s, d = part.schema.ntype_id(canonical[0]), part.schema.ntype_id(canonical[2])
            positions, homo_dst = _csr_edges(part, part.in_indptr_of(e), d)
            homo_src = np.asarray(part.in_src[positions])
            assert (book.map_to_per_ntype(homo_src)[0] == s).all()
            assert (book.map_to_per_ntype(homo_dst)[0] == d).all()
            orig = np.asarray(part.orig_eid[positions])
            np.testing.assert_array_equal(orig_of[homo_src], src_in[orig])
            np.testing.assert_array_equal(orig_of[homo_dst], dst_in[orig])
            # position j is homogeneous edge edge_start + j, of this type
            etypes, _ = book.map_to_per_etype(positions + part.edge_start)
            assert (etypes == e).all()
            seen[key].append(orig)
            # out-edges of this partition's nodes of the source type, with their edge IDs
            out_pos, out_src = _csr_edges(part, part.out_indptr_of(e), s)
            out_eid = np.asarray(part.out_eid[out_pos])
            assert (book.map_to_per_etype(out_eid)[0] == e).all()
            owner = book.eid2partid(out_eid)
            orig_e = np.fromiter(
                (parts[k].orig_eid[i - parts[k].edge_start] for k, i in zip(owner, out_eid, strict=True)),
                dtype=np.int64,
                count=out_eid.size,
            )
            np.testing.assert_array_equal(orig_of[out_src], src_in[orig_e])
            np.testing.assert_array_equal(orig_of[np.asarray(part.out_dst[out_pos])], dst_in[orig_e])
    for key, pieces in seen.items():
        np.testing.assert_array_equal(
            np.sort(np.concatenate(pieces)), np.arange(arrays[f"edge/{key}/src"].size)
        )


def test_metis_balances_each_type_and_the_training_papers(tmp_path):
    result, arrays = make_typed_partitions(tmp_path, 3, "metis", balance_ntypes="train_mask")
    for ntype, counts in result.part_type_nodes.items():
        assert sum(counts) == NUM_NODES[ntype]
        assert max(counts) - min(counts) <= max(1, int(0.1 * NUM_NODES[ntype] / 3) + 1), (ntype, counts)
    train = result.part_train_nodes
    assert sum(train) == int(arrays["node/paper/train_mask"].sum())
    assert max(train) - min(train) <= 2, train
    assert result.edge_cut < 0.67  # better than random (2/3 of edges cut at 3 parts)


def test_config_keeps_dgl_shape(tmp_path):
    result, _ = make_typed_partitions(tmp_path, 2, "random")
    config = json.loads(open(result.config_path).read())
    assert config["format_version"] == 2
    assert config["ntypes"] == {t: i for i, t in enumerate(NUM_NODES)}
    assert config["etypes"] == {etype_key(c): i for i, c in enumerate(CANONICAL_ETYPES)}
    for ntype in NUM_NODES:
        ranges = config["node_map"][ntype]
        assert len(ranges) == 2 and all(end >= start for start, end in ranges)
    assert config["node_feats"]["paper"]["feat"] == {"dtype": "float32", "shape": [6]}
    assert config["edge_feats"]["paper:cites:paper"]["weight"]["dtype"] == "float32"


def test_book_per_type_lookups(tmp_path):
    result, _ = make_typed_partitions(tmp_path, 3, "metis")
    book = load_partition_book(result.config_path, 1)
    assert book.ntypes == list(NUM_NODES) and book.canonical_etypes == CANONICAL_ETYPES
    assert book.num_nodes("author") == NUM_NODES["author"] and book.num_nodes() == sum(NUM_NODES.values())
    ids = np.arange(NUM_NODES["paper"])
    parts = book.nid2partid(ids, "paper")
    for k in range(3):
        start, end = book.node_range(k, "paper")
        np.testing.assert_array_equal(ids[parts == k], np.arange(start, end))
        np.testing.assert_array_equal(
            book.nid2localnid(np.arange(start, end), k, "paper"), np.arange(end - start)
        )
    with pytest.raises(IndexError, match=r"paper node IDs contains ID 120"):
        book.nid2partid(np.array([0, 120]), "paper")
    with pytest.raises(
        KeyError, match=r"unknown node type 'venue'.*\['paper', 'author', 'institution', 'topic'\]"
    ):
        book.nid2partid(np.array([0]), "venue")
    assert (
        book.num_edges("cites")
        == book.num_edges(("paper", "cites", "paper"))
        == book.num_edges("paper:cites:paper")
    )


@pytest.mark.parametrize(
    "mutate, match",
    [
        (
            lambda a: a.pop("num_nodes/institution"),
            "names node type 'institution', which has no num_nodes/institution",
        ),
        (
            lambda a: a.__setitem__("node/venue/x", np.zeros(3)),
            "node arrays of type 'venue' but no key num_nodes/venue",
        ),
        (
            lambda a: a.__setitem__("edge/author:writes:paper/dst", np.full(400, 120)),
            r"edge/author:writes:paper/dst holds node ID 120, out of range for node type 'paper' "
            "with 120 nodes",
        ),
        (
            lambda a: a.__setitem__("node/paper/feat", np.zeros((7, 6))),
            r"node array paper/feat has shape \(7, 6\); expected 120 rows",
        ),
        (
            lambda a: a.__setitem__("edge/author:writes/src", np.zeros(3, np.int64)),
            "malformed key 'edge/author:writes/src'",
        ),
        (lambda a: a.__setitem__("node/paper", np.zeros(3)), "malformed key 'node/paper'"),
        (lambda a: a.__setitem__("feat", np.zeros(3)), "unexpected key 'feat' in a typed graph"),
        (
            lambda a: a.pop("edge/paper:cites:paper/dst"),
            r"edge type paper:cites:paper has no edge/paper:cites:paper/dst",
        ),
        (
            lambda a: a.__setitem__("num_nodes/paper", np.float64(1.5)),
            "num_nodes/paper must be a non-negative integer",
        ),
    ],
)
def test_bad_typed_input_names_the_key_and_leaves_no_output(tmp_path, mutate, match):
    arrays = typed_arrays()
    mutate(arrays)
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=match):
        partition_graph(arrays, "bad", 2, str(out))
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_typed_npz_file_and_empty_types(tmp_path):
    arrays = typed_arrays()
    arrays["num_nodes/venue"] = np.int64(0)  # a type without nodes
    arrays["edge/paper:in:venue/src"] = np.zeros(0, np.int64)  # an edge type without edges
    arrays["edge/paper:in:venue/dst"] = np.zeros(0, np.int64)
    path = tmp_path / "typed.npz"
    np.savez(path, **arrays)
    result = partition_graph(str(path), "typed", 3, str(tmp_path / "out"))
    book = load_partition_book(result.config_path)
    assert book.num_nodes("venue") == 0 and book.num_edges("in") == 0
    assert book.num_nodes("topic") == 2  # fewer nodes than partitions
    part = load_partition(result.config_path, 2)
    assert part.in_indptr_of(book.schema.etype_id("in")).size == 1


def test_a_format_1_partition_folder_still_loads(tmp_path):
    """Folders written before typed graphs (format 1: flat feature schemes, edge_map under "_E") load
    as the one-type case, with the same arrays."""
    from tests.utils.graphs import make_partitioned_graph

    config_path, _ = make_partitioned_graph(tmp_path, num_nodes=200, num_parts=2, with_edge_weight=True)
    config = json.loads(open(config_path).read())
    v1 = {k: v for k, v in config.items() if k not in ("num_nodes_per_type", "num_edges_per_type")}
    v1.update(
        format_version=1,
        ntypes={"_N": 0},
        etypes={"_E": 0},
        edge_map={"_E": config["edge_map"]["_N:_E:_N"]},
        node_feats=config["node_feats"]["_N"],
        edge_feats=config["edge_feats"]["_N:_E:_N"],
    )
    old_path = Path(config_path).parent / "old.json"
    old_path.write_text(json.dumps(v1))
    for k in range(2):
        new, old = load_partition(config_path, k), load_partition(str(old_path), k)
        assert old.schema.is_homogeneous and old.book == new.book
        np.testing.assert_array_equal(old.in_indptr, new.in_indptr)
        np.testing.assert_array_equal(old.node_feats["_N"]["feat"], new.node_feats["_N"]["feat"])
        np.testing.assert_array_equal(
            old.edge_feats["_N:_E:_N"]["weight"], new.edge_feats["_N:_E:_N"]["weight"]
        )


def test_half_precision_typed_features_and_writable_typed_tensors(tmp_path):
    from graphstore.dtypes import bfloat16_bits_to_float32, float32_to_bfloat16_bits
    from graphstore.server import PartitionServer

    result, arrays = make_typed_partitions(tmp_path, 2, "random", feat_dtype="bfloat16")
    part = load_partition(result.config_path, 1)
    assert part.node_schemes["paper"]["feat"].dtype == "bfloat16"
    stored = np.asarray(part.node_feats["paper"]["feat"])
    orig = np.asarray(part.orig_nid[part.ntype_offsets[0] : part.ntype_offsets[1]])
    np.testing.assert_array_equal(stored, float32_to_bfloat16_bits(arrays["node/paper/feat"][orig]))
    server = PartitionServer(part, writable_features=True)
    start, _ = part.book.node_range(1, "paper")
    server.push("paper/feat", np.array([start]), float32_to_bfloat16_bits(np.full((1, 6), 2.5, np.float32)))
    np.testing.assert_array_equal(bfloat16_bits_to_float32(server.pull("paper/feat", np.array([start]))), 2.5)
    with pytest.raises(ValueError, match="node:paper ID 0 is not owned by partition 1"):
        server.pull("paper/feat", np.array([0]))  # partition 0 owns per-type paper IDs from 0
