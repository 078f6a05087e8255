"""DGL itself, for differential tests: DGL 2.1 with its own torch lives in a venv of its own (``make
bench-dgl`` builds ``.venv-dgl``; ``DGL_VENV`` names another), run as a subprocess. Tests that need it
call :func:`require_dgl` and are skipped cleanly where it is absent (CI has none).

    python = require_dgl()
    out = run_dgl(SCRIPT, str(tmp_path))   # SCRIPT runs under DGL's python with `import dgl`
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@functools.cache
def dgl_python() -> str | None:
    """The DGL venv's interpreter when it exists and imports dgl, else None."""
    venv = Path(os.environ.get("DGL_VENV", REPO / ".venv-dgl"))
    python = venv / "bin" / "python"
    if not python.is_file():
        return None
    probe = subprocess.run(
        [str(python), "-c", "import dgl"], capture_output=True, timeout=300, env=_dgl_env()
    )
    return str(python) if probe.returncode == 0 else None


def _dgl_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GRAPHSTORE_CONFIG")}
    env["DGLBACKEND"] = "pytorch"
    return env


def require_dgl() -> str:
    """The DGL interpreter; skips the test when there is none."""
    python = dgl_python()
    if python is None:
        pytest.skip("DGL's venv is absent (make bench-dgl builds .venv-dgl; DGL_VENV names another)")
    return python


def run_dgl(script: str, *args: str, timeout: int = 600) -> str:
    """Run ``script`` (Python source) under DGL's interpreter with ``args`` as ``sys.argv[1:]``.

    Returns:
        Its standard output.

    Raises:
        AssertionError: a non-zero exit (the message holds the end of its standard error).
    """
    result = subprocess.run(
        [require_dgl(), "-c", script, *args], capture_output=True, text=True, timeout=timeout, env=_dgl_env()
    )
    assert result.returncode == 0, f"DGL script failed ({result.returncode}):\n{result.stderr[-3000:]}"
    return result.stdout
