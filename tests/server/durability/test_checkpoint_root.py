"""Checkpoint and Restore names stay under the server's checkpoint root, and file-system failures become
statuses naming the checkpoint (never INTERNAL): a real full tmpfs, a real read-only bind mount,
injected EACCES (root ignores permissions), real ENAMETOOLONG and ENOTDIR."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess

import grpc
import numpy as np
import pytest

from graphstore.errors import StorageFullError
from graphstore.launcher.local_servers import start_servers
from graphstore.partition import load_partition
from graphstore.protos import graphstore_pb2 as pb
from graphstore.protos.service import SERVICE_NAME
from graphstore.server.durability.checkpoint_root import CheckpointRoot, NamedCheckpoints
from graphstore.server.partition_server import PartitionServer
from tests.server.conftest import NUM_NODES


def test_names_resolve_under_the_root_and_escapes_are_refused(tmp_path):
    root = CheckpointRoot(tmp_path / "root")
    assert root.resolve("epoch-3") == str(tmp_path / "root" / "epoch-3")
    assert root.resolve("runs/a/./best") == str(tmp_path / "root" / "runs" / "a" / "best")
    for bad, why in [
        ("/etc", "absolute"),
        ("~/x", "absolute"),
        ("../outside", "'..'"),
        ("a/../../b", "'..'"),
        ("", "name"),
        (".", "name"),
        ("a\x00b", "NUL"),
    ]:
        with pytest.raises(ValueError, match=why):
            root.resolve(bad)
    (tmp_path / "root").mkdir()
    os.symlink(tmp_path, tmp_path / "root" / "link")
    with pytest.raises(ValueError, match="symbolic link"):
        root.resolve("link/x")
    assert CheckpointRoot.for_partition(str(tmp_path / "g" / "g.json")).root == str(
        tmp_path / "g" / "checkpoints"
    )


@pytest.mark.parametrize(
    ("code", "kind", "problem"),
    [
        (errno.EACCES, PermissionError, "permission denied"),
        (errno.EROFS, PermissionError, "read-only"),
        (errno.ENOSPC, StorageFullError, "full"),
        (errno.EDQUOT, StorageFullError, "quota"),
        (errno.ENAMETOOLONG, ValueError, "too long"),
        (errno.ENOTDIR, ValueError, "not a folder"),
        (errno.EIO, OSError, "Input/output error"),
    ],
)
def test_file_errors_name_the_checkpoint(tmp_path, code, kind, problem):
    root = CheckpointRoot(tmp_path)

    class FailingPartition:
        def checkpoint(self, folder, names, save_id=None):
            raise OSError(code, os.strerror(code), os.path.join(folder, "emb", "shard-0-of-2.npy"))

    with pytest.raises(kind, match=f"path: checkpoint 'ck': .*{problem}.*shard-0-of-2.npy") as exc:
        NamedCheckpoints(root, FailingPartition()).checkpoint("ck", None)
    assert type(exc.value) is kind


def test_real_name_too_long_and_not_a_folder(graph_files, tmp_path):
    server = PartitionServer(load_partition(graph_files[0], 0), checkpoint_root=str(tmp_path))
    server.init_tensor("emb", (NUM_NODES, 2), "float32", "node")
    named = NamedCheckpoints(server.checkpoint_root, server)
    with pytest.raises(ValueError, match="too long"):
        named.checkpoint("x" * 300, None)
    (tmp_path / "file").write_text("not a folder")
    with pytest.raises(ValueError, match="not a folder"):
        named.checkpoint("file/ck", None)


@contextlib.contextmanager
def _mounted(*args: str):
    """``mount ARGS``; unmounted at the end (the tests run as root)."""
    result = subprocess.run(["mount", *args], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"mount {' '.join(args)} failed: {result.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", args[-1]], check=True)


def _call(channel: grpc.Channel, method: str, request) -> grpc.RpcError:
    call = channel.unary_unary(f"/{SERVICE_NAME}/{method}")
    with pytest.raises(grpc.RpcError) as exc:
        call(request.SerializeToString(), timeout=20)
    return exc.value


def test_full_and_read_only_file_systems_over_the_wire(graph_files, tmp_path):
    small, read_only, source = tmp_path / "small", tmp_path / "ro", tmp_path / "source"
    for folder in (small, read_only, source):
        folder.mkdir()
    with _mounted("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)):
        with _mounted("--bind", "-o", "ro", str(source), str(read_only)):
            full_group = start_servers(
                graph_files[0], 1, ("--checkpoint-root", str(small)), log_dir=tmp_path / "l1"
            )
            ro_group = start_servers(
                graph_files[0], 1, ("--checkpoint-root", str(read_only)), log_dir=tmp_path / "l2"
            )
            try:
                for group, code, words in [
                    (full_group, grpc.StatusCode.RESOURCE_EXHAUSTED, "the file system is full"),
                    (ro_group, grpc.StatusCode.FAILED_PRECONDITION, "the file system is read-only"),
                ]:
                    channel = grpc.insecure_channel(group.addresses[0])
                    init = pb.InitRequest(name="emb", dtype=pb.FLOAT32, policy=pb.NODE)
                    init.shape[:] = [NUM_NODES, 64]  # 300 x 64 x 4 bytes: more than 64 KiB
                    channel.unary_unary(f"/{SERVICE_NAME}/Init")(init.SerializeToString(), timeout=20)
                    err = _call(channel, "Checkpoint", pb.CheckpointRequest(path="epoch-1"))
                    assert err.code() == code and words in err.details() and "'epoch-1'" in err.details()
                    err = _call(channel, "Checkpoint", pb.CheckpointRequest(path="/tmp/elsewhere"))
                    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "absolute" in err.details()
                    err = _call(channel, "Restore", pb.RestoreRequest(path="../source"))
                    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "'..'" in err.details()
                    # Still serving.
                    pull = pb.PullRequest(name="emb")
                    pull.ids.dtype, pull.ids.data = pb.INT64, np.array([0], np.int64).tobytes()
                    pull.ids.shape[:] = [1]
                    channel.unary_unary(f"/{SERVICE_NAME}/Pull")(pull.SerializeToString(), timeout=20)
                    channel.close()
            finally:
                full_group.stop()
                ro_group.stop()
    assert not any(source.iterdir())
