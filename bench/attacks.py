"""The denial-of-service requests ``bench/fuzz.py`` throws at a server, one function each.

Each takes a raw channel and the cluster's token and returns what the server answered (status code
names and their counts, or the first message), so the report shows that every attack got a status.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent import futures

import grpc
import numpy as np

from graphstore.auth import auth_metadata
from graphstore.protos import graphstore_pb2 as pb
from graphstore.protos.codec import write_ids
from graphstore.protos.service import SERVICE_NAME

NUM_NODES = 20_000
MB = 1024 * 1024


def _call(channel: grpc.Channel, method: str, request, token: str, timeout: float = 30.0) -> str:
    """One call; ``OK`` or ``CODE: message``."""
    try:
        channel.unary_unary(f"/{SERVICE_NAME}/{method}")(
            request.SerializeToString(), timeout=timeout, metadata=auth_metadata(token)
        )
        return "OK"
    except grpc.RpcError as err:
        return f"{err.code().name}: {err.details()[:160]}"


def huge_sample(channel, token):
    """One seed, fanout 2^31-1 with replacement (30 bytes that used to get the server OOM-killed)."""
    request = pb.SampleRequest(fanout=2**31 - 1, replace=True)
    write_ids(request.seeds, [0])
    return _call(channel, "SampleNeighbors", request, token)


def wide_sample(channel, token):
    """4 seeds x fanout 2^31-1 (a 48 GiB answer)."""
    request = pb.SampleRequest(fanout=2**31 - 1, replace=True)
    write_ids(request.seeds, [0, 1, 2, 3])
    return _call(channel, "SampleNeighbors", request, token)


def huge_pull(channel, token):
    """A 4M-ID pull of 100-float rows (a 1.6 GB answer)."""
    request = pb.PullRequest(name="feat")
    write_ids(request.ids, np.arange(4_000_000) % (NUM_NODES // 2))
    return _call(channel, "Pull", request, token)


def deep_init(channel, token):
    """A 13-dimensional tensor."""
    request = pb.InitRequest(name="deep", dtype=pb.FLOAT32, policy=pb.NODE)
    request.shape[:] = [NUM_NODES] + [2] * 12
    return _call(channel, "Init", request, token)


def overflowing_init(channel, token):
    """A shape whose element count overflows int64."""
    request = pb.InitRequest(name="overflow", dtype=pb.FLOAT64, policy=pb.NODE)
    request.shape[:] = [NUM_NODES, 2**40, 2**30]
    return _call(channel, "Init", request, token)


def six_big_inits(channel, token):
    """Six concurrent 400 MB Inits (the server runs in a 2 GiB cgroup), deleted again afterwards."""

    def one(k: int) -> str:
        request = pb.InitRequest(name=f"big{k}", dtype=pb.FLOAT32, policy=pb.NODE)
        request.shape[:] = [NUM_NODES, 10_000]  # 10,000 local rows x 40 KB: 400 MB on this server
        return _call(channel, "Init", request, token, timeout=120)

    with futures.ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(one, range(6)))
    for k in range(6):
        _call(channel, "Delete", pb.DeleteRequest(name=f"big{k}"), token)
    refusal = next((a for a in answers if a != "OK"), "")
    return {**Counter(a.split(":")[0] for a in answers), "refusal": refusal}


def absurd_barrier_timeout(channel, token):
    """``timeout_s=1e300``."""
    request = pb.BarrierRequest(name="b", count=2, timeout_s=1e300, participant="a")
    return _call(channel, "Barrier", request, token)


def barrier_crowd(channel, token):
    """200 participants waiting at one barrier (each polling as the client does), then released."""
    codes: Counter = Counter()
    lock = threading.Lock()
    stop = threading.Event()

    def participant(k: int) -> None:
        request = pb.BarrierRequest(name="crowd", count=201, timeout_s=120, participant=f"p{k}")
        stub = channel.unary_unary(
            f"/{SERVICE_NAME}/Barrier",
            request_serializer=pb.BarrierRequest.SerializeToString,
            response_deserializer=pb.BarrierResponse.FromString,
        )
        delay = 0.002
        while not stop.is_set():
            try:
                answer = stub(request, timeout=10, metadata=auth_metadata(token))
            except grpc.RpcError as err:
                with lock:
                    codes[err.code().name] += 1
                return
            if answer.released:
                with lock:
                    codes["released"] += 1
                return
            request.has_ticket, request.ticket = True, answer.generation
            stop.wait(delay)
            delay = min(delay * 2, 0.5)

    threads = [threading.Thread(target=participant, args=(k,)) for k in range(200)]
    for t in threads:
        t.start()
    stop.wait(5.0)  # the victim pulls while 200 wait
    last = _call(
        channel, "Barrier", pb.BarrierRequest(name="crowd", count=201, timeout_s=60, participant="z"), token
    )
    for t in threads:
        t.join(30)
    stop.set()
    return {"last": last, **codes}


def escaping_checkpoints(channel, token):
    """Checkpoint / Restore paths outside the root."""
    return [
        _call(channel, "Checkpoint", pb.CheckpointRequest(path="/etc/graphstore"), token),
        _call(channel, "Restore", pb.RestoreRequest(path="../../etc"), token),
    ]


def token_guessing(channel, token):
    """2,000 wrong tokens as fast as one client sends them (the last attack: it blocks this host)."""
    codes: Counter = Counter()
    started = time.perf_counter()
    for k in range(2000):
        answer = _call(channel, "List", pb.ListRequest(), f"guess-{k:012d}-wrong-token", timeout=5)
        codes[answer.split(":")[0]] += 1
    seconds = time.perf_counter() - started
    return {**codes, "guesses_answered_per_s": round(codes.get("PERMISSION_DENIED", 0) / seconds, 1)}


ATTACKS = [
    ("huge_sample", huge_sample),
    ("wide_sample", wide_sample),
    ("huge_pull", huge_pull),
    ("deep_init", deep_init),
    ("overflowing_init", overflowing_init),
    ("six_big_inits", six_big_inits),
    ("absurd_barrier_timeout", absurd_barrier_timeout),
    ("barrier_crowd_200", barrier_crowd),
    ("escaping_checkpoints", escaping_checkpoints),
]
