"""node_split / edge_split: disjoint, complete, even, and local-first for 1-4 partitions x 1-8 ranks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphstore.client.rank_split import (
    even_sizes,
    partition_trainers,
    rank_partitions,
    split_by_trainer_ids,
    split_ids,
)
from graphstore.client.split import edge_split, node_split
from graphstore.partition import RangePartitionBook


def _book(node_sizes, edge_sizes=None) -> RangePartitionBook:
    edge_sizes = edge_sizes or [3 * s for s in node_sizes]
    return RangePartitionBook(
        np.concatenate(([0], np.cumsum(node_sizes))), np.concatenate(([0], np.cumsum(edge_sizes)))
    )


def _home_parts(world_size: int, num_parts: int) -> list[list[int]]:
    return [rank_partitions(r, world_size, num_parts) for r in range(world_size)]


@pytest.mark.parametrize("num_parts", [1, 2, 3, 4])
@pytest.mark.parametrize("world_size", [1, 2, 3, 4, 5, 8])
def test_rank_partition_mapping_is_consistent(num_parts, world_size):
    owners = {}
    for part_id in range(num_parts):
        ranks = partition_trainers(part_id, world_size, num_parts)
        assert ranks, "every partition has at least one trainer"
        for rank in ranks:
            assert part_id in rank_partitions(rank, world_size, num_parts)
            owners.setdefault(rank, []).append(part_id)
    assert sorted(owners) == list(range(world_size)), "every rank has a home partition"
    if world_size >= num_parts:
        sizes = [len(partition_trainers(p, world_size, num_parts)) for p in range(num_parts)]
        assert max(sizes) - min(sizes) <= 1


def _cases():
    rng = np.random.default_rng(7)
    for num_parts in (1, 2, 3, 4):
        for skew in ("balanced", "skewed", "one_part"):
            sizes = rng.integers(40, 120, num_parts)
            bounds = np.concatenate(([0], np.cumsum(sizes)))
            total = int(bounds[-1])
            if skew == "balanced":
                ids = rng.choice(total, size=total // 2, replace=False)
            elif skew == "skewed":
                # almost every selected ID lives in the first partition
                first = rng.choice(int(sizes[0]), size=int(sizes[0]) - 3, replace=False)
                rest = rng.choice(
                    np.arange(int(sizes[0]), total), size=min(5, total - int(sizes[0])), replace=False
                )
                ids = np.concatenate((first, rest))
            else:
                ids = np.arange(int(bounds[-2]), total)
            yield num_parts, skew, bounds, ids


@pytest.mark.parametrize("force_even", [True, False])
@pytest.mark.parametrize("world_size", range(1, 9))
def test_split_properties(world_size, force_even):
    for num_parts, skew, bounds, ids in _cases():
        splits = [split_ids(ids, bounds, rank, world_size, force_even) for rank in range(world_size)]
        merged = np.concatenate(splits)
        label = f"P={num_parts} T={world_size} {skew}"
        assert np.unique(merged).size == merged.size, f"{label}: splits overlap"
        np.testing.assert_array_equal(np.sort(merged), np.unique(ids), err_msg=f"{label}: union != input")
        for part in splits:
            assert np.all(np.diff(part) > 0), "each split is sorted"
        counts = np.array([s.size for s in splits])
        parts_of = [np.searchsorted(bounds, s, side="right") - 1 for s in splits]
        homes = _home_parts(world_size, num_parts)
        if force_even:
            assert counts.max() - counts.min() <= 1, f"{label}: counts {counts.tolist()}"
            if world_size >= num_parts:
                # locality first: the number of IDs taken by a home trainer is the most possible
                local = sum(int(np.isin(parts_of[r], homes[r]).sum()) for r in range(world_size))
                quotas = even_sizes(ids.size, world_size)
                part_counts = np.bincount(np.searchsorted(bounds, ids, side="right") - 1, minlength=num_parts)
                best = sum(
                    min(
                        int(part_counts[p]),
                        int(sum(quotas[r] for r in partition_trainers(p, world_size, num_parts))),
                    )
                    for p in range(num_parts)
                )
                assert local == best, f"{label}: {local} local IDs, {best} possible"
        else:
            for rank in range(world_size):
                assert np.all(np.isin(parts_of[rank], homes[rank])), f"{label}: rank {rank} got a foreign ID"
            for part_id in range(num_parts):
                ranks = partition_trainers(part_id, world_size, num_parts)
                if len(ranks) > 1:
                    sizes = counts[ranks]
                    assert sizes.max() - sizes.min() <= 1


def test_balanced_partitions_give_only_local_ids():
    bounds = np.array([0, 100, 200])
    ids = np.concatenate((np.arange(0, 100, 2), np.arange(100, 200, 2)))
    for rank, home in ((0, (0, 100)), (1, (0, 100)), (2, (100, 200)), (3, (100, 200))):
        part = split_ids(ids, bounds, rank, 4)
        assert part.size == 25
        assert np.all((home[0] <= part) & (part < home[1]))


def test_duplicates_and_empty_input():
    bounds = np.array([0, 10, 20])
    assert sum(split_ids(np.array([3, 3, 15, 15, 15]), bounds, r, 2).size for r in range(2)) == 2
    assert split_ids(np.empty(0, dtype=np.int64), bounds, 1, 3).size == 0


@pytest.mark.parametrize(
    "make_input",
    [
        lambda mask: torch.from_numpy(mask),
        lambda mask: mask,
        lambda mask: torch.from_numpy(mask.astype(np.uint8)),
        lambda mask: np.flatnonzero(mask),
        lambda mask: torch.from_numpy(np.flatnonzero(mask)),
    ],
    ids=["torch_mask", "numpy_mask", "uint8_mask", "numpy_ids", "torch_ids"],
)
def test_node_split_input_forms(make_input):
    book = _book([30, 50, 20])
    mask = np.zeros(100, dtype=bool)
    mask[::3] = True
    parts = [node_split(make_input(mask), book, rank=r, world_size=3) for r in range(3)]
    assert all(isinstance(p, torch.Tensor) and p.dtype == torch.int64 for p in parts)
    np.testing.assert_array_equal(np.sort(torch.cat(parts).numpy()), np.flatnonzero(mask))


def test_edge_split_uses_edge_bounds():
    book = _book([10, 10], edge_sizes=[5, 95])
    mask = np.ones(100, dtype=bool)
    first = edge_split(mask, book, rank=0, world_size=2)
    second = edge_split(mask, book, rank=1, world_size=2)
    assert first.numel() == second.numel() == 50
    assert torch.all(first[:5] == torch.arange(5)), "rank 0 takes its own partition's edges first"
    assert torch.all(second >= 5), "rank 1 takes only edges of its home partition"


def test_rank_and_world_from_environment(monkeypatch):
    book = _book([10, 10])
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert node_split(np.ones(20, dtype=bool), book).tolist() == list(range(10, 20))
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    assert node_split(np.ones(20, dtype=bool), book).tolist() == list(range(20))


@pytest.mark.parametrize(
    "kwargs, error, text",
    [
        ({"nodes": np.ones(5, dtype=bool)}, ValueError, "length 5"),
        ({"nodes": np.ones(20, dtype=bool), "rank": 2, "world_size": 2}, ValueError, "rank 2"),
        ({"nodes": np.ones(20, dtype=bool), "rank": 0, "world_size": 0}, ValueError, "world_size"),
        ({"nodes": np.array([0.5, 1.5])}, TypeError, "float64"),
        ({"nodes": np.array([3, 25])}, IndexError, "25"),
        (
            {"nodes": np.ones(20, dtype=bool), "ntype": "user"},
            KeyError,
            "unknown node type .user.; the graph has",
        ),
        ({"nodes": np.ones((4, 5), dtype=bool)}, ValueError, r"\(4, 5\)"),
    ],
)
def test_node_split_bad_input(kwargs, error, text):
    kwargs = {"rank": 0, "world_size": 1, **kwargs}
    with pytest.raises(error, match=text):
        node_split(partition_book=_book([10, 10]), **kwargs)


def test_node_split_without_context_or_book_asks_for_initialize():
    from graphstore.client.context import current_context

    if current_context() is not None:
        pytest.skip("a client context is open in this process")
    with pytest.raises(RuntimeError, match="initialize"):
        node_split(np.ones(20, dtype=bool), rank=0, world_size=1)


def test_split_by_trainer_ids_follows_the_ids_and_stays_even():
    bounds = np.array([0, 10, 20])
    # Partition 0's trainer IDs are 0 and 1, partition 1's 2 and 3, interleaved inside each partition.
    trainer_ids = np.array([0, 1] * 5 + [2, 3] * 5)
    ids = np.arange(20)
    splits = [split_by_trainer_ids(ids, bounds, rank, 4, trainer_ids) for rank in range(4)]
    for rank, got in enumerate(splits):
        assert (trainer_ids[got] == rank).all() and got.size == 5
    # Uneven trainer groups: the runs stay even (DGL's rule), the rest of the group goes to its neighbour.
    skewed = np.array([0] * 8 + [1] * 2 + [2] * 10)
    counts = [split_by_trainer_ids(ids, bounds, rank, 4, skewed).size for rank in range(4)]
    assert counts == [5, 5, 5, 5]
    # IDs for 8 trainers used by 4: consecutive pairs merge.
    eight = np.repeat(np.arange(8), [3, 2, 2, 3, 2, 3, 3, 2])
    merged = [split_by_trainer_ids(ids, bounds, rank, 4, eight) for rank in range(4)]
    assert sorted(np.concatenate(merged).tolist()) == list(range(20))
    assert (eight[merged[0]] // 2 == 0).all()


@pytest.mark.parametrize(
    "world_size, trainer_ids, match",
    [
        (3, np.zeros(20, dtype=np.int64), "multiple of the 2 partitions"),
        (4, np.zeros(7, dtype=np.int64), "7 entries"),
        (4, np.arange(20) % 6, "not a multiple of world_size 4"),
    ],
)
def test_split_by_trainer_ids_bad_input(world_size, trainer_ids, match):
    with pytest.raises(ValueError, match=match):
        split_by_trainer_ids(np.arange(20), np.array([0, 10, 20]), 0, world_size, trainer_ids)
