"""What every benchmark does with its figures: print them as JSON, and save the same text with ``--out``."""

from __future__ import annotations

import json
from pathlib import Path


def emit_report(report: dict, out: str | None, indent: int = 2) -> None:
    """Print ``report`` as JSON on stdout and, when ``out`` is given, write the same text there.

    Args:
        report: the benchmark's figures.
        out: the ``--out`` path (its folder is created), or None / '' for stdout only.
        indent: JSON indentation.
    """
    text = json.dumps(report, indent=indent)
    print(text)
    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
