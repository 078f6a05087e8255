"""Request IDs: numbered per client from 1, one client ID per process (a forked child gets its own)."""

from __future__ import annotations

import os

from graphstore.client.transport.request_ids import RequestIds
from graphstore.protos import graphstore_pb2 as pb


def test_requests_are_numbered_from_one_under_the_client_id():
    ids = RequestIds("me")
    stamped = [ids.stamp(pb.PushRequest()).request_id for _ in range(3)]
    assert [(r.client, r.seq) for r in stamped] == [("me", 1), ("me", 2), ("me", 3)]
    assert RequestIds().client != RequestIds().client


def test_a_forked_child_numbers_under_a_client_id_of_its_own():
    ids = RequestIds("parent")
    ids.stamp(pb.DeleteRequest())
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports its ID and exits at once
        request_id = ids.stamp(pb.DeleteRequest()).request_id
        os.write(write, f"{request_id.client} {request_id.seq}".encode())
        os._exit(0)
    os.close(write)
    client, seq = os.read(read, 1000).decode().split()
    os.close(read)
    os.waitpid(pid, 0)
    assert client != "parent" and seq == "1"
    assert ids.stamp(pb.DeleteRequest()).request_id.seq == 2  # the parent goes on
