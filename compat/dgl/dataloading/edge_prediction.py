"""``dgl.dataloading.as_edge_prediction_sampler``: a neighbor sampler plus what link prediction adds
(which edges to keep out of the blocks, and the negative sampler), for ``DistEdgeDataLoader``."""

from __future__ import annotations


class EdgePredictionSampler:
    """A neighbor sampler with link-prediction options (``dgl.dataloading.EdgePredictionSampler``).

    Args:
        sampler: the neighbor sampler building the blocks.
        exclude: ``None``, ``'self'`` (keep the batch's edges out of the blocks) or ``'reverse_id'``
            (also their reverse edges, from ``reverse_eids``).
        reverse_eids: ``reverse_eids[e]`` is the ID of edge ``e``'s reverse (for ``'reverse_id'``).
        reverse_etypes: not supported (typed graphs); must be None.
        negative_sampler: e.g. ``negative_sampler.Uniform(k)``.
        prefetch_labels: not supported; must be None.

    Raises:
        NotImplementedError: ``reverse_etypes``, ``prefetch_labels``, or an ``exclude`` graphstore does
            not implement (``'reverse_types'``, a callable).
    """

    EXCLUDE = (None, "self", "reverse_id")

    def __init__(
        self,
        sampler,
        exclude=None,
        reverse_eids=None,
        reverse_etypes=None,
        negative_sampler=None,
        prefetch_labels=None,
    ):
        if reverse_etypes is not None:
            raise NotImplementedError("as_edge_prediction_sampler(reverse_etypes=...) is not supported")
        if prefetch_labels:
            raise NotImplementedError("as_edge_prediction_sampler(prefetch_labels=...) is not supported")
        if callable(exclude) or exclude not in self.EXCLUDE:
            raise NotImplementedError(
                f"as_edge_prediction_sampler(exclude={exclude!r}) is not supported; use one of {self.EXCLUDE}"
            )
        self.sampler = sampler
        self.exclude = exclude
        self.reverse_eids = reverse_eids
        self.negative_sampler = negative_sampler

    def loader_options(self) -> dict:
        """The edge loader's keyword arguments these options stand for (those given)."""
        options = {
            "exclude": self.exclude,
            "reverse_eids": self.reverse_eids,
            "negative_sampler": self.negative_sampler,
        }
        return {name: value for name, value in options.items() if value is not None}


# DGL's function of the same arguments: building the sampler is all it does.
as_edge_prediction_sampler = EdgePredictionSampler
