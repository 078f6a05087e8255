"""A client that keeps reading through a network cut (run inside a network namespace by test_netns.py).

Connects with ``initialize()`` to the cluster YAML given, then loops until ``--stop`` exists: pulls
feature rows of both partitions and checks them against ``--expect-feat``, samples neighbors, and
appends one JSON line per call to ``--log``: ``{"ok": true}`` or ``{"ok": false, "code": ..., "server":
...}`` for a :class:`ServerUnavailableError`. Any other error ends it with code 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--expect-feat", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--stop", required=True)
    args = parser.parse_args()

    import numpy as np
    import torch

    from graphstore.client.api import exit_client, initialize
    from graphstore.client.dist_graph import DistGraph
    from graphstore.client.sampling import sample_neighbors
    from graphstore.errors import ServerUnavailableError

    expected = np.load(args.expect_feat)
    initialize(args.config)
    g = DistGraph("testgraph")
    ids = torch.arange(0, g.num_nodes(), 5)
    pid = os.getpid()
    with open(args.log, "a") as log:
        log.write(json.dumps({"start": True, "pid": pid}) + "\n")
        log.flush()
        while not Path(args.stop).exists():
            try:
                rows = g.ndata["feat"][ids].numpy()
                if not np.array_equal(rows, expected[ids.numpy()]):
                    print("pulled rows differ from the expected features", file=sys.stderr)
                    return 1
                sample_neighbors(g, ids[:50], 3)
                entry = {"ok": True, "pid": pid}
            except ServerUnavailableError as exc:
                entry = {
                    "ok": False,
                    "code": exc.code,
                    "server": exc.server,
                    "pid": pid,
                }
            log.write(json.dumps(entry) + "\n")
            log.flush()
            time.sleep(0.02)
    exit_client()
    return 0


if __name__ == "__main__":
    sys.exit(main())
