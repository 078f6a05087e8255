"""Constants shared by the client modules, with the values DGL uses so ported scripts keep working.

``NID`` / ``EID`` are the keys under which sampled blocks and subgraphs keep the global node and
edge IDs of their nodes and edges (``block.srcdata[NID]``), exactly as in ``dgl.NID`` / ``dgl.EID``.
"""

from __future__ import annotations

NID = "_ID"
EID = "_ID"

# Environment variable that `graphstore launch` sets to the absolute path of the cluster YAML.
CONFIG_ENV = "GRAPHSTORE_CONFIG"

# Port a DGL-style ip_config.txt line without a port means (DGL's default server port).
DEFAULT_IP_CONFIG_PORT = 30050

# Prefix of the names given to unnamed DistTensors; hidden from ndata / edata iteration.
ANONYMOUS_PREFIX = "_anon."
