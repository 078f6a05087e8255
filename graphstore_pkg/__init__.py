"""graphstore: a distributed graph store for training graph neural networks.

The subpackages live in top-level folders of the repository and are mapped into this
namespace by ``pyproject.toml``: ``graphstore.partition``, ``graphstore.server``,
``graphstore.client``, ``graphstore.launcher``, ``graphstore.protos`` and
``graphstore.compat``.
"""

__version__ = "0.1.0"
