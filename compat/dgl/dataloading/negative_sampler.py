"""``dgl.dataloading.negative_sampler``: uniform negative sampling for link prediction.

``Uniform(k)`` (DGL's ``PerSourceUniform``): for each positive edge ``(u, v)``, ``k`` pairs ``(u, v')``
with ``v'`` drawn uniformly from every node.
"""

from graphstore.client.samplers import Uniform

PerSourceUniform = Uniform

__all__ = ["PerSourceUniform", "Uniform"]
