"""Compatibility namespaces: run a script written for another library after changing its imports.

- :mod:`graphstore.compat.dgl`: ``dgl.distributed``, ``dgl.dataloading``, ``dgl.nn.pytorch``, ``NID`` /
  ``EID`` and ``to_block``, as a DGL distributed training script uses them (``import
  graphstore.compat.dgl as dgl``). See docs/compat.md.
- :mod:`graphstore.compat.pyg`: PyTorch Geometric's ``FeatureStore``, ``GraphStore`` and a sampler over a
  DistGraph, for PyG's own ``NodeLoader`` / ``LinkLoader`` (needs torch_geometric). See docs/pyg.md.
"""
