"""``dgl.dataloading.negative_sampler``: uniform negative sampling for link prediction."""

from graphstore.client.samplers import Uniform

__all__ = ["Uniform"]
