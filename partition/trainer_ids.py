"""Trainer IDs of a partitioned graph's nodes: DGL's ``num_trainers_per_machine``.

DGL's ``partition_graph(..., num_trainers_per_machine=N)`` stores a ``trainer_id`` node array: the
trainer of each node, ``part_id * N + local trainer``, so that ``node_split(..., node_trainer_ids=
g.ndata["trainer_id"])`` gives each of a machine's N trainers its own group of that machine's nodes.
Here each partition's nodes of each type are cut into N contiguous runs of their IDs (the partition's
own order, which follows the partitioner's), run ``t`` going to local trainer ``t``.
"""

from __future__ import annotations

import os

import numpy as np

from graphstore.partition.format import NODE_FEAT_DIR, book_from_config, feature_file, read_config, schema_of
from graphstore.partition.writer import write_config, write_npy

TRAINER_ID = "trainer_id"


def local_trainer_ids(num_nodes: int, num_trainers: int) -> np.ndarray:
    """Local trainer of each of ``num_nodes`` consecutive nodes: ``num_trainers`` even contiguous runs.

    Raises:
        ValueError: ``num_trainers`` below 1 or ``num_nodes`` negative.
    """
    if num_trainers < 1:
        raise ValueError(f"num_trainers must be at least 1, got {num_trainers}")
    if num_nodes < 0:
        raise ValueError(f"num_nodes must be >= 0, got {num_nodes}")
    return np.arange(num_nodes, dtype=np.int64) * num_trainers // max(num_nodes, 1)


def add_trainer_ids(config_path: str, num_trainers_per_machine: int) -> dict:
    """Write the ``trainer_id`` node array of every node type into every partition, and its scheme.

    Args:
        config_path: the partition config ``NAME.json``.
        num_trainers_per_machine: trainers per partition (N); node IDs get ``part_id * N + 0..N-1``.

    Returns:
        The rewritten config.

    Raises:
        ValueError: ``num_trainers_per_machine`` below 1, or the graph already has a ``trainer_id``
            node array.
    """
    if int(num_trainers_per_machine) < 1:
        raise ValueError(f"num_trainers_per_machine must be at least 1, got {num_trainers_per_machine}")
    config = read_config(config_path)
    schema = schema_of(config)
    book = book_from_config(config, 0, config_path)
    folder = os.path.dirname(os.path.abspath(config_path))
    node_feats = config.setdefault("node_feats", {})
    for ntype in schema.ntypes:
        if TRAINER_ID in node_feats.get(ntype, {}):
            raise ValueError(f"node type {ntype!r} already has a {TRAINER_ID!r} array in {config_path}")
        bounds = np.asarray(book.node_type_bounds(None if schema.is_homogeneous else ntype), dtype=np.int64)
        for part_id, part in enumerate(config["parts"]):
            count = int(bounds[part_id + 1] - bounds[part_id])
            ids = part_id * num_trainers_per_machine + local_trainer_ids(count, num_trainers_per_machine)
            path = feature_file(os.path.join(folder, part["path"]), NODE_FEAT_DIR, schema, ntype, TRAINER_ID)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_npy(path, np.int64, ids.shape, iter([ids]))
        node_feats.setdefault(ntype, {})[TRAINER_ID] = {"dtype": "int64", "shape": []}
    config["num_trainers_per_machine"] = int(num_trainers_per_machine)
    write_config(folder, config)
    return config
