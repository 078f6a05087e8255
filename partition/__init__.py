"""Graph loading, METIS/random partitioning, ID relabeling, the partition book and the on-disk format."""
