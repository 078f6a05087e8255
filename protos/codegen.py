"""Regenerate (or check) the checked-in gRPC stubs from ``protos/graphstore.proto``.

``python -m graphstore.protos.codegen`` rewrites ``graphstore_pb2.py``, ``graphstore_pb2_grpc.py``
and ``graphstore_pb2.pyi``; ``--check`` regenerates into a temporary folder and exits 1 when the
checked-in files differ (CI runs it so stale stubs fail the build).

protoc writes ``import graphstore_pb2`` into the gRPC stub; the stubs live in the package
``graphstore.protos``, so that import is rewritten to a package-relative one.
"""

from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
PROTO = "graphstore.proto"
OUTPUTS = ("graphstore_pb2.py", "graphstore_pb2_grpc.py", "graphstore_pb2.pyi")


def generate(out_dir: Path) -> None:
    """Run protoc (grpcio-tools) on the proto and fix the stub's import.

    Raises:
        RuntimeError: if protoc fails.
    """
    from grpc_tools import protoc

    args = [
        "protoc",
        f"-I{PROTO_DIR}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        str(PROTO_DIR / PROTO),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {PROTO_DIR / PROTO}")
    grpc_stub = out_dir / "graphstore_pb2_grpc.py"
    text = grpc_stub.read_text()
    text = text.replace(
        "import graphstore_pb2 as graphstore__pb2", "from . import graphstore_pb2 as graphstore__pb2"
    )
    grpc_stub.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the checked-in stubs are stale")
    args = parser.parse_args(argv)
    if not args.check:
        generate(PROTO_DIR)
        print(f"regenerated {', '.join(OUTPUTS)} in {PROTO_DIR}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        stale = [
            name for name in OUTPUTS if not filecmp.cmp(Path(tmp) / name, PROTO_DIR / name, shallow=False)
        ]
    if stale:
        print(f"stale generated stubs: {stale}; run `make proto`", file=sys.stderr)
        return 1
    print("generated stubs are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
