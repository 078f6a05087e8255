"""Graph loading, METIS/random partitioning, ID relabeling, the partition book and the on-disk format.

Typical use::

    from graphstore.partition import partition_graph, load_partition, load_partition_book

    result = partition_graph("g.npz", "mygraph", num_parts=4, out_path="parts/", balance_ntypes="train_mask")
    part = load_partition(result.config_path, 0)      # PartitionData, memory-mapped
    book = load_partition_book(result.config_path)    # RangePartitionBook
"""

from graphstore.partition.array_input import graph_from_arrays
from graphstore.partition.assignment import assign_partitions
from graphstore.partition.book import RangePartitionBook
from graphstore.partition.format import load_partition, load_partition_book, read_config
from graphstore.partition.graph import GraphData
from graphstore.partition.graph_files import load_edge_list, load_graph, load_npz
from graphstore.partition.partitioner import PartitionResult, partition_graph
from graphstore.partition.policy import PartitionPolicy
from graphstore.partition.relabel import relabel
from graphstore.partition.typed_input import graph_from_typed_arrays
from graphstore.partition.types import FORMAT_VERSION, FeatureScheme, PartitionData
from graphstore.types import DEFAULT_ETYPE, DEFAULT_NTYPE, GraphSchema

__all__ = [
    "DEFAULT_ETYPE",
    "DEFAULT_NTYPE",
    "FORMAT_VERSION",
    "FeatureScheme",
    "GraphData",
    "GraphSchema",
    "PartitionData",
    "PartitionPolicy",
    "PartitionResult",
    "RangePartitionBook",
    "assign_partitions",
    "graph_from_arrays",
    "graph_from_typed_arrays",
    "load_edge_list",
    "load_graph",
    "load_npz",
    "load_partition",
    "load_partition_book",
    "partition_graph",
    "read_config",
    "relabel",
]
