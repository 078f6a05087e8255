"""The models of entity classification on a typed graph (``examples/train_rgcn.py``): a relational GCN over
typed blocks whose input is each node type's features or, for the featureless types, learnable
``DistEmbedding`` rows; or the classified type's features alone through the MLP baseline."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from graphstore.client import NID, DistGraph, DistHeteroEmbedding, RelGraphConv
from graphstore.client.training.config import RGCNConfig
from graphstore.client.training.features import feature_width
from graphstore.client.training.models import MLP
from graphstore.types import InitSpec


class RelationalInput(nn.Module):
    """Each node type's input at the model's width: its features through a linear projection, or its
    rows of a :class:`DistHeteroEmbedding` (looked up by the first block's source node IDs).

    Args:
        feature_widths: ``{ntype: width}`` of the types with features.
        hidden: the model's width (the embeddings' width).
        embedding: the rows of the featureless types, or None.
    """

    def __init__(self, feature_widths: dict[str, int], hidden: int, embedding: DistHeteroEmbedding | None):
        super().__init__()
        self.project = nn.ModuleDict({t: nn.Linear(w, hidden) for t, w in feature_widths.items()})
        self.embedding = embedding

    def forward(self, block, x: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``{ntype: [num_src_nodes(ntype), hidden]}`` for every type with features or rows."""
        h = {t: self.project[t](rows) for t, rows in x.items() if t in self.project}
        if self.embedding is not None:
            device = next(iter(h.values())).device if h else None
            ids = {t: block.srcnodes[t].data[NID].cpu() for t in self.embedding}
            h.update(self.embedding(ids, device=device))
        return h


class EntityClassifier(nn.Module):
    """Relational GCN layers (:class:`RelGraphConv`, one relation per canonical edge type, self-loops)
    over typed blocks, returning the logits of the classified type's output nodes.

    Args:
        inputs: the input layer.
        hidden: hidden width.
        n_classes: output width.
        num_rels: the graph's canonical edge types.
        layers: number of relational layers (one block each).
        regularizer, num_bases: the relation weights' decomposition (``'none'``: full weights).
        dropout: dropout after each hidden layer.
        ntype: the classified node type.
    """

    def __init__(
        self,
        inputs: RelationalInput,
        hidden: int,
        n_classes: int,
        num_rels: int,
        layers: int,
        regularizer: str,
        num_bases: int,
        dropout: float,
        ntype: str,
    ):
        super().__init__()
        self.inputs = inputs
        self.ntype = ntype
        decomposition = None if regularizer == "none" else regularizer
        widths = [hidden] * layers + [n_classes]
        self.layers = nn.ModuleList(
            RelGraphConv(
                widths[i],
                widths[i + 1],
                num_rels,
                regularizer=decomposition,
                num_bases=num_bases,
                activation=F.relu if i < layers - 1 else None,
                self_loop=True,
                dropout=dropout if i < layers - 1 else 0.0,
            )
            for i in range(layers)
        )

    def forward(self, blocks, x: dict[str, torch.Tensor]) -> torch.Tensor:
        """Logits ``[num_dst_nodes(ntype), n_classes]`` of the last block's destination nodes.

        Raises:
            ValueError: a number of blocks other than the number of layers.
        """
        if len(blocks) != len(self.layers):
            raise ValueError(f"expected {len(self.layers)} blocks (one per layer), got {len(blocks)}")
        h = self.inputs(blocks[0], x)
        for layer, block in zip(self.layers, blocks, strict=True):
            h = layer(block, h)
        return h[self.ntype]


def build_relational_model(
    config: RGCNConfig, g: DistGraph, n_classes: int
) -> tuple[nn.Module, DistHeteroEmbedding | None]:
    """The model ``config.model`` names, and the embedding rows it trains (for a sparse optimizer).

    ``rgcn``: :class:`EntityClassifier` over every node type (features where a type has
    ``config.feat_name``, seeded embedding rows of width ``hidden`` elsewhere); ``mlp``: the classified
    type's features only.

    Args:
        config: the run's settings.
        g: the typed graph.
        n_classes: number of classes.

    Returns:
        ``(model, embedding)``; the embedding is None when the model has none.
    """
    widths = {
        t: feature_width(g.nodes[t].data[config.feat_name])
        for t in g.ntypes
        if config.feat_name in g.nodes[t].data
    }
    if config.model == "mlp":
        mlp = MLP(
            widths[config.target_ntype],
            config.hidden,
            n_classes,
            config.layers,
            config.dropout,
            config.target_ntype,
        )
        return mlp, None
    featureless = [t for t in g.ntypes if t not in widths]
    embedding = None
    if featureless:
        init = InitSpec("uniform", -config.init_scale, config.init_scale, seed=config.seed)
        embedding = DistHeteroEmbedding(
            g, featureless, config.hidden, name=config.embedding_name, init_func=init
        )
    model = EntityClassifier(
        RelationalInput(widths, config.hidden, embedding),
        config.hidden,
        n_classes,
        len(g.canonical_etypes),
        config.layers,
        config.regularizer,
        config.num_bases,
        config.dropout,
        config.target_ntype,
    )
    return model, embedding
