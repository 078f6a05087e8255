"""The benchmark graph every benchmark runs on: ``../shared/bench/anchor_graph.py``, made once per path.

The reference figures in the issues were measured on exactly these seeded graphs (average degree 20,
100-d float32 features), so the benchmarks generate them with that script rather than with
``graphstore generate``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ANCHOR_SCRIPT = Path(__file__).resolve().parent.parent.parent / "shared" / "bench" / "anchor_graph.py"


def make_anchor_graph(path: str | Path, num_nodes: int) -> Path:
    """The anchor graph with ``num_nodes`` nodes at ``path``, generated when the file is missing.

    Raises:
        FileNotFoundError: the shared generator script is not beside the repository.
        subprocess.CalledProcessError: the generator failed.
    """
    path = Path(path)
    if path.is_file():
        return path
    if not ANCHOR_SCRIPT.is_file():
        raise FileNotFoundError(
            f"anchor graph script {str(ANCHOR_SCRIPT)!r} not found; pass the graph's path"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    print(f"generating {path} ({num_nodes:,} nodes) ...", file=sys.stderr, flush=True)
    command = [sys.executable, str(ANCHOR_SCRIPT), "--num-nodes", str(num_nodes), "--avg-degree", "20"]
    subprocess.run([*command, "--feat-dim", "100", "--out", str(path)], check=True, stdout=subprocess.DEVNULL)
    return path
