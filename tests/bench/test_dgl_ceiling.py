"""bench/dgl/grpc_ceiling.py: a ceiling call of any request and answer size, sized like graphstore's calls.

The ceiling is a bare grpcio call; its request's first 8 bytes say how long the answer is, so one
server answers a remote pull's sizes and the 1-hop sample's alike.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def grpc_ceiling(bench_dgl):
    return bench_dgl("grpc_ceiling")


def test_a_request_has_the_asked_size_and_says_the_answers_length(grpc_ceiling):
    request = grpc_ceiling.ceiling_request(request_bytes=4_110, answer_bytes=109_010)
    assert len(request) == 4_110 and grpc_ceiling.answer_length(request) == 109_010
    smallest = grpc_ceiling.ceiling_request(request_bytes=8, answer_bytes=0)
    assert len(smallest) == 8 and grpc_ceiling.answer_length(smallest) == 0
    big = 2**40 + 3  # more than 32 bits survive
    assert grpc_ceiling.answer_length(grpc_ceiling.ceiling_request(16, big)) == big
    with pytest.raises(ValueError, match="request_bytes"):
        grpc_ceiling.ceiling_request(request_bytes=7, answer_bytes=10)
    with pytest.raises(ValueError, match="answer_bytes"):
        grpc_ceiling.ceiling_request(request_bytes=8, answer_bytes=-1)
    with pytest.raises(ValueError, match="at least 8 bytes"):
        grpc_ceiling.answer_length(b"1234")


def test_a_pulls_ceiling_call_carries_its_ids_up_and_its_rows_down(grpc_ceiling):
    call = grpc_ceiling.pull_ceiling_call(rows=1_000, threads=4, calls=300, row_bytes=400)
    assert call == grpc_ceiling.CeilingCall("ceiling/1000/4t", 8_000, 400_000, 4, 300)


def test_the_one_hop_ceiling_has_the_mean_sizes_of_the_remote_sample_calls(grpc_ceiling):
    wire = {
        "SampleNeighbors": {"calls": 30, "request_bytes": 123_300, "answer_bytes": 3_270_304},
        "Pull": {"calls": 2, "request_bytes": 16, "answer_bytes": 800},  # another method: not counted
    }
    sizes = grpc_ceiling.one_hop_call_sizes(wire, samples=15)
    assert sizes == {"request_bytes": 4_110, "answer_bytes": 109_010, "calls_per_sample": 2.0}
    assert grpc_ceiling.one_hop_call_sizes({"Pull": wire["Pull"]}, samples=15) is None  # all co-located
    tiny = {"SampleNeighbors": {"calls": 2, "request_bytes": 6, "answer_bytes": 10}}
    assert grpc_ceiling.one_hop_call_sizes(tiny, 2)["request_bytes"] == grpc_ceiling.HEADER_BYTES
    with pytest.raises(ValueError, match="samples"):
        grpc_ceiling.one_hop_call_sizes(wire, samples=0)


def test_the_server_answers_each_size_asked_and_is_ended(grpc_ceiling, tmp_path):
    calls = [
        grpc_ceiling.pull_ceiling_call(rows=1_000, threads=1, calls=6, row_bytes=400),
        grpc_ceiling.pull_ceiling_call(rows=1_000, threads=4, calls=8, row_bytes=400),
        grpc_ceiling.CeilingCall("ceiling/sample/1hop", 4_110, 109_010, 1, 5),
    ]
    # measure() raises on an answer of another length than the request asked for.
    results = grpc_ceiling.ceilings(calls, log_dir=tmp_path, repeats=1, warmup=1)
    assert set(results) == {call.key for call in calls}
    for call in calls:
        entry = results[call.key]
        assert (entry["request_bytes"], entry["answer_bytes"]) == (call.request_bytes, call.answer_bytes)
        assert entry["calls"] == call.calls and entry["threads"] == call.threads
        assert entry["calls_per_s"] > 0 and entry["call_ms"] > 0
    log = (tmp_path / "grpc-ceiling-server.log").read_text()
    pid = int(log.split(f"{grpc_ceiling.READY} (pid ")[1].split(")")[0])
    assert not Path(f"/proc/{pid}").exists()  # ended and reaped once ceilings() returns
