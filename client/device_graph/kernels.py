"""Neighbor sampling and relabeling kernels in torch, for whichever device holds the graph.

These are the device counterparts of :mod:`graphstore.server.sampler` (numpy, on the servers) and
:mod:`graphstore.client.local_ids`: the same rules, the same output layout, written with torch operations
only, so they run on a GPU (over a CSR in GPU memory, or in pinned host memory read through unified
addressing) and, for the tests, on the CPU. No Python loop runs per seed or per edge; the one loop runs
over the picks of Floyd's algorithm (the fanout, a handful of element-wise kernels each).

Sampling rules (``dgl.sampling.sample_neighbors``'s, and the servers'):

- ``fanout == -1``: every neighbor (every neighbor with a positive weight when weighted);
- without replacement: ``min(degree, fanout)`` distinct edges per seed (weighted: among the edges of
  positive weight, drawn in proportion to the weights);
- with replacement: exactly ``fanout`` edges per seed, none for a seed without (positive-weight) edges;
- zero-weight edges are never drawn.

Every function returns edge *positions* into the CSR and, per edge, the index of its seed; the edges of
one seed are contiguous and the seeds come in order, so the result is already grouped by destination.
"""

from __future__ import annotations

import torch

from graphstore.sampling_rules import check_fanout


def segment_index(counts: torch.Tensor, total: int | None = None) -> torch.Tensor:
    """``repeat_interleave(arange(len(counts)), counts)``: the segment of each element of a concatenation.

    Args:
        counts: non-negative int64 segment lengths.
        total: ``counts.sum()`` when the caller knows it (saves a device synchronization).
    """
    index = torch.arange(counts.numel(), dtype=torch.int64, device=counts.device)
    return torch.repeat_interleave(index, counts, output_size=total)


def expand_ranges(starts: torch.Tensor, counts: torch.Tensor, total: int | None = None) -> torch.Tensor:
    """Concatenate ``arange(starts[i], starts[i] + counts[i])`` for all ``i``.

    Args:
        starts: int64 start of each range.
        counts: non-negative int64 length of each range.
        total: ``counts.sum()`` when known.

    Returns:
        int64 tensor of length ``counts.sum()``.
    """
    if total is None:
        total = int(counts.sum())
    if total == 0:
        return torch.empty(0, dtype=torch.int64, device=counts.device)
    seg = segment_index(counts, total)
    first = torch.cumsum(counts, 0) - counts
    return starts[seg] + (torch.arange(total, dtype=torch.int64, device=counts.device) - first[seg])


def floyd_distinct(high: torch.Tensor, k: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``k`` distinct integers in ``[0, high[i])`` per row (``high[i] >= k``), each ``k``-subset equally
    likely (Floyd's algorithm, vectorized over the rows).

    Floyd: for ``j`` in ``[n - k, n)``, draw ``t`` uniform in ``[0, j]``; take ``j`` instead when ``t`` was
    taken already. The picks are held pick-major (``[k, rows]``), so "was ``t`` taken" is one comparison
    against the earlier picks' rows.

    Args:
        high: int64 ``[rows]`` upper bounds.
        k: picks per row.
        generator: the random generator (on ``high``'s device).

    Returns:
        int64 ``[rows, k]``.
    """
    rows = high.numel()
    device = high.device
    if k == 0 or rows == 0:
        return torch.empty((rows, k), dtype=torch.int64, device=device)
    j = high.unsqueeze(0) - k + torch.arange(k, dtype=torch.int64, device=device).unsqueeze(1)  # [k, rows]
    uniform = torch.rand((k, rows), generator=generator, device=device, dtype=torch.float64)
    # float64 keeps every integer below 2^52 reachable; the clamp guards the rounding of u * (j + 1).
    draws = torch.minimum((uniform * (j + 1).to(torch.float64)).to(torch.int64), j)
    chosen = torch.empty_like(j)
    chosen[0] = draws[0]
    for pick in range(1, k):
        t = draws[pick]
        taken = (chosen[:pick] == t).any(dim=0)
        chosen[pick] = torch.where(taken, j[pick], t)
    return chosen.T


def all_neighbors(indptr: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Every edge of every row: ``(positions, seed_index)``."""
    starts = indptr[rows]
    deg = indptr[rows + 1] - starts
    total = int(deg.sum())
    return expand_ranges(starts, deg, total), segment_index(deg, total)


def sample_uniform(
    indptr: torch.Tensor,
    rows: torch.Tensor,
    fanout: int,
    replace: bool = False,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Uniform neighbor sampling around ``rows`` of a CSR.

    Args:
        indptr: int64 CSR row pointer (``n + 1``), on the device the sampling runs on.
        rows: int64 local rows to sample around (may repeat; each occurrence is sampled).
        fanout: edges per row, ``-1`` for all.
        replace: with replacement.
        generator: the random generator.

    Returns:
        ``(positions, seed_index)``: CSR positions and the index into ``rows`` of each edge's row.

    Raises:
        ValueError: ``fanout < -1``.
    """
    fanout = check_fanout(fanout)
    device = rows.device
    empty = torch.empty(0, dtype=torch.int64, device=device)
    if fanout == -1:
        return all_neighbors(indptr, rows)
    if fanout == 0 or rows.numel() == 0:
        return empty, empty
    starts = indptr[rows]
    deg = indptr[rows + 1] - starts
    if replace:
        counts = torch.where(deg > 0, fanout, 0)
        total = int(counts.sum())
        seed_index = segment_index(counts, total)
        row_deg = deg[seed_index]
        uniform = torch.rand(total, generator=generator, device=device, dtype=torch.float64)
        offsets = torch.minimum((uniform * row_deg.to(torch.float64)).to(torch.int64), row_deg - 1)
        return starts[seed_index] + offsets, seed_index
    # Floyd on every row (rows of degree <= fanout take picks 0..fanout-1 and keep those below the degree:
    # all their edges), then one compaction: no split of the rows, one synchronization.
    partial = deg > fanout
    picks = floyd_distinct(torch.where(partial, deg, fanout), fanout, generator)
    ordered = torch.arange(fanout, dtype=torch.int64, device=device).expand_as(picks)
    picks = torch.where(partial.unsqueeze(1), picks, ordered)
    keep = picks < deg.unsqueeze(1)
    positions = (starts.unsqueeze(1) + picks)[keep]
    seed_index = torch.arange(rows.numel(), dtype=torch.int64, device=device).unsqueeze(1).expand_as(picks)
    return positions, seed_index[keep]


def _rank_in_segment(segment: torch.Tensor, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Order elements by ``(segment, key)``; that order and each ordered element's rank in its segment."""
    order = torch.argsort(keys, stable=True)
    order = order[torch.argsort(segment[order], stable=True)]
    seg_sorted = segment[order]
    counts = torch.bincount(seg_sorted)
    first = torch.cumsum(counts, 0) - counts
    rank = torch.arange(order.numel(), dtype=torch.int64, device=order.device) - first[seg_sorted]
    return order, rank


def sample_weighted(
    indptr: torch.Tensor,
    weights: torch.Tensor,
    rows: torch.Tensor,
    fanout: int,
    replace: bool = False,
    generator: torch.Generator | None = None,
    arg: str = "prob",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Neighbor sampling in proportion to per-edge weights; zero-weight edges are never drawn.

    Without replacement each row keeps the ``min(fanout, #positive)`` edges of smallest exponential clock
    ``E / w`` (Efraimidis-Spirakis: successive draws in proportion to the weights); with replacement
    each draw inverts the row's cumulative weights.

    Args:
        indptr: CSR row pointer.
        weights: one non-negative finite weight per CSR position.
        rows, fanout, replace, generator: see :func:`sample_uniform`.
        arg: the weights' name for error messages.

    Returns:
        ``(positions, seed_index)`` as :func:`sample_uniform`.

    Raises:
        ValueError: ``fanout < -1``; a negative, NaN or infinite weight among the rows' edges.
    """
    fanout = check_fanout(fanout)
    device = rows.device
    empty = torch.empty(0, dtype=torch.int64, device=device)
    cand, seg = all_neighbors(indptr, rows)
    w = weights[cand].to(torch.float64).reshape(cand.numel())
    if w.numel() and bool((~torch.isfinite(w) | (w < 0)).any()):
        bad = w[~torch.isfinite(w) | (w < 0)][0]
        raise ValueError(f"{arg}: edge weights must be finite and non-negative, found {float(bad)}")
    positive = w > 0
    if fanout == -1:
        return cand[positive], seg[positive]
    if fanout == 0 or cand.numel() == 0:
        return empty, empty
    if not replace:
        clocks = torch.empty_like(w).exponential_(generator=generator)
        keys = torch.where(positive, clocks / w, torch.full_like(w, float("inf")))
        order, rank = _rank_in_segment(seg, keys)
        keep = (rank < fanout) & torch.isfinite(keys[order])
        picked = order[keep]  # grouped by row, rows in order
        return cand[picked], seg[picked]
    deg = indptr[rows + 1] - indptr[rows]
    total = torch.zeros(rows.numel(), dtype=torch.float64, device=device).index_add_(0, seg, w)
    cumulative = torch.cumsum(w, 0)
    seg_first = torch.cumsum(deg, 0) - deg
    base = torch.cat([torch.zeros(1, dtype=torch.float64, device=device), cumulative])[seg_first]
    counts = torch.where(total > 0, fanout, 0)
    seed_index = segment_index(counts)
    uniform = torch.rand(seed_index.numel(), generator=generator, device=device, dtype=torch.float64)
    target = base[seed_index] + uniform * total[seed_index]
    picked = torch.searchsorted(cumulative, target, right=True)
    # Rounding can push a target onto the row's last cumulative value: take its last positive edge.
    positions = torch.arange(cand.numel(), dtype=torch.int64, device=device)
    last_positive = torch.full((rows.numel(),), -1, dtype=torch.int64, device=device)
    last_positive.scatter_reduce_(0, seg[positive], positions[positive], reduce="amax")
    overflow = picked >= (seg_first + deg)[seed_index]
    picked = torch.where(overflow, last_positive[seed_index], picked)
    return cand[picked], seed_index


def sample_rows(
    indptr: torch.Tensor,
    rows: torch.Tensor,
    fanout: int,
    replace: bool = False,
    weights: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`sample_uniform`, or :func:`sample_weighted` when ``weights`` are given."""
    if weights is None:
        return sample_uniform(indptr, rows, fanout, replace, generator)
    return sample_weighted(indptr, weights, rows, fanout, replace, generator)


def sample_rows_avoiding(
    indptr: torch.Tensor,
    rows: torch.Tensor,
    fanout: int,
    excluded_positions: torch.Tensor,
    replace: bool = False,
    weights: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`sample_rows` that never draws an excluded CSR position: the rows that hold one sample among
    their other edges (so they still get ``min(fanout, remaining degree)`` edges).

    Args:
        indptr, rows, fanout, replace, weights, generator: see :func:`sample_rows`.
        excluded_positions: int64 CSR positions never to draw.

    Returns:
        ``(positions, seed_index)``: the unaffected rows' edges first, then the affected rows'.
    """
    if excluded_positions.numel() == 0:
        return sample_rows(indptr, rows, fanout, replace, weights, generator)
    owner = torch.searchsorted(indptr, excluded_positions, right=True) - 1
    affected = torch.isin(rows, owner)
    clean = torch.nonzero(~affected).reshape(-1)
    hit = torch.nonzero(affected).reshape(-1)
    positions, seed_index = sample_rows(indptr, rows[clean], fanout, replace, weights, generator)
    if hit.numel() == 0:
        return positions, clean[seed_index]
    candidates, segment = all_neighbors(indptr, rows[hit])
    keep = ~torch.isin(candidates, excluded_positions)
    candidates, segment = candidates[keep], segment[keep]
    sub_indptr = torch.zeros(hit.numel() + 1, dtype=torch.int64, device=rows.device)
    torch.cumsum(torch.bincount(segment, minlength=hit.numel()), 0, out=sub_indptr[1:])
    sub_weights = None if weights is None else weights[candidates]
    sub_rows = torch.arange(hit.numel(), dtype=torch.int64, device=rows.device)
    sub_positions, sub_index = sample_rows(sub_indptr, sub_rows, fanout, replace, sub_weights, generator)
    return (
        torch.cat([positions, candidates[sub_positions]]),
        torch.cat([clean[seed_index], hit[sub_index]]),
    )


def relabel_with_heads(
    heads: torch.Tensor, others: torch.Tensor, check_heads: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Compact local IDs: ``heads`` keep positions ``0..len(heads)-1``, every other ID of ``others``
    follows in increasing ID order (the order :func:`graphstore.client.local_ids.compact_ids` gives).

    Args:
        heads: unique IDs that come first, in this order.
        others: IDs to relabel (may repeat, may hold heads).
        check_heads: raise on repeated heads (one device synchronization more).

    Returns:
        ``(unique_ids, local_others)``: the local -> global table and the local ID of each of ``others``.

    Raises:
        ValueError: ``check_heads`` and a repeated head.
    """
    num_heads = heads.numel()
    everything = torch.cat([heads, others])
    uniq, inverse = torch.unique(everything, sorted=True, return_inverse=True)
    head_slot = inverse[:num_heads]
    is_head = torch.zeros(uniq.numel(), dtype=torch.bool, device=uniq.device)
    is_head[head_slot] = True
    if check_heads and int(is_head.sum()) != num_heads:
        raise ValueError(f"dst_nodes must be unique; {num_heads - int(is_head.sum())} duplicates found")
    local = torch.cumsum(~is_head, 0) - 1 + num_heads
    local[head_slot] = torch.arange(num_heads, dtype=torch.int64, device=uniq.device)
    unique_ids = torch.empty_like(uniq)
    unique_ids[local] = uniq
    return unique_ids, local[inverse[num_heads:]]
